"""Four machines push different snapshots of one workspace to one remote at the same moment,
round after round: every snapshot is listed and ``verify --remote`` is clean."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from .conftest import CTRLZ, S3, ctrlz, make_ws

PUSHERS = 4


def _rounds(s3: S3, tmp_path: Path, rounds: int) -> None:
    url = f"s3://{s3.bucket()}/shared"
    home0 = tmp_path / "home-0"
    base = make_ws(tmp_path / "base", {"common.txt": "shared\n" * 100}, home0)
    ctrlz("snapshot", "-m", "base", cwd=base, home=home0)
    ctrlz("remote", "add", "origin", url, cwd=base, home=home0)
    ctrlz("push", cwd=base, home=home0)
    machines = []
    for i in range(PUSHERS):
        home, root = tmp_path / f"home-{i + 1}", tmp_path / f"m{i + 1}"
        ctrlz("clone", url, str(root), cwd=tmp_path, home=home)
        machines.append((home, root))
    expected = {"base"}
    for r in range(rounds):
        procs = []
        for i, (home, root) in enumerate(machines):
            (root / f"m{i}.txt").write_text(f"machine {i} round {r}\n" * (r + 1))
            label = f"m{i}-r{r}"
            expected.add(label)
            # every round is a manual snapshot: more rounds than the default manual pool
            env = {**os.environ, "CTRLZ_HOME": str(home), "CTRLZ_MANUAL_MAX": "1000"}
            # snapshot, then push at the same moment as the three others
            script = f"{CTRLZ} snapshot -m {label} >/dev/null && {CTRLZ} push"
            procs.append(subprocess.Popen(["sh", "-c", script], cwd=root, env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0 and b"Traceback" not in err, err.decode()
    home, root = machines[0]
    listed = ctrlz("list", "--remote", "origin", "--json", cwd=root, home=home).json()
    assert {e["label"] for e in listed} == expected
    assert len(listed) == 1 + rounds * PUSHERS
    v = ctrlz("verify", "--remote", "origin", "--json", cwd=root, home=home).json()
    assert v["ok"] and v["snapshots"] == len(listed)
    pulled = ctrlz("pull", "--json", cwd=root, home=home).json()
    assert len(pulled["pulled"]) == (rounds - 0) * (PUSHERS - 1)


def test_four_pushers_three_rounds(s3: S3, tmp_path: Path) -> None:
    _rounds(s3, tmp_path, 3)


@pytest.mark.slow
def test_four_pushers_twenty_rounds(s3: S3, tmp_path: Path) -> None:
    _rounds(s3, tmp_path, 20)
