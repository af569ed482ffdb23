"""The sandbox's system call tables against the kernel's own headers, for both machines.

Why: seccomp filters and the observer of refused writes (``ctrlz/sandbox/seccomp.py``'s
``_X86_64`` and ``_AARCH64``) name calls by number, and a wrong number fails quietly: a
refused call that is let through, or a write that is never observed. The aarch64 table runs
on no machine the tests run on, so it is checked here against the headers Linux exports
(arm64 uses asm-generic/unistd.h), read through the C preprocessor so that the header's own
conditions decide (``__ARCH_WANT_RENAMEAT``, the 64-bit names of ``__NR3264_*``):

- with ``aarch64-linux-gnu-gcc`` (Debian's gcc-aarch64-linux-gnu, which .ci/run installs),
  arm64's own ``asm/unistd.h``;
- else the host's preprocessor on ``asm-generic/unistd.h`` with the ``__ARCH_WANT_*`` that
  arm64's header sets (linux-libc-dev, present wherever a C compiler is).

The same for x86_64 with the host's ``asm/unistd_64.h``, the audit arch constants, and the
open and socket flags the filters test. Then ``observe.c`` (with the launcher) is compiled for
aarch64, where the cross compiler is installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ctrlz.sandbox import observer, seccomp

SANDBOX = Path(seccomp.__file__).parent
#: what arm64's uapi asm/unistd.h defines before it includes asm-generic/unistd.h
ARM64_WANTS = ("RENAMEAT", "NEW_STAT", "SET_GET_RLIMIT", "TIME32_SYSCALLS", "SYS_CLONE3",
               "MEMFD_SECRET")
CROSS = "aarch64-linux-gnu-gcc"
TABLES = {"x86_64": seccomp._X86_64, "aarch64": seccomp._AARCH64}


def host_cc() -> str | None:
    return next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)


def preprocessor(machine: str) -> tuple[list[str], str] | None:
    """(the compiler's command, the header lines that give ``machine``'s __NR_* names)."""
    host = os.uname().machine
    if machine == "aarch64" and shutil.which(CROSS):
        return [CROSS], "#include <asm/unistd.h>\n"
    cc = host_cc()
    if cc is None:
        return None
    if machine == host:
        return [cc], "#include <asm/unistd.h>\n"
    if machine == "aarch64" and host == "x86_64":  # the generic table, as arm64 sets it up
        wants = "".join(f"#define __ARCH_WANT_{w}\n" for w in ARM64_WANTS)
        return [cc], wants + "#include <asm-generic/unistd.h>\n"
    return None


def c_number(token: str) -> int:
    """A C integer literal: 0x hex, a leading 0 octal, else decimal."""
    if token[:2].lower() == "0x":
        return int(token, 16)
    return int(token, 8) if token.startswith("0") else int(token)


def evaluate(text: str) -> int | None:
    """A C integer constant expression of numbers, ``|``, ``+`` and parentheses; None when a
    name is left in it (the macro was not defined)."""
    text = re.sub(r"(?<=[0-9a-fA-F])[uUlL]+\b", "", text.strip())
    if not re.fullmatch(r"[0-9a-fA-FxX|+()\s]+", text):
        return None
    decimal = re.sub(r"\b(0[xX][0-9a-fA-F]+|[0-9]+)\b", lambda m: str(c_number(m[1])), text)
    return int(eval(decimal, {"__builtins__": {}}))  # noqa: S307 - digits and operators only


def expand(machine: str, header: str, names: dict[str, str]) -> dict[str, int | None]:
    """Each ``names`` key's macro (its value) as the preprocessor for ``machine`` expands it
    after ``header``."""
    found = preprocessor(machine)
    if found is None:
        pytest.skip(f"no C preprocessor for {machine} headers (install a C compiler, or "
                    f"{CROSS} from Debian's gcc-aarch64-linux-gnu)")
    command, include = found
    source = include + header + "".join(f"ctrlz_{key} = {macro};\n"
                                        for key, macro in names.items())
    done = subprocess.run([*command, "-E", "-P", "-x", "c", "-"], input=source,
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        pytest.skip(f"{command[0]} cannot read the kernel's headers (linux-libc-dev): "
                    f"{done.stderr.strip().splitlines()[-1:]}")
    out: dict[str, int | None] = {}
    for key, value in re.findall(r"^ctrlz_(\w+) = (.*);$", done.stdout, re.M):
        out[key] = evaluate(value)
    return out


@pytest.mark.parametrize("machine", sorted(TABLES))
def test_each_number_is_the_kernels(machine: str) -> None:
    """Every call in the table has the header's number, or is newer than the headers (then
    its number is past their last one, so it collides with none of theirs)."""
    table = TABLES[machine]
    names = {name: f"__NR_{name}" for name in table.table}
    got = expand(machine, "", {**names, "LAST": "__NR_syscalls"})
    last = got.pop("LAST")
    wrong = {n: (mine, got[n]) for n, mine in table.table.items()
             if got[n] is not None and got[n] != mine}
    assert not wrong, f"{machine}: (ours, the kernel's): {wrong}"
    newer = {n: mine for n, mine in table.table.items() if got[n] is None}
    if newer:  # e.g. fchmodat2 (Linux 6.6) under Debian 12's 6.1 headers
        if last is None:
            last = max(v for v in got.values() if v is not None) + 1
        assert all(mine >= last for mine in newer.values()), (
            f"{machine}: not in the headers, yet below their last call ({last}): {newer}")
    assert table.seccomp_nr == table.table["seccomp"]


@pytest.mark.parametrize("machine", sorted(TABLES))
def test_no_call_the_machine_has_is_missing(machine: str) -> None:
    """A call the observer or the filters name that this machine has must be in its table:
    one left out would be let through (or go unobserved) on that machine alone. The
    calls arm64 never had (open, creat, mkdir, rename, fork...) are absent from its headers."""
    wanted = set(observer.KIND) | {n for t in TABLES.values() for n in t.table}
    got = expand(machine, "", {name: f"__NR_{name}" for name in sorted(wanted)})
    missing = sorted(n for n in wanted if got[n] is not None and n not in TABLES[machine].table)
    assert not missing, f"{machine} has these calls, its table does not: {missing}"


@pytest.mark.parametrize("machine,macro", [("x86_64", "AUDIT_ARCH_X86_64"),
                                           ("aarch64", "AUDIT_ARCH_AARCH64")])
def test_the_audit_arch_is_the_kernels(machine: str, macro: str) -> None:
    got = expand(machine, "#include <linux/audit.h>\n", {"arch": macro})
    assert got["arch"] == TABLES[machine].audit


@pytest.mark.parametrize("machine", sorted(TABLES))
def test_the_open_and_socket_flags_are_the_kernels(machine: str) -> None:
    """The observer's filter tests open's flags for a write, and the network filter a
    socket's type without SOCK_NONBLOCK | SOCK_CLOEXEC (the kernel's O_NONBLOCK and
    O_CLOEXEC): the same bits on both machines, as the code says."""
    got = expand(machine, "#include <asm/fcntl.h>\n", {
        "write": "(O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | __O_TMPFILE)",
        "sock": "(O_NONBLOCK | O_CLOEXEC)"})
    assert got["write"] == observer.WRITE_FLAGS
    assert got["sock"] == seccomp._SOCK_FLAGS


def test_the_launcher_compiles_for_aarch64(tmp_path: Path) -> None:
    """``ctrlz-sandbox`` (launcher.c, confine.c, observe.c), built as setup.py builds it,
    for arm64: an ELF for machine 183 (EM_AARCH64)."""
    if shutil.which(CROSS) is None:
        pytest.skip(f"no {CROSS} (Debian: apt-get install gcc-aarch64-linux-gnu)")
    target = tmp_path / "ctrlz-sandbox"
    sources = [str(SANDBOX / f"{name}.c") for name in ("launcher", "confine", "observe")]
    done = subprocess.run([CROSS, "-std=c11", "-O2", "-Wall", "-o", str(target), *sources],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr  # no warning either
    head = target.read_bytes()[:20]
    assert head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == 183
