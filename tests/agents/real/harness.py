"""One sandbox per real-agent test, the scripted scenario, and the rewind/undo checks.

The scenario is the same for every agent: a project with a few files and a ``build/``
directory; the fake model asks the real agent to write ``hello.py``, edit it, and delete
``build/`` with a shell command; then ``ctrlz rewind`` is checked against every one of those
steps (the whole tree, byte for byte) and ``ctrlz undo`` after each rewind.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import NOBODY, OtherUser

from .fakemodel import FakeModel

VENV_BIN = Path(sys.executable).parent
CTRLZ = str(VENV_BIN / "ctrlz")
AGENT_TIMEOUT = 180  # seconds for one headless agent run (they take 3-15 s here)
CTRLZ_TIMEOUT = 120
MARKER = "CTRLZ_REAL_AGENT_RUN"

PROMPT = "Create hello.py, change its greeting, then delete the build directory."
FILE = "hello.py"
WRITTEN = b"print('hello')\n"
EDITED = b"print('bye')\n"
OLD, NEW = "hello", "bye"
INITIAL: dict[str, bytes] = {
    "README.md": b"# demo\n",
    "src/app.py": b"print('app')\n",
    "build/out.bin": bytes(range(256)),
    "build/sub/x.txt": b"x\n",
    "build/sub/deep/y.txt": b"y\n" * 1000,
}


def tree(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every path under ``root``: ("d", mode), ("f", mode, bytes) or ("l", target)."""
    out: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("d", stat.S_IMODE(st.st_mode))
            elif stat.S_ISREG(st.st_mode):
                with open(full, "rb") as f:
                    out[rel] = ("f", stat.S_IMODE(st.st_mode), f.read())
            else:
                out[rel] = ("special", stat.S_IFMT(st.st_mode))
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
    return out


def tree_diff(got: dict[str, tuple], want: dict[str, tuple]) -> str:
    lines = [f"  missing: {p} {want[p][:2]}" for p in sorted(want.keys() - got.keys())]
    lines += [f"  extra:   {p} {got[p][:2]}" for p in sorted(got.keys() - want.keys())]
    lines += [f"  differs: {p}: got {got[p]!r:.120} want {want[p]!r:.120}"
              for p in sorted(want.keys() & got.keys()) if got[p] != want[p]]
    return "\n".join(lines) or "  (same)"


@dataclass
class AgentRun:
    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool

    def describe(self) -> str:
        return (f"$ {' '.join(self.argv)}\nexit: {self.returncode}"
                f"{' (killed after timeout)' if self.timed_out else ''}\n"
                f"--- stdout ---\n{self.stdout[-6000:]}\n--- stderr ---\n{self.stderr[-6000:]}")


