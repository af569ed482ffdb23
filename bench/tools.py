"""One adapter per tool, each driving that tool as a separate process.

Every adapter exposes the same operations (first, second, nochange, change, restore, store_size),
each timed from process start to exit, so ctrlz pays its interpreter start-up just as git, tar
and rsync pay theirs. Each adapter keeps its store under its own directory outside the tree,
and ``reset`` throws the store away so the next "first snapshot" starts from nothing.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from trees import du_bytes

HERE = Path(__file__).resolve().parent


def run(cmd: list[str] | str, env: dict[str, str] | None = None, cwd: Path | None = None
        ) -> tuple[float, str]:
    """Run a command (a list, or a string for bash), return (seconds, stdout)."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd if isinstance(cmd, list) else ["bash", "-o", "pipefail", "-c", cmd],
                          env=env, cwd=cwd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd!r} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return dt, proc.stdout


class Tool:
    """Base adapter: snapshots are referred to by an opaque id the adapter returns."""

    name = "tool"

    def __init__(self, tree: Path, work: Path) -> None:
        self.tree = tree
        self.work = work / self.name
        self.snaps: list[str] = []

    def reset(self) -> None:
        """Delete the store so the next snapshot is a first snapshot."""
        if self.work.exists():
            shutil.rmtree(self.work)
        self.work.mkdir(parents=True)
        self.snaps = []

    def snapshot(self) -> float:
        """Take a snapshot, remember its id, return seconds."""
        raise NotImplementedError

    def restore(self, snap: str) -> float:
        """Put the tree back to ``snap`` in place, return seconds."""
        raise NotImplementedError

    def store_paths(self) -> list[Path]:
        return [self.work]

    # the operations the runner times; all but the restore are "take a snapshot"
    def first(self) -> float:
        return self.snapshot()

    def second(self) -> float:
        """Right after :meth:`first`, with nothing between."""
        return self.snapshot()

    def settle(self) -> None:
        """Untimed: let background work the last operation started finish (none here)."""

    def nochange(self) -> float:
        return self.snapshot()

    def change(self) -> float:
        return self.snapshot()

    def store_size(self) -> tuple[int, int]:
        """(apparent, allocated) bytes of everything the tool keeps, hard links counted once."""
        return du_bytes(self.store_paths())


class Ctrlz(Tool):
    """The ``ctrlz`` command as a user runs it, with its default settings: ``ctrlz snapshot
    --json`` and ``ctrlz rollback ID --json`` in the tree, by the venv's entry point
    (``ctrlz init`` in :meth:`reset`, untimed, as ``git init`` is for git).

    The first command that walks the tree itself starts the workspace daemon after its work,
    as the command line does (see ``ProtectedWorkspace.start_daemon``); later commands hand
    their snapshot or rollback to it. Between timed commands this adapter waits, untimed,
    until a daemon that is starting answers, so that its start-up does not run during the
    next timing (as git's ``gc.auto=0`` keeps git's background work out of it), and
    :meth:`reset` stops it before deleting the store."""

    name = "ctrlz"
    daemon = True

    def __init__(self, tree: Path, work: Path) -> None:
        super().__init__(tree, work)
        self.store: Path | None = None

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        # keep a user's ctrlz config out of the measurement
        env["XDG_CONFIG_HOME"] = str(self.work / "xdg")
        for key in list(env):
            if key.startswith("CTRLZ_"):
                del env[key]
        env["CTRLZ_HOME"] = str(self.work / "home")
        # every timed snapshot is a manual one: more repetitions than manual_max's 12 must
        # not meet the pool's cap (the daemon, started with this environment, agrees)
        env["CTRLZ_MANUAL_MAX"] = "10000"
        if not self.daemon:
            env["CTRLZ_DAEMON"] = "0"
        return env

    def _ctrlz(self, *args: str) -> tuple[float, str]:
        exe = Path(sys.executable).with_name("ctrlz")
        return run([str(exe), *args], env=self._env(), cwd=self.tree)

    def reset(self) -> None:
        if self.store is not None:
            from ctrlz.session import daemon_client

            daemon_client.stop(self.store)
        super().reset()
        self.store = Path(json.loads(self._ctrlz("init", "--json")[1])["store"])

    def settle(self) -> None:
        """Untimed: once a command has started the daemon, wait until it answers."""
        if not self.daemon:
            return
        from ctrlz.session import daemon_client

        assert self.store is not None
        deadline = time.monotonic() + 10
        while not daemon_client.running(self.store):
            if time.monotonic() > deadline:
                raise RuntimeError(f"ctrlz did not start its daemon; see {self.store}/daemon.log")
            time.sleep(0.02)
        if daemon_client.wait_ready(self.store, 600) is None:
            raise RuntimeError(f"the daemon did not get ready; see {self.store}/daemon.log")

    def snapshot(self) -> float:
        dt = self._snapshot()
        self.settle()
        return dt

    def _snapshot(self) -> float:
        dt, out = self._ctrlz("snapshot", "--json")
        self.snaps.append(json.loads(out)["id"])
        return dt

    def first(self) -> float:
        """Not settled: :meth:`second` comes right after, while the daemon this first one
        started is starting (a new user's second command)."""
        return self._snapshot()

    def restore(self, snap: str) -> float:
        dt = self._ctrlz("rollback", snap, "--json")[0]
        self.settle()
        return dt

    def gc(self) -> float:
        """``ctrlz gc --json``, which compresses what a snapshot stored uncompressed."""
        dt = self._ctrlz("gc", "--json")[0]
        self.settle()
        return dt


