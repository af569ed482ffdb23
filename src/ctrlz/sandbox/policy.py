"""What a sandboxed run may touch: the :class:`SandboxPolicy`, its defaults and its checks.

Why a policy object of its own: the same decisions feed two mechanisms (Landlock rules in
:mod:`.launcher`, bubblewrap mounts in :mod:`.bwrap`), and the launcher reads it in another
process, so it is plain data with :meth:`SandboxPolicy.to_json` and
:meth:`SandboxPolicy.from_json`.

The default (issue 42, item 2): the workspace roots, the temp dirs, the terminal devices, the
agents' own state and the package caches are writable; everything else is read-only; the usual
secrets and ctrlz's own store home and runtime dir are unreadable, so an agent can neither
read other workspaces, remote keys or the service token, nor delete its own undo history.

Every bad input (issue 42, item 7) is a :class:`~ctrlz.errors.UsageError` of one line that
says what to change, raised by :func:`build` before anything starts.

**Which processes are sandboxed.** While a sandboxed ``ctrlz run`` lives, the file
``<store>/sandboxed/<session id>.json`` holds ``{"pid": P, "start": T, "self": S, "mode": M,
"session": ID}``: ``P`` is the launcher, which writes the record: the agent itself after
its exec (the Python launcher), or the native launcher's observer, the unconfined parent of
the agent (or of bwrap); ``T`` its start time in clock ticks since boot (field 22 of
``/proc/P/stat``, so a recycled pid does not match), ``S`` whether ``P`` itself is confined
(false for the observer). A process is sandboxed when ``P`` (with its
start time ``T``) is among its ancestors, or is the process itself when ``S``, or is traced
by the tracer the record names (``"tracer"`` and ``"tracer_start"``: ``P``'s ``TracerPid`` when
the record is written, so an orphan re-parented away from ``P`` still counts;
:mod:`ctrlz.session.daemon.confined` applies the rule). The file is removed when the run ends (a
crash
leaves it, and then its ``T`` no longer matches).
"""

from __future__ import annotations

import os

from ..errors import UsageError
from ..paths import within

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs the launcher, which loads this module, ~4 ms
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Any

__all__ = ["MODES", "NETS", "SECRETS", "SandboxPolicy", "agent_state", "build",
           "check_host", "default_unreadable", "default_writable", "sandboxed_record"]

MODES = ("auto", "landlock", "bwrap")
NETS = ("on", "off")

#: Secrets under $HOME no sandboxed process may read.
SECRETS = (".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".kube", ".netrc",
           ".git-credentials", ".docker/config.json", ".config/gh", ".pypirc")

#: What each agent writes besides the workspace (its state, settings, logs), by the name it
#: is run as. Package caches are in :data:`CACHES`, writable whatever runs.
AGENT_STATE = {
    "claude": (".claude", ".claude.json"),
    "codex": (".codex",),
    "gemini": (".gemini",),
    "copilot": (".copilot",),
    "opencode": (".config/opencode", ".local/share/opencode", ".local/state/opencode"),
}
CACHES = (".npm", ".cache")
#: Devices a terminal program needs to open for writing (and their ioctls).
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts")



#: Every field of a policy with its default (a fresh list each time; see SandboxPolicy).
FIELDS: dict[str, Any] = {
    "mode": "auto", "roots": [], "writable": [], "unreadable": [], "devices": list(DEVICES),
    "net": "on", "allow_hosts": [], "allow_write": [], "deny_read": [], "protected": [],
    "sockets": [], "proxy": None, "inbox": None, "markers": [],
}


class SandboxPolicy:
    """One run's sandbox. Paths are absolute; ``writable`` and ``unreadable`` hold the
    defaults and the user's additions together (``allow_write``/``deny_read`` keep the user's
    own, to show them). ``protected``: the store home and runtime dir, never writable.
    ``sockets``: the daemon's socket inside ``protected``, which a confined hook still
    reaches. ``proxy``: ``(host, port)`` of the allow-list proxy, when ``allow_hosts`` is set
    and it runs. ``inbox``: the tool-call inbox inside the store, writable (and in
    ``writable``) when hooks cannot reach the daemon. ``markers``: files inside a hidden
    directory that must still *seem* to exist (bwrap binds an empty file there): the store's
    ``catalog.db``, by which a hook's locator finds it.

    A plain class, not a dataclass: the launcher loads this module before every sandboxed
    command, and ``dataclasses`` (with ``inspect``) was most of its import time."""

    mode: str
    roots: list[str]
    writable: list[str]
    unreadable: list[str]
    devices: list[str]
    net: str
    allow_hosts: list[str]
    allow_write: list[str]
    deny_read: list[str]
    protected: list[str]
    sockets: list[str]
    proxy: tuple[str, int] | None
    inbox: str | None
    markers: list[str]

    def __init__(self, **values: Any) -> None:
        unknown = set(values) - set(FIELDS)
        if unknown:
            raise TypeError(f"unknown policy fields: {', '.join(sorted(unknown))}")
        for name, default in FIELDS.items():
            value = values.get(name, default)
            setattr(self, name, list(value) if isinstance(value, list) else value)

    def __repr__(self) -> str:
        return f"SandboxPolicy({self.to_json()!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SandboxPolicy) and self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]  # mutable

    @property
    def net_mode(self) -> str:
        """The seccomp mode: ``off``, ``proxy`` (an allow-list) or ``on``."""
        if self.net == "off":
            return "off"
        return "proxy" if self.allow_hosts else "on"

    def to_json(self) -> dict[str, Any]:
        return {name: (list(v) if isinstance(v := getattr(self, name), (list, tuple))
                       else v) for name in FIELDS}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SandboxPolicy:
        known = {k: v for k, v in data.items() if k in FIELDS}
        if known.get("proxy") is not None:
            host, port = known["proxy"]
            known["proxy"] = (str(host), int(port))
        return cls(**known)


