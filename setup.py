"""The ``ctrlz`` and ``ctrlz-hook`` commands: the native door where it can be built, else the
Python scripts.

Everything else about the package is in pyproject.toml. Both are installed as scripts, not
console-script entry points, because on Linux with a C compiler they are one small C program
(src/ctrlz/door/*.c, see src/ctrlz/door/__init__.py), which tells them apart by its name: the
commands and hooks the workspace daemon can serve are served without starting Python,
everything else handed to the Python CLI or hook with the interpreter this build runs under.
Without a compiler (or with ``CTRLZ_BUILD_NATIVE=0``, or off Linux) they are
src/ctrlz/door/ctrlz and src/ctrlz/door/ctrlz-hook, which pip turns into the same scripts as
the entry points ``ctrlz = "ctrlz.cli:main"`` and ``ctrlz-hook = "ctrlz.hooks.runner:main"``.

Beside them, where the same compiler builds it, ``ctrlz-sandbox``: the sandbox's native
launcher (src/ctrlz/sandbox/*.c, see ctrlz/sandbox/spec.py), which ``ctrlz run --sandbox``
starts instead of ``python -m ctrlz.sandbox.launcher`` when it is there.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from setuptools import setup
from setuptools.dist import Distribution

#: distutils' build_scripts, as setuptools provides it (Python 3.12 has no distutils of its own)
build_scripts = Distribution().get_command_class("build_scripts")

HERE = os.path.dirname(os.path.abspath(__file__))
DOOR = os.path.join("src", "ctrlz", "door")
LAUNCHERS = [os.path.join(DOOR, "ctrlz"), os.path.join(DOOR, "ctrlz-hook")]


def c_string(text: str) -> str:
    """``text`` as a C string literal, every byte escaped (any path survives)."""
    return '"' + "".join(f"\\{b:03o}" for b in os.fsencode(text)) + '"'


def compiler() -> list[str]:
    return shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")


def no_door() -> str | None:
    """Why the native door cannot be built here, before trying; None when it can be tried."""
    if os.environ.get("CTRLZ_BUILD_NATIVE", "1") == "0":
        return "CTRLZ_BUILD_NATIVE=0"
    if not sys.platform.startswith("linux"):
        return f"the native door is for Linux, not {sys.platform}"
    cc = compiler()
    if not cc or shutil.which(cc[0]) is None:
        return f"no C compiler ({' '.join(cc) or 'cc'})"
    return None


def c_sources(folder: str) -> list[str]:
    return sorted(os.path.join(HERE, folder, n) for n in os.listdir(os.path.join(HERE, folder))
                  if n.endswith(".c"))


def compile_c(target: str, sources: list[str], *flags: str) -> str | None:
    """Compile ``sources`` into the program ``target``; None when built, else why not."""
    command = [*compiler(), "-std=c11", "-O2", *flags, "-o", target, *sources]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{' '.join(command)}: {exc}"
    if done.returncode != 0:
        return f"{' '.join(command)} failed:\n{done.stderr[-2000:]}"
    return None


def build_door(target: str, python: str = sys.executable) -> str | None:
    """Compile the native door into ``target``; None when built, else why not."""
    if (why := no_door()) is not None:
        return why
    with tempfile.TemporaryDirectory() as tmp:
        header = os.path.join(tmp, "door_python.h")
        with open(header, "w", encoding="ascii") as f:
            f.write(f"#define CTRLZ_PYTHON {c_string(python)}\n")
        return compile_c(target, c_sources(DOOR), "-include", header)


SANDBOX = os.path.join("src", "ctrlz", "sandbox")


def build_launcher(target: str) -> str | None:
    """Compile the sandbox's native launcher (src/ctrlz/sandbox/*.c: ``ctrlz run --sandbox``
    starts it instead of ``python -m ctrlz.sandbox.launcher``) into ``target``; None when
    built, else why not (then the Python launcher serves)."""
    if (why := no_door()) is not None:
        return why
    return compile_c(target, c_sources(SANDBOX))


class BuildScripts(build_scripts):
    """The native door as ``ctrlz`` and ``ctrlz-hook`` when it builds; the Python scripts
    otherwise."""

    def run(self) -> None:
        self.mkpath(self.build_dir)
        launcher = os.path.join(self.build_dir, "ctrlz-sandbox")
        why = build_launcher(launcher)
        print(f"ctrlz: built the sandbox's native launcher ({launcher})" if why is None else
              f"ctrlz: no native sandbox launcher ({why}); ctrlz run --sandbox starts the "
              "Python one", file=sys.stderr)
        target = os.path.join(self.build_dir, "ctrlz")
        why = build_door(target)
        if why is None:
            shutil.copy2(target, os.path.join(self.build_dir, "ctrlz-hook"))
            print(f"ctrlz: built the native door ({target}, and as ctrlz-hook)",
                  file=sys.stderr)
            return
        print(f"ctrlz: no native door ({why}); `ctrlz` and `ctrlz-hook` are Python scripts",
              file=sys.stderr)
        super().run()


def wheel_command() -> type | None:
    """``bdist_wheel`` for a wheel that may carry the door: a native program for this
    platform, so the wheel is tagged ``py3-none-<platform>``, never ``py3-none-any`` (which
    an index would hand to every machine). Without the door it stays pure. None where this
    setuptools has no ``bdist_wheel`` of its own (before 70.1; the build asks for 77)."""
    try:
        from setuptools.command.bdist_wheel import bdist_wheel
    except ImportError:
        return None

    class PlatformWheel(bdist_wheel):  # type: ignore[misc,valid-type]
        def finalize_options(self) -> None:
            super().finalize_options()
            if no_door() is None:  # a compiler that then fails only narrows the tag
                self.root_is_pure = False

        def get_tag(self) -> tuple[str, str, str]:
            python, abi, plat = super().get_tag()
            return (python, abi, plat) if self.root_is_pure else ("py3", "none", plat)

    return PlatformWheel


if __name__ == "__main__":  # as setuptools runs it (tests load build_door alone)
    commands: dict[str, type] = {"build_scripts": BuildScripts}
    if (wheel := wheel_command()) is not None:
        commands["bdist_wheel"] = wheel
    setup(scripts=LAUNCHERS, cmdclass=commands)
