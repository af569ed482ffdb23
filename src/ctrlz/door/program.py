"""The workspace daemon's program: ``python -m ctrlz.door.program ROOT STORE [--parent-pid PID]``.

The session's daemon (:mod:`ctrlz.session.daemon.daemon_process`, what
:func:`ctrlz.session.daemon_client.spawn` starts) with the native door's request added. It is
a face, like the service that also runs daemons: the door renders with the CLI's functions,
and the session layer never imports a face."""

from __future__ import annotations

from .. import platform

if __name__ == "__main__":  # the program, in a session of its own (never an importer)
    # its start-up yields the cores from its first import on (its imports take ~0.5 s on a
    # busy machine): see :func:`ctrlz.session.daemon.daemon_startup.lower_group_priority`,
    # which finds this done, and raises the group back once the daemon is ready
    platform.set_autogroup_nice(10)

from ..session.daemon import daemon_process  # noqa: E402
from . import serve  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    return daemon_process.main(argv, ops={"door": serve.handle},
                               at_once={"door": serve.at_once},
                               captures={"door": serve.captures})


if __name__ == "__main__":
    raise SystemExit(main())
