"""What the sandbox's launcher applies, decided here and written in a form C reads without a
parser: the *spec*.

Why: the launcher runs between the tracer and the agent, before every sandboxed command, so
its start is the sandbox's start-up. Its native twin (``ctrlz-sandbox``, ``launcher.c``) starts
in a millisecond where a Python interpreter took 30-100 ms; to keep one set of decisions, every
one of them is made here, in ``ctrlz run``'s process, and both launchers only apply them: the
Landlock ruleset's masks (:func:`.landlock.ruleset_attr`), each path with its rights
(:func:`.landlock.path_rules`), the proxy's TCP port, the seccomp programs as bytes
(:func:`.seccomp.build_filter`), where the ``sandboxed`` record goes and what it says, and, for
the observer of refused writes (:mod:`.observer`), its filter, the writable set and its log.

The file is a series of NUL-terminated ``key=value`` items (a path holds no NUL):

``refusal``  where the launcher writes why it could not make the sandbox (then it runs
             nothing and exits 126; ``ctrlz run`` says the cause and exits 2)
``exec``     the command's file, found on its PATH by ``ctrlz run``: the launcher execs it
             with the command's own arguments (absent: it searches PATH itself)
``record``   where the ``sandboxed`` record goes (:mod:`.policy`), written first
``extra``    the record's members after pid, start, self and tracer, as JSON text
``self``     1 when the record's process is confined itself (it execs the command)
``attr``     the size of the Landlock ruleset's struct; absent: no Landlock at all
``fs``, ``net``, ``scoped``  its handled rights and scopes
``filemask`` the rights a rule on a non-directory may carry (the kernel refuses others)
``path``     ``RIGHTS:PATH``, one rule (a path gone by then is skipped, as before)
``port``     a TCP port ``connect`` may reach
``seccomp``  a filter program in hex, installed in order after Landlock
``wait``     1: run the command as a child and die the way it died (bwrap, module
             :mod:`.launcher`)
``log``, ``max``, ``notify``, ``call``, ``writable``  the observer's (:mod:`.observer`)
``send``     1: the observer's part inside bwrap (filter, send the listener, exec)
"""

from __future__ import annotations

import json
import os

from . import landlock
from .policy import SandboxPolicy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["build", "encode", "parse"]


def build(policy: SandboxPolicy, mechanism: str, *, version: int, record: str | None,
          session: str, observer: list[tuple[str, str]] | None = None,
          rules: list[tuple[str, int]] | None = None, refusal: str | None = None,
          executable: str | None = None) -> bytes:
    """The spec of ``policy`` under ``mechanism`` (``landlock`` or ``bwrap``) on Landlock ABI
    ``version``. ``observer``: the observer's items (:func:`.observer.items`), which also make
    the record's process the unconfined observer (``self`` 0) rather than the command.
    ``rules``: :func:`.landlock.path_rules` of the policy, when the caller has them.
    ``refusal``: the file for the cause when the sandbox cannot be made. ``executable``:
    the file the launcher execs the command as (under bwrap, the launcher inside does)."""
    from .seccomp import build_filter

    items: list[tuple[str, str]] = [("refusal", refusal)] if refusal else []
    if executable and mechanism != "bwrap":
        items.append(("exec", executable))
    if record:
        items.append(("record", record))
    extra = json.dumps({"mode": mechanism, "session": session})[1:-1]
    items += [("extra", extra), ("self", "0" if observer else "1")]
    port = policy.proxy[1] if policy.proxy else None
    attr = None
    if mechanism == "landlock":
        attr = landlock.ruleset_attr(version, net=port is not None, scopes=True)
        if rules is None:
            rules = landlock.path_rules(version, policy.writable, policy.unreadable,
                                        policy.devices)
    elif port is not None:  # bwrap does the filesystem; the proxy port is ours
        if version < 4:
            raise OSError(f"--allow-host needs Landlock ABI 4 (this kernel: {version})")
        attr = landlock.ruleset_attr(version, net=True, scopes=False, fs=False)
        rules = []
    if attr is not None:
        fs, net, scoped, size = attr
        items += [("attr", str(size)), ("fs", str(fs)), ("net", str(net)),
                  ("scoped", str(scoped)), ("filemask", str(landlock.FILE_RIGHTS))]
        items += [("path", f"{rights}:{path}") for path, rights in rules]
        if port is not None:
            items.append(("port", str(port)))
    items.append(("seccomp", build_filter(policy.net_mode).hex()))
    if mechanism == "bwrap":
        items.append(("wait", "1"))
    items += observer or []
    return encode(items)


def encode(items: list[tuple[str, str]]) -> bytes:
    """Items as the spec's bytes."""
    return b"".join(os.fsencode(k) + b"=" + os.fsencode(v) + b"\0" for k, v in items)


def parse(data: bytes) -> list[tuple[str, str]]:
    """The items of a spec, in order (the Python launcher's reading of :func:`build`)."""
    out = []
    for raw in data.split(b"\0"):
        if raw:
            key, sep, value = raw.partition(b"=")
            if not sep:
                raise ValueError(f"bad item in the sandbox spec: {raw[:40]!r}")
            out.append((key.decode("ascii"), os.fsdecode(value)))
    return out


def record_extra(items: list[tuple[str, str]]) -> dict[str, Any]:
    """The ``extra`` members of a spec's record, as a dict."""
    return json.loads("{" + dict(items).get("extra", "") + "}")
