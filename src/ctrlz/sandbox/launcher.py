"""``python -m ctrlz.sandbox.launcher SPEC_FILE -- CMD...``: confine, then exec CMD.

Why a launcher process of its own: Landlock and seccomp confine the process that asks and
everything it starts, for good. ``ctrlz run`` and its tracer (strace) must stay free (they
write the store, the session DB, the trace log), so the tracer execs this launcher, which
confines itself and then becomes the agent by ``execvp`` (same pid, so the tracer's records
and the ``sandboxed`` record in the store name the agent itself). Never ``preexec_fn`` on
the tracer's ``Popen``: that would confine strace too.

This is the portable twin of ``ctrlz-sandbox`` (``launcher.c``), which ``ctrlz run`` prefers
where setup.py could build it (a C compiler on Linux), because it starts 30-100 ms sooner.
Both read the same spec (:mod:`.spec`, where every decision was made): write the
``sandboxed`` record (:mod:`.policy`) first, while the store can still be written; Landlock
(all of it, or under bwrap only the proxy's port: CMD is then a bwrap command line, which
does the mounts); each seccomp filter; then exec CMD, or run it and die the way it died
(``wait``, bwrap). Any failure ends the launcher with status 126 before CMD runs (never
unconfined), its cause in the spec's ``refusal`` file (``ctrlz run`` says it and exits 2) or,
without one, as one line on stderr. What this twin does not do is observe (``log``): without
the native launcher, the tracer records the refused writes (:mod:`ctrlz.sources.trace.denials`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

from . import landlock
from .policy import sandboxed_record
from .spec import parse, record_extra

EXIT_REFUSED = 126


def confine(items: list[tuple[str, str]]) -> None:
    """Apply a spec's Landlock ruleset and seccomp filters to this process, in its order."""
    values = dict(items)
    if "attr" in values:
        ruleset = landlock.Ruleset.from_attr(int(values["fs"]), int(values["net"]),
                                             int(values["scoped"]), int(values["attr"]))
        for key, value in items:
            if key == "path":
                rights, _, path = value.partition(":")
                ruleset.allow_path(path, int(rights))
            elif key == "port":
                ruleset.allow_connect(int(value))
        ruleset.restrict_self()
    filters = [bytes.fromhex(v) for k, v in items if k == "seccomp"]
    if filters:
        from .seccomp import load

        for code in filters:
            load(code)


def _write_record(path: str, items: list[tuple[str, str]]) -> None:
    """This process (soon the agent, or bwrap) is sandboxed: say so where the daemon and the
    service look (atomically: a reader never sees half of it)."""
    extra = record_extra(items)
    record = sandboxed_record(os.getpid(), self_confined=dict(items).get("self") != "0",
                              mode=str(extra.pop("mode", "")),
                              session=str(extra.pop("session", "")))
    record.update(extra)
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


def _refuse(values: dict[str, str], cause: object) -> int:
    """Say why nothing was run: in the refusal file when the spec names one, else on stderr."""
    path = values.get("refusal")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            if f.tell() == 0:  # the first cause stands
                f.write(f"{cause}\n")
    else:
        print(f"ctrlz: the sandbox could not be made, nothing was run: {cause}",
              file=sys.stderr)
    return EXIT_REFUSED


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    if len(args) < 3 or args[1] != "--":
        print("usage: python -m ctrlz.sandbox.launcher SPEC_FILE -- CMD [ARG...]",
              file=sys.stderr)
        return 2
    values: dict[str, str] = {}
    try:
        with open(args[0], "rb") as f:
            items = parse(f.read())
        values = dict(items)
        if values.get("record"):
            _write_record(values["record"], items)
        confine(items)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        return _refuse(values, exc)
    command = args[2:]
    sys.stdout.flush()
    if values.get("wait") == "1":
        return _run_bwrap(command)
    try:
        if values.get("exec"):
            os.execv(values["exec"], command)
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"ctrlz: {command[0]}: {exc.strerror}", file=sys.stderr)
        return 127 if isinstance(exc, FileNotFoundError) else EXIT_REFUSED
    return EXIT_REFUSED  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
