"""``python -m ctrlz.sandbox.launcher POLICY_JSON_FILE -- CMD...``: confine, then exec CMD.

Why a launcher process of its own: Landlock and seccomp confine the process that asks and
everything it starts, for good. ``ctrlz run`` and its tracer (strace) must stay free (they
write the store, the session DB, the trace log), so the tracer execs this launcher, which
confines itself and then becomes the agent by ``execvp`` (same pid, so the tracer's records
and the ``sandboxed`` record in the store name the agent itself). Never ``preexec_fn`` on
the tracer's ``Popen``: that would confine strace too.

The policy file holds :meth:`SandboxPolicy.to_json` plus ``"mechanism"``: ``"landlock"``
(path rules, the proxy's TCP port under ABI 4, scopes) or ``"bwrap"`` (CMD is a bwrap command
line, which does the mounts: only the network part here, inherited by bwrap and all inside),
and ``"record"``: where to write the ``sandboxed`` record (:mod:`.policy`) first, while the
store can still be written. Then ``ctrlz.sandbox.seccomp.install(net_mode)``. Any failure
ends the launcher with one line on stderr and status 126, before CMD runs: never unconfined.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

from . import landlock
from .policy import SandboxPolicy, sandboxed_record

EXIT_REFUSED = 126


def confine(policy: SandboxPolicy, mechanism: str) -> None:
    """Apply ``policy`` to this process: Landlock (all of it, or only the proxy port under
    bwrap), then the seccomp network filter."""
    proxy_port = policy.proxy[1] if policy.proxy else None
    if mechanism == "landlock":
        version = landlock.abi()
        rules = landlock.path_rules(version, policy.writable, policy.unreadable,
                                    policy.devices)
        ruleset = landlock.Ruleset(version=version, net=proxy_port is not None)
        for path, rights in rules:
            ruleset.allow_path(path, rights)
        if proxy_port is not None:
            ruleset.allow_connect(proxy_port)
        ruleset.restrict_self()
    elif proxy_port is not None:  # bwrap does the filesystem; the proxy port is ours
        version = landlock.abi()
        if version < 4:
            raise OSError(f"--allow-host needs Landlock ABI 4 (this kernel: {version})")
        ruleset = landlock.Ruleset(version=version, net=True, scopes=False, fs=False)
        ruleset.allow_connect(proxy_port)
        ruleset.restrict_self()
    install = _seccomp_install()
    if install is not None:
        install(policy.net_mode)
    elif policy.net_mode != "on":
        raise OSError("--net off and --allow-host need ctrlz.sandbox.seccomp, which is "
                      "missing from this install")


def _seccomp_install():  # type: ignore[no-untyped-def]
    try:
        from .seccomp import install  # another part of this package; absent in older trees
    except ImportError:
        return None
    return install


def _write_record(path: str, mechanism: str, session: str) -> None:
    """This process (soon the agent, or bwrap) is sandboxed: say so where the daemon and the
    service look (atomically: a reader never sees half of it)."""
    record = sandboxed_record(os.getpid(), self_confined=True, mode=mechanism, session=session)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(record, f)
    os.replace(tmp, path)


def _run_bwrap(command: list[str]) -> int:
    """Run bwrap as a child and die the way its command died. bwrap's init (pid 1 of the
    sandbox's pid namespace) turns "killed by signal N" into exit status 128+N; the caller
    of ``ctrlz run`` must see the signal, as a shell would. (A command that exits 128+N by
    itself is reported as killed by N: bwrap leaves no way to tell them apart.)"""
    import signal

    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # they reach the sandbox through the process group
    try:
        pid = os.fork()
    except OSError as exc:
        print(f"ctrlz: the sandbox could not be made, nothing was run: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    if pid == 0:
        for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        try:
            os.execvp(command[0], command)
        finally:
            os._exit(EXIT_REFUSED)
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if status < 0 or 128 < status < 128 + signal.NSIG:
        number = -status if status < 0 else status - 128
        if number not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(number, signal.SIG_DFL)
        sys.stdout.flush()
        os.kill(os.getpid(), number)
    return status


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    if len(args) < 3 or args[1] != "--":
        print("usage: python -m ctrlz.sandbox.launcher POLICY_JSON_FILE -- CMD [ARG...]",
              file=sys.stderr)
        return 2
    try:
        with open(args[0], encoding="utf-8") as f:
            data = json.load(f)
        policy = SandboxPolicy.from_json(data)
        mechanism = str(data.get("mechanism", "landlock"))
        if data.get("record"):
            _write_record(str(data["record"]), mechanism, str(data.get("session", "")))
        confine(policy, mechanism)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        print(f"ctrlz: the sandbox could not be made, nothing was run: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    command = args[2:]
    sys.stdout.flush()
    if mechanism == "bwrap":
        return _run_bwrap(command)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"ctrlz: {command[0]}: {exc.strerror}", file=sys.stderr)
        return 127 if isinstance(exc, FileNotFoundError) else EXIT_REFUSED
    return EXIT_REFUSED  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