class CtrlzNoDaemon(Ctrlz):
    """The same commands with the daemon turned off (``CTRLZ_DAEMON=0``): every one is a fresh
    process that walks the whole tree, as a first command in a workspace does."""

    name = "ctrlz-nodaemon"
    daemon = False


class Git(Tool):
    """git with GIT_DIR outside the tree: ``add -A`` + ``commit``; restore with read-tree + clean.

    ``gc.auto=0`` keeps git from packing in the background mid-benchmark (it would otherwise
    start a detached gc after the 100k-object commit and skew the next measurements).
    """

    name = "git"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(GIT_DIR=str(self.work / "git"), GIT_WORK_TREE=str(self.tree),
                   GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")
        return env

    def _git(self) -> str:
        return ("git -c user.name=bench -c user.email=bench@example.invalid -c gc.auto=0 "
                "-c maintenance.auto=false -c core.fsmonitor=false")

    def reset(self) -> None:
        super().reset()
        run(["git", "init", "-q"], env=self._env())

    def snapshot(self) -> float:
        g = self._git()
        dt, _ = run(f"{g} add -A && {g} commit -q --allow-empty -m s{len(self.snaps)}",
                    env=self._env(), cwd=self.tree)
        self.snaps.append(run(["git", "rev-parse", "HEAD"], env=self._env())[1].strip())
        return dt

    def restore(self, snap: str) -> float:
        g = self._git()
        return run(f"{g} read-tree -u --reset {snap} && {g} clean -fdq", env=self._env(),
                   cwd=self.tree)[0]


class TarZstd(Tool):
    """A full ``tar | zstd -T0`` archive per snapshot; restore = empty the tree, then extract.

    tar has no in-place incremental restore, so the fair equivalent of "undo those changes" is to
    wipe the tree and unpack the chosen archive; the wipe is part of the timed restore.
    """

    name = "tar+zstd"

    def snapshot(self) -> float:
        out = self.work / f"s{len(self.snaps)}.tar.zst"
        dt, _ = run(f"tar -C {shlex.quote(str(self.tree))} -cf - . | zstd -T0 -q -o "
                    f"{shlex.quote(str(out))}")
        self.snaps.append(str(out))
        return dt

    def restore(self, snap: str) -> float:
        t = shlex.quote(str(self.tree))
        return run(f"find {t} -mindepth 1 -delete && zstd -dcq {shlex.quote(snap)} | "
                   f"tar -C {t} -xf -")[0]


class Rsync(Tool):
    """``rsync -a --link-dest=<previous>`` into a new directory per snapshot (Time Machine style).

    Unchanged files become hard links to the previous snapshot, so store size counts them once.
    Restore = ``rsync -a --delete snapK/ tree/``.
    """

    name = "rsync"

    def __init__(self, tree: Path, work: Path) -> None:
        super().__init__(tree, work)
        #: seconds ``sync -f`` took after each first copy: what making the copy durable costs
        #: (rsync never fsyncs; a ctrlz snapshot is on disk when the command returns)
        self.first_flush: list[float] = []

    def first(self) -> float:
        dt = self.snapshot()
        self.first_flush.append(run(["sync", "-f", self.snaps[-1]])[0])
        return dt

    def snapshot(self) -> float:
        dest = self.work / f"s{len(self.snaps)}"
        cmd = ["rsync", "-a"]
        if self.snaps:
            cmd.append(f"--link-dest={self.snaps[-1]}")
        dt, _ = run([*cmd, f"{self.tree}/", f"{dest}/"])
        self.snaps.append(str(dest))
        return dt

    def restore(self, snap: str) -> float:
        return run(["rsync", "-a", "--delete", f"{snap}/", f"{self.tree}/"])[0]


TOOLS: dict[str, type[Tool]] = {t.name: t for t in (Ctrlz, CtrlzNoDaemon, Git, TarZstd, Rsync)}
