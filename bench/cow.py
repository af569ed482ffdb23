"""Copy-on-write rows for ``make bench``: the 2 GB / 20-file tree on loop-mounted XFS (reflink)
and btrfs images, ctrlz against ``cp --reflink`` and git in the same run.

For each filesystem: a sparse image is made and mounted (needs root, xfsprogs, btrfs-progs), the
large tree is generated once (``trees.large_tree``) and reflink-copied into the workspace (on
btrfs a subvolume, so the btrfs backend can run too), and the store lives on the same
filesystem. Timed, each after an untimed ``sync`` (as ``run.py`` does):

* first snapshot (fresh store: ``Workspace.init`` + ``snapshot``), no-change snapshot, and the
  restore of one 100 MB file after a 64-byte in-place edit (ctrlz's whole restore: safety
  snapshot, plan, journal, apply, verify, undo entry) — in process (the library), and with the
  ``ctrlz`` command as a user runs it (``tools.Ctrlz``: interpreter start-up and imports
  included; the first snapshot in its own process after an untimed ``ctrlz init``, the later
  commands served by the workspace daemon);
* ``cp -a --reflink=always`` of the tree (a snapshot) and of the one file back (a restore);
* git (shadow ``GIT_DIR``: ``add -A`` + ``commit``; restore = ``read-tree -u --reset``), on XFS
  only and not with ``--quick``: ~40 s per first snapshot, and a filesystem changes nothing
  for git, which copies and compresses every byte.

Targets (issue 12): first snapshot <= 0.1 s and restore of a changed 100 MB file <= 0.05 s on
XFS reflink, judged on the in-process medians; the command's are printed beside them.

``run.py`` calls :func:`cow_bench` and prints :func:`cow_table`; alone:
``.venv/bin/python bench/cow.py [--quick] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from trees import large_tree  # noqa: E402

HERE = Path(__file__).resolve().parent
EDITED = "blob/000.bin"  # the 100 MB file the restore rows change and put back
TARGETS = {"first": 0.1, "restore": 0.05}  # seconds, in process, XFS reflink
MKFS = {"xfs": ["mkfs.xfs", "-q", "-f", "-m", "reflink=1"], "btrfs": ["mkfs.btrfs", "-q", "-f"]}
PACKAGES = {"xfs": "xfsprogs", "btrfs": "btrfs-progs"}


def _sh(cmd: list[str] | str, **kw: object) -> tuple[float, str]:
    """Run a command (a string runs under bash), return (seconds, stdout)."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd if isinstance(cmd, list) else ["bash", "-c", cmd],
                          capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd!r} failed ({proc.returncode}): {proc.stderr[-1000:]}")
    return dt, proc.stdout


def _timed(fn: Callable[[], object]) -> float:
    os.sync()  # earlier writes flushed, untimed
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def unavailable(fs: str) -> str | None:
    """Why this machine cannot run the ``fs`` rows, or ``None``."""
    if os.geteuid() != 0:
        return "needs root (loop mounts)"
    if shutil.which(MKFS[fs][0]) is None:
        return f"{MKFS[fs][0]} missing (apt-get install {PACKAGES[fs]})"
    return None


@contextlib.contextmanager
def mounted(work: Path, fs: str, size: int) -> Iterator[Path]:
    img, mnt = work / f"{fs}.img", work / fs
    if mnt.is_mount():
        _sh(["umount", str(mnt)])
    img.unlink(missing_ok=True)
    mnt.mkdir(parents=True, exist_ok=True)
    with open(img, "wb") as f:
        f.truncate(size)
    _sh([*MKFS[fs], str(img)])
    _sh(["mount", "-o", "loop", str(img), str(mnt)])
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
        img.unlink(missing_ok=True)


