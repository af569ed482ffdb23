"""Shared fixtures: an isolated CTRLZ_HOME, and trees described as data."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from ctrlz import platform

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ctrlz.workspace import Workspace


@dataclass(frozen=True)
class Link:
    target: str


def make_tree(root: Path, spec: dict) -> None:
    """Create ``spec`` under ``root``: str/bytes are files, dicts are directories,
    :class:`Link` is a symlink."""
    root.mkdir(parents=True, exist_ok=True)
    for name, value in spec.items():
        path = root / name
        if isinstance(value, dict):
            make_tree(path, value)
        elif isinstance(value, Link):
            os.symlink(value.target, path)
        else:
            path.write_bytes(value.encode() if isinstance(value, str) else value)


def tree_state(root: Path, skip: tuple[str, ...] = ()) -> dict[str, tuple]:
    """Everything a restore must reproduce: kind, mode, content or link target, file mtime."""
    out: dict[str, tuple] = {}
    base = os.fsencode(root)
    for dirpath, dirnames, filenames in os.walk(base):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.fsdecode(os.path.relpath(full, base))
            if any(rel == s or rel.startswith(s + "/") for s in skip):
                continue
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("d", stat.S_IMODE(st.st_mode))
            elif stat.S_ISREG(st.st_mode):
                with open(full, "rb") as f:
                    out[rel] = ("f", stat.S_IMODE(st.st_mode), f.read(), st.st_mtime_ns)
            else:
                out[rel] = ("special",)
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
    return out


@pytest.fixture(scope="session")
def shared_cache_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache directory for the whole run: what goes there (parsed botocore models) is
    derived data, keyed by its sources, so tests may share it; the user's own stays untouched."""
    return tmp_path_factory.mktemp("xdg-cache")


