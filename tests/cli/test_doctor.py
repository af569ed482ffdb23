"""``ctrlz doctor``: the platform facts, one line each, through the real console script."""

from __future__ import annotations

from pathlib import Path

from ctrlz import platform

from .conftest import run

KEYS = ["system", "rename", "sync", "direct_io", "clone", "watch", "trace", "service",
        "sandbox", "door"]


def test_doctor_prints_one_line_per_fact(tmp_path: Path) -> None:
    """Outside any workspace (it reads the machine, not a store), exit 0, one line each."""
    r = run("doctor", cwd=tmp_path)
    lines = r.out.splitlines()
    assert [line.split()[0] for line in lines] == KEYS
    assert lines[0].split()[1] == platform.system()
    facts = run("doctor", "--json", cwd=tmp_path).json()["facts"]
    assert [f["key"] for f in facts] == KEYS
    for f, line in zip(facts, lines, strict=True):
        if f["key"] != "system" and f["value"] is None:
            assert line.split()[1] == "no:" and f["without"] in line, line


def test_doctor_in_portable_mode_says_what_ctrlz_does_without_each(tmp_path: Path) -> None:
    env = {platform.ENV: platform.PORTABLE}
    facts = {f["key"]: f for f in run("doctor", "--json", cwd=tmp_path, env=env).json()["facts"]}
    assert facts["system"]["value"].endswith("(portable mode)")
    for key in ("rename", "sync", "direct_io", "clone", "trace", "service", "sandbox"):
        assert facts[key]["value"] is None, key
        assert facts[key]["without"], key
    assert facts["watch"]["value"] == "watchdog:polling"  # the portable twin of inotify
    text = run("doctor", cwd=tmp_path, env=env).out
    assert "rename after a stat check, with the restore's journal" in text
    assert "samples process starts (psutil)" in text