def _home(env: Mapping[str, str]) -> str:
    return env.get("HOME") or os.path.expanduser("~")


def temp_dirs(env: Mapping[str, str]) -> list[str]:
    """Scratch space every tool expects to write: $TMPDIR, /tmp, /dev/shm (not snapshotted:
    what is left there is not undone)."""
    dirs = [env.get("TMPDIR", ""), "/tmp", "/dev/shm"]
    return [d for d in dict.fromkeys(dirs) if d and os.path.isdir(d)]


def agent_state(argv0: str, env: Mapping[str, str], *, create: bool = False) -> list[str]:
    """The state paths of every known agent (all of them: an agent may run another), and,
    with ``create``, the directories of the one named by ``argv0`` made if missing (Landlock
    can only grant a path that exists, and the agent would make it on its first run)."""
    home = _home(env)
    out = [os.path.join(home, p) for names in AGENT_STATE.values() for p in names]
    own = AGENT_STATE.get(os.path.basename(argv0), ())
    if create:
        for name in own:
            path = os.path.join(home, name)
            if not name.endswith(".json") and not os.path.exists(path):
                try:
                    os.makedirs(path, mode=0o700)
                except OSError:
                    pass
    return out


def default_writable(roots: Sequence[str], env: Mapping[str, str], argv0: str = "") -> list[str]:
    home = _home(env)
    return [*roots, *temp_dirs(env), *agent_state(argv0, env),
            *(os.path.join(home, c) for c in CACHES)]


def default_unreadable(env: Mapping[str, str], protected: Sequence[str]) -> list[str]:
    home = _home(env)
    return [*(os.path.join(home, s) for s in SECRETS), *protected]


def check_host(value: str, source: str) -> str:
    """``HOST`` or ``HOST:PORT`` (``*.`` wildcards, ``[v6]``); else a one-line UsageError.
    The proxy's own parser decides (:func:`ctrlz.sandbox.proxy.validate_host`), so what
    passes here is what the proxy will match; the error names where the value was set."""
    from .proxy import validate_host  # asyncio and more: only when a host is given

    try:
        validate_host(value)
    except UsageError as exc:
        message = str(exc)
        if source != "--allow-host":
            message = message.replace("--allow-host", source, 1)
        raise UsageError(message) from None
    return value


def build(*, mode: str, roots: Sequence[str], env: Mapping[str, str], protected: Sequence[str],
          allow_write: Iterable[tuple[str, str]] = (), deny_read: Iterable[tuple[str, str]] = (),
          net: tuple[str, str] = ("on", "default"),
          allow_hosts: Iterable[tuple[str, str]] = (), argv0: str = "",
          sockets: Sequence[str] = ()) -> SandboxPolicy:
    """The policy of one run, checked: every value comes with where it was set (``--net``,
    ``[sandbox] net`` in a file), which the one-line error names."""
    if mode not in MODES:
        raise UsageError(f"unknown sandbox mode {mode!r}; use --sandbox=auto, "
                         "--sandbox=landlock or --sandbox=bwrap")
    net_value, net_source = net
    if net_value not in NETS:
        raise UsageError(f"{net_source} {net_value!r} is not on or off; write on or off")
    hosts = [check_host(h, source) for h, source in allow_hosts]
    if hosts and net_value == "off":
        raise UsageError("--net off and --allow-host contradict each other (no socket may "
                         "leave, yet a host is allowed); drop one of them")
    real_protected = [os.path.realpath(p) for p in protected]
    extra_write = []
    for path, source in allow_write:
        full = os.path.abspath(os.path.expanduser(path))
        if not os.path.exists(full):
            raise UsageError(f"{source} {path}: no such file or directory; create it first or "
                             "drop the option")
        real = os.path.realpath(full)
        for top in real_protected:
            if within(real, top) or within(top, real):
                how = "lies inside" if within(real, top) else "holds"
                raise UsageError(f"{source} {path} {how} ctrlz's store or runtime dir ({top}), "
                                 "which a sandboxed agent may never write; allow another path")
        extra_write.append(real)
    extra_deny = [os.path.abspath(os.path.expanduser(p)) for p, _ in deny_read]
    agent_state(argv0, env, create=True)
    writable = list(dict.fromkeys([*default_writable(roots, env, argv0), *extra_write]))
    return SandboxPolicy(
        mode=mode, roots=[os.path.realpath(r) for r in roots], writable=writable,
        unreadable=list(dict.fromkeys([*default_unreadable(env, protected), *extra_deny])),
        net=net_value, allow_hosts=hosts, allow_write=extra_write, deny_read=extra_deny,
        protected=list(protected), sockets=list(sockets))


def sandboxed_record(pid: int, *, self_confined: bool, mode: str, session: str) -> dict[str, Any]:
    """The content of ``<store>/sandboxed/<session>.json`` (see the module's docstring)."""
    tracer = tracer_pid(pid)
    return {"pid": pid, "start": start_time(pid), "self": self_confined, "mode": mode,
            "session": session, "tracer": tracer,
            "tracer_start": start_time(tracer) if tracer else None}


def tracer_pid(pid: int) -> int:
    """The pid ptrace-tracing ``pid`` (``TracerPid`` in ``/proc/PID/status``), 0 if none."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"TracerPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def start_time(pid: int) -> int | None:
    """Field 22 of ``/proc/PID/stat``: when the process started, in clock ticks since boot."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    return int(data[data.rindex(b")") + 2:].split()[19])
