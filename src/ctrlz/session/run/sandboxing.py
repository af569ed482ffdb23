"""``ctrlz run --sandbox``: the policy of one run, the mechanism, and the confined command line.

The session stays outside: ``ctrlz run`` → strace → the launcher (``ctrlz-sandbox``, or its
Python twin ``python -m ctrlz.sandbox.launcher``) → (bwrap →) the agent. Every decision is
made here and written as the launcher's spec (:mod:`ctrlz.sandbox.spec`). The launcher
writes the ``sandboxed`` record (see :mod:`ctrlz.sandbox.policy`), confines itself and
execs, so neither ctrlz nor its tracer is ever confined, and the record's pid is the
agent's own (Landlock) or bwrap's (bwrap).

Everything that can refuse does so in :func:`prepare`, before the session has a row, a
directory or a snapshot: bad options (one line, exit 2), and a machine where no sandbox can be
made (one line naming the cause and the fix, exit 2). There is no unsandboxed fallback.

One exception, for speed: whether bwrap can make its namespaces here is not probed (a bwrap
run of its own, 5-10 ms every time, 300 ms on a cold cache), and not cached either (a machine
can lose user namespaces between two runs). The native launcher finds out in the run itself:
bwrap's stderr goes to a memfd until the launcher inside has made its filter and handed its
listener out (observe.c); if bwrap dies first, its first line is the cause, written to the
``refused`` file with anything else the launcher refuses for. :meth:`Plan.refusal` turns it
into the same one line and exit 2, after the pre-run snapshot but before the agent ran. The
Python launcher cannot tell bwrap's failure from its command's, so without the native one
bwrap is still probed in :func:`prepare`.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ... import platform
from ...errors import UsageError
from ...sandbox import landlock, observer, spec
from ...sandbox.bwrap import bwrap_argv
from ...sandbox.policy import SandboxPolicy, build
from ...sandbox.probe import Support, choose, support

if TYPE_CHECKING:
    from ...sources.trace import Denial
    from ..protected import ProtectedWorkspace as Workspace

RECORDS = "sandboxed"  # <store>/sandboxed/<session id>.json, while the run lives


@dataclass
class SandboxOptions:
    """What the command line asked for (None / empty: not given; the ``[sandbox]`` section
    of the config fills in). ``mode``: None without ``--sandbox``, ``""`` for a bare
    ``--sandbox`` (the config's mode, ``auto`` by default)."""

    mode: str | None = None
    allow_write: list[str] = field(default_factory=list)
    deny_read: list[str] = field(default_factory=list)
    net: str | None = None
    allow_hosts: list[str] = field(default_factory=list)
    runtime_dir: str | None = None


def wanted(ws: Workspace, options: SandboxOptions | None) -> bool:
    return (options is not None and options.mode is not None) or bool(
        ws.config["sandbox_enabled"])


def _config_source(ws: Workspace, key: str) -> str:
    source = ws.config.sources.get(key, "default")
    name = key.removeprefix("sandbox_")
    return f"[sandbox] {name} in {source}" if not source.startswith("$") else source


@dataclass
class Plan:
    """A checked policy and the mechanism that will enforce it."""

    policy: SandboxPolicy
    mechanism: str  # "landlock" or "bwrap"
    info: Support
    store: str
    tmp: str | None = None
    proxy: Any = None
    decisions: list[dict[str, Any]] = field(default_factory=list)
    session_id: str = ""
    #: the native launcher, which also observes the refused writes (ctrlz.sandbox.observer);
    #: None: the Python launcher, and the tracer records them
    native: str | None = None
    #: the Landlock path rules, worked out once by :func:`prepare`
    rules: list[tuple[str, int]] | None = None
    #: None when Landlock can express the policy, else why not (:func:`~ctrlz.sandbox.probe.
    #: choose`'s ``landlock_fits``)
    fits: str | None = None

    @property
    def observes(self) -> bool:
        return self.native is not None

    @property
    def log(self) -> str:
        assert self.tmp is not None
        return os.path.join(self.tmp, "denials")

    @property
    def refusal_path(self) -> str:
        assert self.tmp is not None
        return os.path.join(self.tmp, "refused")

    @property
    def record_path(self) -> str:
        return os.path.join(self.store, RECORDS)

    def start(self, session_id: str,
              record: Callable[[dict[str, Any]], None] | None = None) -> None:
        """The proxy (``--allow-host``), giving each decision to ``record`` (called on the
        proxy's thread); then the directory of the files the launcher reads."""
        if self.policy.allow_hosts:
            from ...sandbox.proxy import start_proxy

            self.proxy = start_proxy(list(self.policy.allow_hosts),
                                     record or self.decisions.append)
            self.policy.proxy = (self.proxy.host, self.proxy.port)
        self.tmp = tempfile.mkdtemp(prefix="ctrlz-sandbox-")
        self.session_id = session_id

    def env(self, base: dict[str, str] | None = None) -> dict[str, str] | None:
        """The agent's environment: the proxy's variables when there is one."""
        if self.proxy is None:
            return base
        return {**(base if base is not None else os.environ), **self.proxy.env()}

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """``argv`` behind the launcher (and bwrap)."""
        assert self.tmp is not None
        os.makedirs(self.record_path, exist_ok=True)
        command = list(argv)
        executable = resolved(command[0], self.env())
        found = None
        if self.native is not None:
            found = observer.items(self.policy, self.mechanism, self.log)
            if self.mechanism == "bwrap":  # the filter goes on inside, after bwrap's mounts
                inner = os.path.join(self.tmp, "inside")
                with open(inner, "wb") as f:
                    f.write(spec.encode([("send", "1"), *[i for i in found
                                                          if i[0] == "notify"],
                                         *([("exec", executable)] if executable else [])]))
                command = [self.native, inner, "--", *command]
        if self.mechanism == "bwrap":
            placeholder = os.path.join(self.tmp, "catalog.db")
            open(placeholder, "wb").close()
            assert self.info.bwrap is not None
            command = bwrap_argv(self.policy, command, bwrap=self.info.bwrap,
                                 placeholder=placeholder)
        data = spec.build(self.policy, self.mechanism, version=self.info.landlock_abi,
                          record=os.path.join(self.record_path, f"{self.session_id}.json"),
                          session=self.session_id, observer=found, rules=self.rules,
                          refusal=self.refusal_path, executable=executable)
        path = os.path.join(self.tmp, "spec")
        with open(path, "wb") as f:
            f.write(data)
        if self.native is not None:
            return [self.native, path, "--", *command]
        return [sys.executable, "-P", "-m", "ctrlz.sandbox.launcher", path, "--", *command]

    def refusal(self) -> UsageError | None:
        """Why the launcher could not make the sandbox (it ran nothing, and wrote the cause),
        as the one-line error ``ctrlz run`` ends with; None when the sandbox was made."""
        try:
            with open(self.refusal_path, encoding="utf-8", errors="replace") as f:
                cause = f.readline().strip()
        except FileNotFoundError:
            return None
        if not cause:
            return None
        if self.mechanism == "bwrap" and cause.startswith("bwrap"):  # as a probe would
            _, why = choose(self.policy.mode, replace(self.info, bwrap_reason=cause),
                            landlock_fits=self.fits)
        else:
            why = f"the sandbox could not be made: {cause}"
        return UsageError(f"ctrlz run --sandbox refused: {why}")

    def refused(self) -> tuple[list[Denial], int]:
        """The writes the observer saw refused, each with the errno this mechanism answers,
        and how many more it only counted."""
        from ...sources.trace import Denial

        found, dropped = observer.read(self.log)
        errno = observer.ERRNO[self.mechanism]
        return [Denial(*row, errno) for row in found], dropped

    def close(self) -> None:
        if self.proxy is not None:
            self.proxy.close()
            self.proxy = None
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None
        try:
            os.unlink(os.path.join(self.record_path, f"{self.session_id}.json"))
        except (OSError, AttributeError):
            pass


def resolved(program: str, env: dict[str, str] | None) -> str | None:
    """The file ``program`` names on the agent's PATH, as its shell would find it (None: a
    path already, or not found, and the launcher searches itself). Why here: the launcher's
    own search tries each PATH entry, and under the tracer every failed ``execve`` is a stop
    (a plain run's strace searches PATH itself and execs once)."""
    if "/" in program:
        return None
    path = (env if env is not None else os.environ).get("PATH", os.defpath)
    return shutil.which(program, path=path)


def hooks_reach_daemon() -> bool:
    """Whether the agent's hooks hand their captures to the daemon: the native ``ctrlz-hook``
    door does (a C program beside this interpreter), unless ``CTRLZ_DOOR=0`` sends it to the
    Python hook, which writes the store itself. Without the door, a sandboxed run opens
    ``<store>/toolcalls/inbox/`` alone for writing, so that a file tool's pre-image still
    lands (a confined process could then also delete a capture not yet indexed: the door is
    the stronger path)."""
    if os.environ.get("CTRLZ_DOOR") == "0":
        return False
    door = os.path.join(os.path.dirname(sys.executable), "ctrlz-hook")
    try:
        with open(door, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def prepare(ws: Workspace, argv: Sequence[str], options: SandboxOptions | None) -> Plan:
    """The checked plan of a sandboxed run, or a one-line UsageError (exit 2)."""
    from ..daemon_client import SOCKET_NAME
    from ..locator import home_dir

    options = options or SandboxOptions()
    cfg = ws.config
    mode = options.mode or cfg["sandbox_mode"]  # a bare --sandbox ("") takes the config's
    allow_write = [(p, _config_source(ws, "sandbox_allow_write"))
                   for p in cfg["sandbox_allow_write"]]
    allow_write += [(p, "--allow-write") for p in options.allow_write]
    deny_read = [(p, "[sandbox] deny_read") for p in cfg["sandbox_deny_read"]]
    deny_read += [(p, "--deny-read") for p in options.deny_read]
    net = ((options.net, "--net") if options.net is not None
           else (cfg["sandbox_net"], _config_source(ws, "sandbox_net")))
    hosts = [(h, _config_source(ws, "sandbox_allow_hosts")) for h in cfg["sandbox_allow_hosts"]]
    hosts += [(h, "--allow-host") for h in options.allow_hosts]
    protected = [os.path.realpath(home_dir()), os.path.realpath(ws.store_path)]
    if options.runtime_dir:
        protected.append(os.path.realpath(options.runtime_dir))
    policy = build(mode=mode, roots=[str(r) for r in ws.roots], env=os.environ,
                   protected=list(dict.fromkeys(protected)), allow_write=allow_write,
                   deny_read=deny_read, net=net, allow_hosts=hosts, argv0=argv[0],
                   sockets=[os.path.join(ws.store_path, SOCKET_NAME)])
    policy.markers.append(os.path.join(ws.store_path, "catalog.db"))  # the locator's sign
    if not hooks_reach_daemon():
        from ...state.store.toolcall_store import ToolcallStore

        ToolcallStore(ws.store_path).close()  # a hook only leaves captures in a made store
        inbox = os.path.join(ws.store_path, "toolcalls", "inbox")
        os.makedirs(inbox, mode=0o700, exist_ok=True)
        policy.writable.append(inbox)
        policy.inbox = inbox
        policy.markers.append(os.path.join(ws.store_path, "toolcalls", "catalog.db"))
    native = platform.native_launcher()
    info = support(bwrap=False)  # bwrap is not started here (see the module's docstring)
    fits, rules = None, None
    if info.landlock_reason is None:
        try:  # kept for the launcher's spec: walking the hidden paths' parents costs
            rules = landlock.path_rules(info.landlock_abi, policy.writable, policy.unreadable,
                                        policy.devices)
        except ValueError as exc:
            fits = str(exc)
    if native is None and (policy.mode == "bwrap" or info.landlock_reason is not None
                           or fits is not None):
        info = support()  # the Python launcher cannot tell bwrap's failure: probe
    mechanism, why = choose(policy.mode, info, landlock_fits=fits)
    if mechanism is None:
        raise UsageError(f"ctrlz run --sandbox refused: {why}")
    if policy.net_mode != "on" and not info.seccomp and mechanism == "landlock":
        raise UsageError(f"--net {policy.net} and --allow-host need seccomp: "
                         f"{info.seccomp_reason}; use --sandbox=bwrap or drop the option")
    if policy.allow_hosts and info.landlock_abi < 4:
        raise UsageError(f"--allow-host needs Landlock ABI 4 to hold TCP to the proxy (this "
                         f"kernel: {info.landlock_abi}); use --net off or drop --allow-host")
    return Plan(policy, mechanism, info, os.fspath(ws.store_path), native=native,
                rules=rules, fits=fits)