@pytest.fixture(autouse=True)
def ctrlz_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_cache_home: Path) -> Path:
    """Every test gets its own store home and config dir; real user state is never touched."""
    home = tmp_path / "ctrlz-home"
    monkeypatch.setenv("CTRLZ_HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared_cache_home))
    for key in list(os.environ):  # CTRLZ_PLATFORM=portable is the portable pass's own
        if key.startswith("CTRLZ_") and key not in ("CTRLZ_HOME", "CTRLZ_PLATFORM"):
            monkeypatch.delenv(key)
    # hooks would start a background daemon per workspace; tests that want one ask for it
    monkeypatch.setenv("CTRLZ_DAEMON", "0")
    return home


@pytest.fixture
def ws_dir(tmp_path: Path) -> Path:
    d = tmp_path / "ws"
    d.mkdir()
    return d


def is_root() -> bool:
    return os.geteuid() == 0


def mounted(where: Path, *args: str) -> Iterator[Path]:
    """``mount ARGS where``, for a fixture to ``yield from``: skipped, with the reason, where
    this machine refuses (not root, a filesystem the kernel lacks), and unmounted afterwards
    (lazily when something still holds it)."""
    if not is_root():
        pytest.skip("mounting a filesystem needs root")
    where.mkdir(exist_ok=True)
    proc = subprocess.run(["mount", *args, str(where)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount {' '.join(args)} here: {proc.stderr.strip()[:200]}")
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)


#: for a test that needs a workspace daemon (see needs_watcher)
watched = pytest.mark.skipif(
    platform.watcher() is None,
    reason="no file watcher here (watchdog not installed): no workspace daemon; the walking "
           "path is what the other tests cover")

#: for a test of what only ctrlz's own inotify watcher does (watch limits, the service's
#: inotify on the stores); portable mode and macOS watch through watchdog instead
inotify_watched = pytest.mark.skipif(
    platform.watcher() != "inotify",
    reason="inotify only (portable mode and macOS watch through watchdog: no watch limit, "
           "and the service polls the stores)")


def needs_watcher() -> None:
    """Skip, with the reason, where no workspace daemon can run: it is its file watcher, and
    there is none where neither inotify nor watchdog is. What it serves, hooks and commands
    then do by walking the tree, which the rest of a test file still checks."""
    from ctrlz.session import daemon_client

    if not daemon_client.can_watch():
        pytest.skip("no file watcher here (watchdog not installed), so no workspace "
                    "daemon: the walking path is what the other tests cover")


def served_workspace(root: Path) -> Iterator[Workspace]:
    """The workspace at ``root`` (its files made by the caller) with a first snapshot,
    labelled "base", and its daemon running, for a fixture to ``yield from``; the daemon is
    stopped afterwards."""
    from ctrlz.session import daemon_client
    from ctrlz.workspace import Workspace

    needs_watcher()

    workspace = Workspace.init(root)
    workspace.snapshot(label="base")
    info = daemon_client.start(workspace.root, workspace.store_path, wait=True, timeout=60)
    assert info["ready"], info
    try:
        yield workspace
    finally:
        daemon_client.stop(workspace.store_path)
        workspace.close()


#: the user a test becomes when it needs someone other than root (``nobody`` on Debian)
NOBODY = 65534


@dataclass(frozen=True)
class OtherUser:
    """How a test runs a command as another user, from root, through ``setpriv``.

    ``python`` is an interpreter that any user can run, with this checkout's ctrlz and its
    dependencies installed beside it in a world-readable directory (see :func:`other_user`).
    The checkout's own ``.venv`` will not do: a clone in a 0700 directory (``mktemp -d``, a
    home of mode 0750) is out of another user's reach, and so is everything in it."""

    python: str

    def command(self, *args: str, uid: int = NOBODY) -> list[str]:
        """``args`` run as ``uid`` (the group the same number, no supplementary groups)."""
        return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *args]

    def python_command(self, *args: str, uid: int = NOBODY) -> list[str]:
        """``python ARGS`` run as ``uid``."""
        return self.command(self.python, *args, uid=uid)

    def ctrlz_command(self, *args: str, uid: int = NOBODY) -> list[str]:
        """``ctrlz ARGS`` run as ``uid``: the Python CLI itself, not the ``ctrlz`` door (the
        door is built with the path of the checkout's interpreter in it)."""
        return self.python_command(
            "-P", "-c", "import sys; del sys.argv[0]; from ctrlz.cli import main; "
            "sys.exit(main())", "ctrlz", *args, uid=uid)

    @property
    def base(self) -> Path:
        """The world-readable directory the fixture made (``base/venv/bin/python``)."""
        return Path(self.python).parents[2]

    @contextmanager
    def native_door(self) -> Iterator[None]:
        """The native door built for this user's interpreter (as a pip install by that user
        builds it), as ``ctrlz`` and ``ctrlz-hook`` beside the interpreter while the block
        runs: a sandboxed agent's hooks hand their payloads to the daemon through it (the
        Python hook cannot capture a shell call from inside: docs/sandbox.md). Built once
        per session; skips where it cannot be built."""
        built = self.base / "door" / "ctrlz"
        if not built.is_file():
            import runpy

            setup = runpy.run_path(str(Path(__file__).resolve().parents[1] / "setup.py"),
                                   run_name="setup")
            built.parent.mkdir(exist_ok=True)
            why = setup["build_door"](str(built), python=self.python)
            if why is not None:
                pytest.skip(f"no native door for uid {NOBODY}'s interpreter: {why}")
            os.chmod(built, 0o755)
        bin_dir = Path(self.python).parent
        for name in ("ctrlz", "ctrlz-hook"):
            shutil.copy2(built, bin_dir / name)
        try:
            yield
        finally:
            for name in ("ctrlz", "ctrlz-hook"):
                (bin_dir / name).unlink()

    def share(self, tree: Path) -> Path:
        """``tree`` where this user can read it: as it is when every directory down to it
        lets others pass, else once a hard-linked copy under :attr:`base` (a copy of what
        others may not read), as the fixture places ctrlz itself."""
        tree = tree.resolve()
        if _reachable_by_all(str(tree)):
            return tree
        target = self.base / "shared" / tree.name
        if not target.exists():
            target.parent.mkdir(exist_ok=True)
            shutil.copytree(tree, target, symlinks=True, copy_function=_place)
            _readable_by_all(target)
        return target

    @contextmanager
    def native_launcher(self) -> Iterator[None]:
        """The checkout's ``ctrlz-sandbox`` beside this user's interpreter while the block
        runs (a C program needs nothing more); skips without one."""
        built = platform.native_launcher()
        if built is None:
            pytest.skip("no native launcher was built (no C compiler?)")
        copy = Path(self.python).parent / "ctrlz-sandbox"
        shutil.copy2(built, copy)
        os.chmod(copy, 0o755)
        try:
            yield
        finally:
            copy.unlink()


@pytest.fixture(scope="session")
def other_user() -> Iterator[OtherUser]:
    """The one way a test switches user (every test that does asks for this fixture; a test
    in test_other_user.py holds them to it). Made once per run: a venv, in a world-readable
    temp directory, of an interpreter another user can run with its own standard library
    (this one when it can, else the same Python version elsewhere on the machine), holding
    ctrlz from this checkout and the packages it needs, hard-linked where they may be (they
    are readable by all already) and copied otherwise. Skipped, with the reason, where the
    machine cannot do it: not root, no setpriv, no such interpreter or directory."""
    if not is_root():
        pytest.skip("switching to another user needs root")
    if shutil.which("setpriv") is None:
        pytest.skip("switching to another user needs setpriv (util-linux)")
    parent = next((d for d in (tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm")
                   if os.path.isdir(d) and _reachable_by_all(d)), None)
    if parent is None:
        pytest.skip("no temp directory another user can reach")
    base = Path(tempfile.mkdtemp(prefix="ctrlz-other-user-", dir=parent))
    try:
        os.chmod(base, 0o755)
        interpreter, refused = _interpreter_for_all()
        if interpreter is None:
            pytest.skip("no Python another user can run with its own standard library: "
                        + "; ".join(refused))
        venv = base / "venv"
        subprocess.run([interpreter, "-m", "venv", "--without-pip", str(venv)], check=True,
                       capture_output=True, timeout=120)
        python = str(venv / "bin" / "python")
        site = subprocess.run([python, "-I", "-c",
                               "import sysconfig; print(sysconfig.get_path('purelib'))"],
                              check=True, capture_output=True, text=True).stdout.strip()
        _install_ctrlz(Path(site))
        _readable_by_all(base)
        user = OtherUser(python)
        proof = subprocess.run(user.python_command("-I", "-c", "import ctrlz.cli, blake3, "
                                                   "zstandard; print(ctrlz.__file__)"),
                               capture_output=True, text=True, timeout=120)
        assert proof.returncode == 0 and proof.stdout.startswith(site), (
            f"uid {NOBODY} cannot import ctrlz from {site}: {proof.stderr[-2000:]}")
        yield user
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _reachable_by_all(path: str) -> bool:
    """Whether every directory from / down to ``path`` lets others pass."""
    here = Path(path).resolve()
    return all(os.stat(d).st_mode & stat.S_IXOTH for d in (here, *here.parents))


_PROBE = "import sys, sqlite3; print(sys.version_info[:2], sys.base_prefix)"


def _interpreter_for_all() -> tuple[str | None, list[str]]:
    """A Python of this version (C extensions are built for it) that ``nobody`` runs with
    its own standard library, and why each other candidate was refused. Run as another user,
    an interpreter that cannot read its prefix falls back to another one (pyenv's under
    root's 0700 home picks up /usr/lib/python3.X), so the test is that both users see the
    same ``sys.base_prefix``."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [os.path.realpath(getattr(sys, "_base_executable", sys.executable)),
                  f"/usr/bin/python{version}", f"/usr/local/bin/python{version}",
                  shutil.which(f"python{version}") or ""]
    refused: list[str] = []
    for candidate in dict.fromkeys(os.path.realpath(c) for c in candidates if c):
        if not os.access(candidate, os.X_OK):
            continue
        mine = subprocess.run([candidate, "-I", "-c", _PROBE], capture_output=True, text=True,
                              timeout=60)
        theirs = subprocess.run(OtherUser(candidate).python_command("-I", "-c", _PROBE),
                                capture_output=True, text=True, timeout=60)
        if mine.returncode == 0 and theirs.returncode == 0 and mine.stdout == theirs.stdout \
                and mine.stdout.startswith(str(sys.version_info[:2])):
            return candidate, refused
        refused.append(f"{candidate}: {mine.stdout.strip()} as root, "
                       f"{(theirs.stdout or theirs.stderr).strip()[-200:]} as uid {NOBODY}")
    return None, refused


def _install_ctrlz(site: Path) -> None:
    """ctrlz from this checkout (as imported: an editable install's source tree) and every
    distribution its requirements reach, into the site-packages directory ``site``."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    import ctrlz

    shutil.copytree(Path(ctrlz.__file__).parent, site / "ctrlz", copy_function=_place)
    wanted, done = ["ctrlz"], set()
    while wanted:
        name = canonicalize_name(wanted.pop())
        if name in done:
            continue
        done.add(name)
        dist = metadata.distribution(name)
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                wanted.append(requirement.name)
        root = Path(dist.locate_file("")).resolve()
        for file in dist.files or []:
            if name == "ctrlz" and not file.parts[0].endswith(".dist-info"):
                continue  # the editable install's .pth and finder: the tree is copied above
            source = Path(dist.locate_file(file)).resolve()
            if not source.is_relative_to(root) or not source.is_file():
                continue  # a script in bin/, or a file RECORD lists and nobody installed
            target = site / source.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                _place(str(source), str(target))


def _place(source: str, target: str) -> str:
    """A hard link of ``source`` when others may read it already (and it is on this
    filesystem), else a copy (which :func:`_readable_by_all` opens up)."""
    if os.stat(source).st_mode & stat.S_IROTH:
        try:
            os.link(source, target)
            return target
        except OSError:
            pass
    return shutil.copy2(source, target)


def _readable_by_all(base: Path) -> None:
    """Every directory under ``base`` passable and every file readable by all. A file that
    is not was copied by :func:`_place` (it links only what is), so the checkout's own
    files never change mode; symbolic links (the venv's interpreter) are left alone."""
    for dirpath, _dirnames, filenames in os.walk(base):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            path = os.path.join(dirpath, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode) and not mode & stat.S_IROTH:
                os.chmod(path, stat.S_IMODE(mode) | 0o444 | (0o111 if mode & stat.S_IXUSR
                                                              else 0))
