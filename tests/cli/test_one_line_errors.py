"""Bad input is one line on stderr that says what to do, a non-zero exit, never a traceback:
click's refusals of the arguments, ``$CTRLZ_PROGRESS_DELAY``, and a ``$CTRLZ_HOME`` that cannot
be a directory, each found by an independent check printing four lines, nothing, or a
misleading "run `ctrlz init`"."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .conftest import Result, run


def one_line(r: Result, code: int) -> str:
    """The single stderr line of a failed run (asserting there is exactly one, and the code)."""
    assert r.code == code, (r.code, r.err)
    assert r.err.endswith("\n") and r.err.count("\n") == 1, r.err
    assert "Traceback" not in r.err and "Usage:" not in r.err
    line = r.err.rstrip("\n")
    assert line.startswith("ctrlz: error: "), line
    return line


# -- click usage errors: exit 2, click's words, the help to read -------------------------------

@pytest.mark.parametrize(("args", "message", "hint"), [
    (["nosuch"], "No such command 'nosuch'", "ctrlz --help"),
    (["snapshot", "--type", "bogus"],
     "Invalid value for '--type': 'bogus' is not one of 'manual', ", "ctrlz snapshot --help"),
    (["restore", "latest"], "Missing option '--to'", "ctrlz restore --help"),
    (["show"], "Missing argument 'SNAP'", "ctrlz show --help"),
    (["list", "--bogus"], "No such option '--bogus'", "ctrlz list --help"),
    (["--bogus"], "No such option '--bogus'", "ctrlz --help"),
    # click raises this one without its command: the hint still names the command
    (["snapshot", "-m"], "Option '-m' requires an argument", "ctrlz snapshot --help"),
    (["remote", "add"], "Missing argument 'NAME'", "ctrlz remote add --help"),
    (["list", "--json", "--bogus"], "No such option '--bogus'", "ctrlz list --help"),
])
def test_a_usage_error_is_one_line_with_the_help_to_read(
        tmp_path: Path, args: list[str], message: str, hint: str) -> None:
    r = run(*args, cwd=tmp_path, ok=False)
    line = one_line(r, 2)
    assert line.startswith(f"ctrlz: error: {message}"), line
    assert line.endswith(f"; see `{hint}`"), line
    assert r.out == ""  # --json or not: nothing on stdout


def test_the_exact_line_for_an_unknown_command(tmp_path: Path) -> None:
    r = run("nosuch", cwd=tmp_path, ok=False)
    assert (r.code, r.err) == (2, "ctrlz: error: No such command 'nosuch'; see `ctrlz --help`\n")


def test_a_directory_option_given_a_file(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x\n")
    line = one_line(run("-C", str(afile), "list", cwd=tmp_path, ok=False), 2)
    assert line == (f"ctrlz: error: Invalid value for '-C': Directory '{afile}' is a file; "
                    "see `ctrlz --help`")


def test_a_suggestion_keeps_its_question_and_the_hint(tmp_path: Path) -> None:
    line = one_line(run("list", "--jsn", cwd=tmp_path, ok=False), 2)
    assert line == ("ctrlz: error: No such option '--jsn'. Did you mean '--json'? "
                    "See `ctrlz list --help`")


def test_help_version_and_bare_ctrlz_are_unchanged(tmp_path: Path) -> None:
    assert run("--help", cwd=tmp_path).out.startswith("Usage: ctrlz [OPTIONS] COMMAND")
    assert run("snapshot", "--help", cwd=tmp_path).out.startswith("Usage: ctrlz snapshot")
    assert run("--version", cwd=tmp_path).out.startswith("ctrlz, version ")
    bare = run(cwd=tmp_path, ok=None)  # no command: click's help, on stderr, exit 2
    assert bare.code == 2 and bare.err.startswith("Usage: ctrlz [OPTIONS] COMMAND")
    assert "Commands:" in bare.err


# -- $CTRLZ_PROGRESS_DELAY: checked as the other CTRLZ_* values are ----------------------------

@pytest.mark.parametrize("args", [["snapshot"], ["snapshot", "--json"], ["snapshot", "-m", "x"],
                                  ["rollback", "latest"]])
def test_a_bad_progress_delay_is_a_config_error(ws: Path, args: list[str]) -> None:
    r = run(*args, cwd=ws, env={"CTRLZ_PROGRESS_DELAY": "abc"}, ok=False)
    line = one_line(r, 2)
    assert line == ("ctrlz: error: $CTRLZ_PROGRESS_DELAY must be a number of seconds >= 0, "
                    "not 'abc'; set it to one (e.g. 0.5) or unset it")
    assert r.out == ""


def test_progress_delay_values(ws: Path) -> None:
    for bad in ("-1", "nan", "inf"):
        r = run("snapshot", cwd=ws, env={"CTRLZ_PROGRESS_DELAY": bad}, ok=False)
        assert f"not {bad!r}" in one_line(r, 2)
    assert run("list", "--json", cwd=ws).json() == []  # none was taken
    for good in ("0.25", "", "7"):
        run("snapshot", cwd=ws, env={"CTRLZ_PROGRESS_DELAY": good})


# -- a store home that cannot be a directory ---------------------------------------------------

@pytest.mark.parametrize("args", [["list"], ["snapshot"], ["init"], ["status"]])
def test_ctrlz_home_that_is_a_file(tmp_path: Path, args: list[str]) -> None:
    home = tmp_path / "home-file"
    home.write_text("not a directory\n")
    r = run(*args, cwd=tmp_path, env={"CTRLZ_HOME": str(home)}, ok=False)
    assert one_line(r, 2) == (f"ctrlz: error: $CTRLZ_HOME ({home}) is not a directory; set "
                              "CTRLZ_HOME to a directory for the stores (or unset it for the "
                              "default)")


def test_ctrlz_home_under_a_file(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x\n")
    home = afile / "home"
    line = one_line(run("list", cwd=tmp_path, env={"CTRLZ_HOME": str(home)}, ok=False), 2)
    assert f"$CTRLZ_HOME ({home}) is under {afile}, which is not a directory" in line
    assert "set CTRLZ_HOME to a directory" in line


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG_DATA_HOME is Linux's")
def test_the_default_store_home_as_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    monkeypatch.delenv("CTRLZ_HOME")
    data = tmp_path / "data"
    data.mkdir()
    (data / "ctrlz").write_text("x\n")
    r = run("list", cwd=tmp_path, env={"XDG_DATA_HOME": str(data)}, ok=False)
    assert one_line(r, 2) == (f"ctrlz: error: the store home {data / 'ctrlz'} is not a "
                              "directory; move it away, or set CTRLZ_HOME to a directory "
                              "for the stores")


def test_a_home_not_made_yet_is_still_fine(tmp_path: Path) -> None:
    home = tmp_path / "new" / "home"
    r = run("list", cwd=tmp_path, env={"CTRLZ_HOME": str(home)}, ok=False)
    assert r.code == 3 and "run `ctrlz init` there first" in one_line(r, 3)


# -- a label that is not text ------------------------------------------------------------------

def test_a_label_of_bytes_that_are_not_utf8_is_a_usage_error(ws: Path) -> None:
    """A shell's ``$'caf\\xe9'`` reaches Python as a surrogate escape, which the catalog
    cannot store: it was an internal error (exit 70), it is a one-line refusal, and nothing
    is taken."""
    r = run("snapshot", "-m", "caf\udce9", cwd=ws, ok=False)
    assert one_line(r, 2) == "ctrlz: error: the label caf\\xe9 is not UTF-8 text; give it in UTF-8"
    assert run("list", "--json", cwd=ws).json() == []
    r = run("snapshot", "-m", "café", "--json", cwd=ws)
    assert r.json()["label"] == "café"