@dataclass
class Sandbox:
    root: Path
    project: Path
    home: Path
    env: dict[str, str] = field(repr=False)
    marker: str = field(repr=False)
    pids: list[int] = field(default_factory=list, repr=False)
    log: list[str] = field(default_factory=list, repr=False)
    last_run: AgentRun | None = field(default=None, repr=False)
    model: FakeModel | None = field(default=None, repr=False)
    #: who runs ctrlz and the agent: None for this process's user, else uid 65534 through
    #: the ``other_user`` fixture (tests/conftest.py)
    user: OtherUser | None = field(default=None, repr=False)

    @property
    def cli(self) -> list[str]:
        """The ``ctrlz`` command line prefix, as the sandbox's user."""
        return [CTRLZ] if self.user is None else self.user.ctrlz_command()

    # ctrlz --------------------------------------------------------------------------------

    def ctrlz(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        self.hand_over()  # a config the test wrote for the agent, which `install` edits
        proc = subprocess.run([*self.cli, *args], cwd=self.project, env=self.env, text=True,
                              capture_output=True, timeout=CTRLZ_TIMEOUT,
                              stdin=subprocess.DEVNULL)
        self.log.append(f"$ ctrlz {' '.join(args)}  -> exit {proc.returncode}\n"
                        f"{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
        if ok:
            assert proc.returncode == 0, self.report(f"ctrlz {' '.join(args)} failed")
        return proc

    def ctrlz_json(self, *args: str) -> Any:
        return json.loads(self.ctrlz(*args, "--json").stdout)

    def hook_errors(self) -> str:
        """The hook runner's error log (``<store>/toolcalls/hook-errors.jsonl``), if any."""
        proc = subprocess.run([*self.cli, "status", "--json"], cwd=self.project, env=self.env,
                              text=True, capture_output=True, timeout=CTRLZ_TIMEOUT)
        places = [Path(self.env["CTRLZ_HOME"]) / "hook-errors.jsonl"]
        try:
            places.insert(0, Path(json.loads(proc.stdout)["store"]) / "toolcalls"
                          / "hook-errors.jsonl")
        except (ValueError, KeyError, TypeError):
            pass
        return "".join(p.read_text() for p in places if p.exists())

    def report(self, what: str, run: AgentRun | None = None,
               model: FakeModel | None = None) -> str:
        """Everything needed to debug a failure: the agent's output, what the fake model got,
        ctrlz's commands and the hook error log."""
        run = run or self.last_run
        model = model or self.model
        parts = [what]
        if run is not None:
            parts.append(run.describe())
        if model is not None:
            parts.append("--- fake model requests ---\n" + model.summary())
        parts.append("--- ctrlz ---\n" + "\n".join(self.log[-8:]))
        errors = self.hook_errors()
        parts.append("--- hook-errors.jsonl ---\n" + (errors[-4000:] or "(none)"))
        return "\n".join(parts)

    # the agent ----------------------------------------------------------------------------

    def run_agent(self, argv: list[str], env: dict[str, str] | None = None,
                  timeout: float = AGENT_TIMEOUT) -> AgentRun:
        """Run the agent headless in the project, in its own process group, with a hard
        timeout; the group (and anything else carrying this sandbox's marker) is killed
        afterwards whatever happened."""
        out_path, err_path = self.root / "agent.stdout", self.root / "agent.stderr"
        self.hand_over()  # what the test wrote for the agent (its config) is the user's
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(argv, cwd=self.project, env={**self.env, **(env or {})},
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    start_new_session=True)
        self.pids.append(proc.pid)
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            self.kill_leftovers()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        self.last_run = AgentRun([str(a) for a in argv], proc.returncode,
                                 out_path.read_text(errors="replace"),
                                 err_path.read_text(errors="replace"), timed_out)
        return self.last_run

    def hand_over(self) -> None:
        """Everything under :attr:`root` owned by the sandbox's user (nothing to do for this
        process's own)."""
        if self.user is None:
            return
        for dirpath, dirs, files in os.walk(self.root):
            for name in ["", *dirs, *files]:
                os.lchown(os.path.join(dirpath, name), NOBODY, NOBODY)

    def kill_leftovers(self) -> None:
        """SIGKILL the process groups this sandbox started, and every process whose
        environment carries this sandbox's marker (agents' helpers that left the group: MCP
        servers, shells started with setsid). Only those, by pid."""
        for pid in self.pids:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        needle = f"{MARKER}={self.marker}".encode()
        me = os.getpid()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if needle in f.read().split(b"\0"):
                        os.kill(int(entry), signal.SIGKILL)
            except (OSError, ProcessLookupError):
                pass


def make_sandbox(tmp_path: Path, user: OtherUser | None = None) -> Sandbox:
    """The scratch project, HOME and store, owned by uid 65534 with ``user`` (whose
    interpreter's directory, with its ``ctrlz-hook``, is then first on PATH for the agents'
    hooks)."""
    root = tmp_path
    project = root / "project"
    home = root / "home"
    for rel, data in INITIAL.items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_bytes(data)
    home.mkdir()
    marker = uuid.uuid4().hex
    node = shutil.which("node")  # the npm-installed agents are node scripts
    node_dir = [os.path.dirname(node)] if node else []
    env = {
        # the installed hooks run `ctrlz-hook AGENT` and `ctrlz mcp` from PATH
        "PATH": os.pathsep.join(dict.fromkeys([
            str(VENV_BIN if user is None else Path(user.python).parent), *node_dir,
            "/usr/local/bin",
            "/usr/bin", "/bin"])),
        "HOME": str(home),
        "CODEX_HOME": str(home / ".codex"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "CTRLZ_HOME": str(root / "ctrlz-home"),
        "CTRLZ_DAEMON": "0",  # no background daemon per workspace
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "TMPDIR": str(root),
        MARKER: marker,
    }
    sb = Sandbox(root, project, home, env, marker, user=user)
    sb.hand_over()
    sb.ctrlz("init")
    return sb


# the checks ---------------------------------------------------------------------------------


def check_agent_ran(sb: Sandbox, run: AgentRun, model: FakeModel) -> None:
    """The agent really played the script: every tool result went back to the model, and the
    project is as the three tool calls left it."""
    sb.model = model
    assert run.returncode == 0 and not run.timed_out, sb.report("the agent failed", run, model)
    steps = sorted({r.step for r in model.requests if r.step is not None})
    assert steps == list(range(len(model.script) + 1)), sb.report(
        f"the fake model saw steps {steps}, not all of the script", run, model)
    assert (sb.project / FILE).read_bytes() == EDITED, sb.report(
        f"{FILE} is not as the write and edit left it", run, model)
    assert not (sb.project / "build").exists(), sb.report("build/ was not deleted", run, model)


def check_rewinds(sb: Sandbox, agent: str | None, run: AgentRun, model: FakeModel,
                  before_run: dict[str, tuple], shell_command: str) -> None:
    """``ctrlz rewind`` to just before each of the three tool calls gives exactly the tree of
    that moment, and ``ctrlz undo`` after each gives back the tree the agent left; so does
    rewinding the whole turn by its number, with ``ctrlz redo`` in between. ``agent`` is the
    name the calls must be recorded under (None: not checked)."""
    errors = sb.hook_errors()
    assert not errors, sb.report("ctrlz's hooks logged errors", run, model)
    final = tree(sb.project)
    listing = sb.ctrlz_json("rewind", "--list")
    calls = listing["tool_calls"]
    kinds = [(c["kind"], c.get("captured_paths"), c.get("command")) for c in calls]
    assert kinds == [("files", [FILE], None), ("files", [FILE], None),
                     ("bash", [], shell_command)], sb.report(
        f"ctrlz recorded {json.dumps(calls, indent=1)}", run, model)
    turns = {c["turn"] for c in calls}
    assert len(turns) == 1 and isinstance(next(iter(turns)), int), calls
    for c in calls:
        assert c["tool_use_id"], c
        assert agent is None or c.get("agent", agent) == agent, sb.report(
            f"tool call recorded for agent {c.get('agent')!r}, not {agent!r}: {c}", run, model)
    for session in listing.get("sessions", []):
        assert agent is None or session.get("agent", agent) == agent, sb.report(
            f"session recorded for another agent than {agent!r}: {listing['sessions']}",
            run, model)
    write, edit, shell = calls

    build = {p: v for p, v in before_run.items() if p == "build" or p.startswith("build/")}
    before_rm = {**final, **build}
    before_edit = {**before_rm, FILE: (*final[FILE][:2], WRITTEN)}
    before_write = {p: v for p, v in before_rm.items() if p != FILE}
    for step, call, want in (("the shell command", shell, before_rm),
                             ("the edit", edit, before_edit),
                             ("the write", write, before_write)):
        result = sb.ctrlz_json("rewind", call["tool_use_id"])
        got = tree(sb.project)
        assert got == want, sb.report(
            f"`ctrlz rewind` to just before {step} ({call['tool_use_id']}) gave:\n"
            f"{tree_diff(got, want)}\nresult: {json.dumps(result)}", run, model)
        assert result["safety_snapshot"], result
        sb.ctrlz("undo", "--json")
        got = tree(sb.project)
        assert got == final, sb.report(
            f"`ctrlz undo` after the rewind to before {step} gave:\n{tree_diff(got, final)}",
            run, model)

    # the whole turn, by number; then undo, redo and undo again
    turn = str(write["turn"])
    for args, want in ((("rewind", turn), before_write), (("undo",), final),
                       (("redo",), before_write), (("undo",), final)):
        result = sb.ctrlz_json(*args)
        got = tree(sb.project)
        assert got == want, sb.report(
            f"`ctrlz {' '.join(args)}` (after rewinding each tool call and undoing it) gave:\n"
            f"{tree_diff(got, want)}\nresult: {json.dumps(result)[:2000]}", run, model)