class Edit:
    """A 64-byte in-place patch in the middle of one file, and a check that it was undone."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size // 2
        with open(path, "rb") as f:
            f.seek(self.offset)
            self.original = f.read(64)

    def apply(self, rep: int) -> None:
        with open(self.path, "r+b") as f:
            f.seek(self.offset)
            f.write(f"cow bench edit {rep} {time.time_ns()}".encode().ljust(64, b"#"))

    def undone(self) -> bool:
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            return f.read(64) == self.original


def _ctrlz_in_process(ws_dir: Path, home: Path, repeat: int, native: bool
                      ) -> dict[str, list[float]]:
    from ctrlz import Workspace
    from ctrlz.state.scan import btrfs

    times: dict[str, list[float]] = {"first": [], "nochange": [], "restore": []}
    edit = Edit(ws_dir / EDITED)
    ws = None
    for _ in range(repeat):
        if ws is not None:
            ws.close()
        shutil.rmtree(home, ignore_errors=True)
        if native:  # enable needs a store: make one, then time a first snapshot into it
            ws = Workspace.init(ws_dir, home=home)
            btrfs.enable(ws.repo, ws.roots)
        os.sync()
        t0 = time.perf_counter()
        if not native:
            ws = Workspace.init(ws_dir, home=home)
        assert ws is not None
        ws.snapshot(label="first")
        times["first"].append(time.perf_counter() - t0)
    assert ws is not None
    ok = True
    for rep in range(repeat):
        os.sync()
        t0 = time.perf_counter()
        base = ws.snapshot(label="base").id
        times["nochange"].append(time.perf_counter() - t0)
        edit.apply(rep)
        os.sync()
        t0 = time.perf_counter()
        ws.restore(base)
        times["restore"].append(time.perf_counter() - t0)
        ok = ok and edit.undone()
    ws.close()
    if not ok:
        raise RuntimeError(f"ctrlz's restore did not put {EDITED} back")
    return times


def _ctrlz_command(ws_dir: Path, work: Path, repeat: int) -> dict[str, list[float]]:
    """The ``ctrlz`` command as a user runs it, with its defaults (``bench/tools.Ctrlz``, as
    the main tables drive it): ``ctrlz snapshot --json`` after an untimed ``ctrlz init`` (the
    first walks the tree in its own process, then starts the workspace daemon, which serves
    the later commands), ``ctrlz rollback ID --json`` for the restore."""
    from tools import Ctrlz

    tool = Ctrlz(ws_dir, work)
    times: dict[str, list[float]] = {"first": [], "nochange": [], "restore": []}
    try:
        for _ in range(repeat):
            tool.reset()
            os.sync()
            times["first"].append(tool.snapshot())
        edit = Edit(ws_dir / EDITED)
        for rep in range(repeat):
            os.sync()
            times["nochange"].append(tool.snapshot())
            base = tool.snaps[-1]
            edit.apply(100 + rep)
            os.sync()
            times["restore"].append(tool.restore(base))
            if not edit.undone():
                raise RuntimeError("`ctrlz rollback` did not put the file back")
    finally:
        if tool.store is not None:
            from ctrlz.session import daemon_client

            daemon_client.stop(tool.store)
        shutil.rmtree(tool.work, ignore_errors=True)
    return times


def _cp_reflink(ws_dir: Path, snaps: Path, repeat: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"first": [], "restore": []}
    snaps.mkdir()
    for i in range(repeat):
        dest = snaps / f"s{i}"
        times["first"].append(_timed(lambda d=dest: _sh(
            ["cp", "-a", "--reflink=always", f"{ws_dir}/.", str(d)])))
    edit = Edit(ws_dir / EDITED)
    for rep in range(repeat):
        edit.apply(rep)
        times["restore"].append(_timed(lambda: _sh(
            ["cp", "-a", "--reflink=always", str(snaps / "s0" / EDITED), str(ws_dir / EDITED)])))
    if not edit.undone():
        raise RuntimeError("cp --reflink did not put the file back")
    shutil.rmtree(snaps)
    return times


def _git(ws_dir: Path, work: Path) -> dict[str, list[float]]:
    env = {**os.environ, "GIT_DIR": str(work / "git"), "GIT_WORK_TREE": str(ws_dir),
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
    g = ("git -c user.name=bench -c user.email=bench@example.invalid -c gc.auto=0 "
         "-c maintenance.auto=false -c core.fsmonitor=false")
    _sh(["git", "init", "-q"], env=env)
    commit = f"{g} add -A && {g} commit -q --allow-empty -m s"
    first = _timed(lambda: _sh(commit, env=env, cwd=ws_dir))
    nochange = _timed(lambda: _sh(commit, env=env, cwd=ws_dir))
    head = _sh(["git", "rev-parse", "HEAD"], env=env)[1].strip()
    edit = Edit(ws_dir / EDITED)
    edit.apply(7)
    restore = _timed(lambda: _sh(f"{g} read-tree -u --reset {head} && {g} clean -fdq", env=env,
                                 cwd=ws_dir))
    if not edit.undone():
        raise RuntimeError("git did not put the file back")
    shutil.rmtree(work / "git")
    return {"first": [first], "nochange": [nochange], "restore": [restore]}


def _one_fs(fs: str, out: Path, quick: bool, repeat: int) -> dict[str, object]:
    work = out / "cow"
    work.mkdir(parents=True, exist_ok=True)
    with mounted(work, fs, 8 << 30) as mnt:
        tree = large_tree(mnt / "gen")
        ws_dir = mnt / "ws"
        if fs == "btrfs":
            _sh(["btrfs", "subvolume", "create", str(ws_dir)])
        else:
            ws_dir.mkdir()
        _sh(["cp", "-a", "--reflink=always", f"{tree.root}/.", str(ws_dir)])
        shutil.rmtree(mnt / "gen")
        _sh(f"cat {ws_dir}/*/* > /dev/null")  # warm caches, as the main tables are
        rows: dict[str, dict[str, list[float]]] = {}
        print(f"[cow {fs}] ctrlz...", flush=True)
        rows["ctrlz"] = _ctrlz_in_process(ws_dir, mnt / "home", repeat, native=False)
        print(f"[cow {fs}] the ctrlz command...", flush=True)
        rows["ctrlz command"] = _ctrlz_command(ws_dir, mnt / "cmd", repeat)
        if fs == "btrfs":
            print(f"[cow {fs}] ctrlz, btrfs backend...", flush=True)
            rows["ctrlz btrfs backend"] = _ctrlz_in_process(ws_dir, mnt / "home-n", repeat,
                                                            native=True)
        shutil.rmtree(mnt / "home", ignore_errors=True)
        print(f"[cow {fs}] cp --reflink...", flush=True)
        rows["cp --reflink"] = _cp_reflink(ws_dir, mnt / "cp", repeat)
        if fs == "xfs" and not quick:
            print(f"[cow {fs}] git...", flush=True)
            rows["git"] = _git(ws_dir, mnt)
    return {"files": tree.files, "bytes": tree.bytes, "repeat": repeat,
            "times": rows,
            "median": {tool: {op: statistics.median(v) for op, v in ops.items()}
                       for tool, ops in rows.items()}}


def cow_bench(out: Path, quick: bool = False, repeat: int | None = None) -> dict[str, object]:
    """The copy-on-write rows: ``{"xfs": {...}, "btrfs": {...}}``, or ``{"skipped": why}``
    per filesystem this machine cannot mount. Needs about 2.5 GB free under ``out`` per
    filesystem while it runs (sparse images, removed at the end)."""
    repeat = repeat or (1 if quick else 5)
    results: dict[str, object] = {}
    for fs in ("xfs", "btrfs"):
        why = unavailable(fs)
        results[fs] = {"skipped": why} if why else _one_fs(fs, out, quick, repeat)
    return results


OPS = {"first": "first snapshot", "nochange": "no-change snapshot",
       "restore": f"restore of one changed 100 MB file ({EDITED})"}


def cow_table(results: dict[str, object]) -> str:
    """Markdown tables of the medians, with the issue's targets judged on XFS."""
    lines: list[str] = []
    for fs, data in results.items():
        if not isinstance(data, dict):
            continue
        if "skipped" in data:
            lines += [f"### copy-on-write, {fs}: skipped ({data['skipped']})", ""]
            continue
        med: dict[str, dict[str, float]] = data["median"]  # type: ignore[assignment]
        tools = list(med)
        lines += [f"### copy-on-write, {fs} loop image: {data['files']} files, "
                  f"{data['bytes'] / 1e9:.1f} GB",
                  "",
                  f"Median seconds of {data['repeat']} runs (git: one). \"ctrlz\": the "
                  "library, in process; its first snapshot includes creating the store, "
                  "except for the btrfs backend, which must be turned on in an existing store. "
                  "\"ctrlz command\": `ctrlz snapshot --json` and `ctrlz rollback ID --json` "
                  "as processes, as a user runs them: the first after an untimed `ctrlz init`, "
                  "in its own process, the later ones served by the workspace daemon it starts. "
                  "The store is on the same filesystem as the workspace; caches warm.",
                  "",
                  "| operation | " + " | ".join(tools) + " |",
                  "|---|" + "---:|" * len(tools)]
        for op, label in OPS.items():
            cells = [f"{med[t][op]:.4f}" if op in med[t] else "–" for t in tools]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
        if fs == "xfs":
            for op, limit in TARGETS.items():
                got = med["ctrlz"][op]
                verdict = "PASS" if got <= limit else "MISS"
                lines.append(f"- {OPS[op]} on XFS reflink: ctrlz {got * 1000:.1f} ms in process "
                             f"({med['ctrlz command'][op] * 1000:.0f} ms as the command), "
                             f"target <= {limit * 1000:.0f} ms: **{verdict}**")
            lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="one run each, no git")
    p.add_argument("--repeat", type=int, default=None)
    p.add_argument("--out", type=Path, default=HERE / "out")
    args = p.parse_args(argv)
    results = cow_bench(args.out.resolve(), quick=args.quick, repeat=args.repeat)
    print()
    print(cow_table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
