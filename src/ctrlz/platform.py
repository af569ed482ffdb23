"""What this machine offers ctrlz: the one place that knows the platform.

ctrlz has fast paths that only some systems have (atomic exchange renames, a whole-filesystem
flush, direct I/O, copy-on-write clones, inotify, strace, a kernel sandbox, a user service
manager), and each has a portable twin that is slower or narrower but keeps the same promises.
The fast paths stay where they are (``engine/dirs.py``, ``state/fsio/direct_io.py``,
``state/fsio/cow.py``,
``state/scan/btrfs.py``, ``sources/watch.py``, ``sources/trace/``, ``service/systemd.py``); each
asks
this module whether its call exists here, and nothing else in ctrlz looks at ``sys.platform``.
Answers that cost a probe (loading the C library, a ``which``) are computed on first use, so
importing this module costs a hook nothing.

``CTRLZ_PLATFORM=portable`` answers "no" for every Linux-only fast path, as if the calls did not
exist (file watching answers its portable twin, watchdog's polling observer), so the portable
twins run (and are tested, ``make test-portable``) on Linux. It changes
what ctrlz *calls*, never where it keeps things: the store and config directories follow the
real system (:func:`system`). ``ctrlz doctor`` prints :func:`facts`.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

#: the environment variable, and the one value that means "pretend the fast paths are missing"
ENV = "CTRLZ_PLATFORM"
PORTABLE = "portable"

#: the renames' flags as Linux spells them (``renameat2``); macOS's ``renamex_np`` has its own
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
_DARWIN_FLAGS = {RENAME_EXCHANGE: 0x2, RENAME_NOREPLACE: 0x4}  # RENAME_SWAP, RENAME_EXCL


def system() -> str:
    """``linux``, ``darwin``, or another ``sys.platform`` name: the real system, whatever
    :func:`portable` says (paths follow it: XDG on Linux, platformdirs elsewhere)."""
    if sys.platform.startswith("linux"):
        return "linux"
    return sys.platform



# -- where a user's files go ------------------------------------------------------------------

#: each kind of user directory: its XDG variable and its default below the home directory
_XDG = {"data": ("XDG_DATA_HOME", ".local/share"), "config": ("XDG_CONFIG_HOME", ".config"),
        "cache": ("XDG_CACHE_HOME", ".cache"), "state": ("XDG_STATE_HOME", ".local/state"),
        "runtime": ("XDG_RUNTIME_DIR", None)}


def user_dir(kind: str, env: Mapping[str, str] | None = None) -> str:
    """ctrlz's own user directory of ``kind`` (data, config, cache, state or runtime): the
    one place every module asks. It is platformdirs' answer, computed here on Linux (the XDG
    rule, :func:`xdg_base`): importing platformdirs (and the ``tempfile`` and ``shutil`` it
    brings) would cost every command and hook milliseconds. ``env``: another process's
    environment (the native door's caller, :mod:`ctrlz.door`) instead of this one's; on Linux.

    ``runtime`` is ``$XDG_RUNTIME_DIR/ctrlz`` on every system, when that variable names a
    directory (the login manager's private tmpfs); else there is none (:class:`LookupError`):
    the service then keeps its run files with the stores, which it checks are private itself,
    rather than in platformdirs' guess (``/run/user/<uid>`` or a temporary directory) that
    nobody made for it."""
    if kind == "runtime":
        base = xdg_base(kind, env)
        if base is None or not os.path.isdir(base):
            raise LookupError("no runtime directory ($XDG_RUNTIME_DIR names no directory)")
        return os.path.join(base, "ctrlz")
    if system() == "linux":
        found = xdg_base(kind, env)
        assert found is not None
        return os.path.join(found, "ctrlz")
    import platformdirs

    return str(getattr(platformdirs, f"user_{kind}_dir")("ctrlz"))


def xdg_base(kind: str, env: Mapping[str, str] | None = None,
             home: str | None = None) -> str | None:
    """The XDG base directory of ``kind`` (not ctrlz's own: systemd's user units and
    OpenCode's configuration live below it too): ``$XDG_<KIND>_HOME`` when it is an absolute
    path (the XDG spec: a relative one is invalid and ignored, so whitespace and empty
    values are too), else its default below ``home`` (by default the user's home, as
    platformdirs finds it: ``$HOME`` when absolute, else the password database's).
    ``runtime`` has no default: None."""
    var, default = _XDG[kind]
    env = os.environ if env is None else env
    value = env.get(var, "")
    if value.startswith("/"):
        return value
    if default is None:
        return None
    return (home if home is not None else _home(env)).rstrip("/") + "/" + default


def _home(env: Mapping[str, str]) -> str:
    """The user's home directory: ``$HOME`` from ``env`` when absolute, else the password
    database's (a relative ``$HOME`` would move every store with the working directory)."""
    home = env.get("HOME", "")
    if home.startswith("/"):
        return home
    import pwd

    return pwd.getpwuid(os.getuid()).pw_dir

def portable() -> bool:
    """Whether ``CTRLZ_PLATFORM=portable`` turned the Linux-only fast paths off. Read on every
    call (a dict lookup): tests and the portable CI pass set it for a whole process."""
    return os.environ.get(ENV, "").strip().lower() == PORTABLE


def _linux() -> bool:
    return system() == "linux" and not portable()


def _darwin() -> bool:
    return system() == "darwin" and not portable()


_libc_handle: Any = None


def _libc() -> Any:
    """The C library, through ctypes, or None: loaded once, on the first call that needs it
    (ctypes costs a process more start-up than most commands spend)."""
    global _libc_handle
    if _libc_handle is None:
        import ctypes

        try:
            _libc_handle = ctypes.CDLL(None, use_errno=True)
        except OSError:  # pragma: no cover - no C library to load
            _libc_handle = False
    return _libc_handle or None


def libc_function(name: str) -> Any:
    """``name`` from the C library, or None where it is missing."""
    libc = _libc()
    return getattr(libc, name, None) if libc is not None else None


def release_freed_memory() -> None:
    """Hand the heap's free pages back to the system (glibc's ``malloc_trim``; elsewhere
    nothing). A long-lived process that built and dropped a whole tree's worth of small
    objects (the workspace daemon after a full scan) otherwise keeps their pages: ~13 MB of
    its RSS on a 100,000-file tree. It costs a few milliseconds, so it runs when idle."""
    trim = libc_function("malloc_trim")
    if trim is not None:
        trim(0)


# -- renames ----------------------------------------------------------------------------------

def rename_call() -> str | None:
    """The call behind atomic exchange and no-replace renames: ``renameat2`` (Linux 3.15+,
    glibc 2.28+), ``renamex_np`` (macOS 10.12+, ``RENAME_SWAP``/``RENAME_EXCL``), or None:
    then a restore checks, renames and journals (``engine/restore/apply.py``)."""
    if _linux():
        return "renameat2" if libc_function("renameat2") is not None else None
    if _darwin():
        return "renamex_np" if libc_function("renameatx_np") is not None else None
    return None


def rename_function() -> Any:
    """A callable ``(src_fd, src, dst_fd, dst, linux_flags) -> int`` (0, or -1 with errno
    set) for :func:`rename_call`, or None. On macOS the Linux flags are translated."""
    import ctypes

    which = rename_call()
    if which == "renameat2":
        fn = libc_function("renameat2")
        fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                       ctypes.c_uint]
        return fn
    if which == "renamex_np":  # pragma: no cover - macOS; never run here
        fn = libc_function("renameatx_np")
        fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                       ctypes.c_uint]

        def renamex(src_fd: int, src: bytes, dst_fd: int, dst: bytes, flags: int) -> int:
            return int(fn(src_fd, src, dst_fd, dst, _DARWIN_FLAGS.get(flags, flags)))

        return renamex
    return None


# -- flushing ---------------------------------------------------------------------------------

def fs_sync() -> str:
    """How a batch of written files is made durable: ``syncfs`` (one flush per filesystem,
    Linux), ``F_FULLFSYNC`` (macOS: a plain fsync there leaves data in the drive's cache), or
    ``fsync`` (one per file and directory, everywhere else and in portable mode)."""
    if _linux() and libc_function("syncfs") is not None:
        return "syncfs"
    if _darwin():
        return "F_FULLFSYNC"
    return "fsync"


def syncfs_function() -> Any:
    """``syncfs(fd) -> int`` from the C library where :func:`fs_sync` is ``syncfs``."""
    import ctypes

    if fs_sync() != "syncfs":
        return None
    fn = libc_function("syncfs")
    fn.argtypes = [ctypes.c_int]
    return fn


def full_fsync(fd: int) -> None:
    """fsync ``fd`` so that it survives a power cut: ``F_FULLFSYNC`` on macOS, else fsync."""
    if _darwin():  # pragma: no cover - macOS; never run here
        import fcntl

        try:
            fcntl.fcntl(fd, fcntl.F_FULLFSYNC)  # type: ignore[attr-defined]
            return
        except OSError:
            pass  # not every filesystem takes it: a plain fsync is the best left
    os.fsync(fd)


# -- I/O --------------------------------------------------------------------------------------

def direct_io_flag() -> int:
    """``O_DIRECT`` where the fast path may use it (large objects past the page cache), else
    0: then they go through the page cache, with the same fsync."""
    if not _linux():
        return 0  # the BSDs have it too, untested there; macOS has F_NOCACHE instead
    return int(getattr(os, "O_DIRECT", 0))


def clone_call() -> str | None:
    """How a file's blocks can be shared: ``FICLONE`` (Linux: XFS, btrfs), ``clonefile`` (macOS
    APFS; seen here, not used by ctrlz yet), or None: then large objects are copied."""
    if _linux():
        return "FICLONE"
    if _darwin() and libc_function("clonefile") is not None:  # pragma: no cover - macOS
        return "clonefile"
    return None


def can_ficlone() -> bool:
    """Whether ``state/fsio/cow.py`` may try ``FICLONE`` (and ``state/scan/btrfs.py`` its
    ioctls)."""
    return clone_call() == "FICLONE"


# -- watching, tracing, confining, staying up -------------------------------------------------

def watcher() -> str | None:
    """The file watcher ctrlz runs (``sources/watchers.py`` turns the answer into one):

    - ``inotify``: ctrlz's own (``sources/watch.py``), on Linux with ``inotify_simple``;
    - ``watchdog:fsevents`` (macOS), ``watchdog:kqueue`` (the BSDs): watchdog's native
      observers (``sources/observe.py``);
    - ``watchdog:polling``: watchdog's polling observer, in portable mode (the one observer
      that needs nothing from the kernel, so that the portable pass runs no inotify) and
      wherever no native one exists;
    - None when watchdog is not installed either: then no workspace daemon starts (hooks and
      commands walk the tree, which is correct, only slower), ``ctrlz run`` snapshots without
      one, and the service polls the stores."""
    if _linux() and _has("inotify_simple"):
        return "inotify"
    if not _has("watchdog"):
        return None
    if _darwin():
        return "watchdog:fsevents"
    if not portable() and "bsd" in system():
        return "watchdog:kqueue"
    return "watchdog:polling"


def lower_thread_priority(nice: int) -> bool:
    """Make the calling thread, and only it, yield the CPU to other work (``nice``, 0-19):
    Linux keeps a nice value per thread, and ``setpriority`` given a thread's id changes that
    thread's alone. Elsewhere it would change the whole process, so nothing is done there.
    Whether it was done. An unprivileged thread can never take it back: use it on a thread
    that ends (the threads it starts inherit it)."""
    if not _linux():
        return False
    import threading

    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    except OSError:
        return False
    return True


def set_autogroup_nice(nice: int) -> bool:
    """Give this process's scheduling autogroup the nice value ``nice`` (0-19); whether it
    was done. Why: with ``kernel.sched_autogroup_enabled`` (the default of most desktop and
    server distributions), a process that started a session of its own (the daemon) is a
    group of its own, and the CPU is shared fairly between groups first: a thread's own nice
    value then weighs only against the other threads of its group, never against the command
    the user waits for. The group's nice weighs against the other groups. Any value from 0 up
    may be set without privilege, so the daemon can lower it for its start-up and raise it
    back; the kernel refuses more than one change in 0.1 s (EAGAIN), hence the retries."""
    if not _linux():
        return False
    import time

    try:
        with open("/proc/self/autogroup", encoding="ascii") as f:  # "/autogroup-N nice K"
            if f.read().split()[-1:] == [str(nice)]:
                return True  # already: no write, and no wait for the kernel's rate limit
    except OSError:
        return False
    for _ in range(5):
        try:
            with open("/proc/self/autogroup", "w", encoding="ascii") as f:
                f.write(str(nice))
            return True
        except BlockingIOError:
            time.sleep(0.11)
        except OSError:
            return False
    return False


def tracer() -> str | None:
    """The path of ``strace`` where exec tracing can run, else None: ``ctrlz run`` says once
    that exec tracing is off and still snapshots before and after."""
    if not _linux():
        return None
    import shutil

    return shutil.which("strace")


def no_tracer_reason() -> str:
    """Why :func:`tracer` is None, in one line for ``ctrlz run`` to say once."""
    if portable():
        return f"exec tracing is off ({ENV}=portable: no strace)"
    if system() != "linux":
        return f"exec tracing is off (strace is Linux only; this is {system()})"
    return "strace not found; install strace to record the commands run"


def service_manager() -> str | None:
    """What keeps the service running: ``systemd`` (a user unit; Linux with ``systemctl``),
    ``launchd`` (a LaunchAgent; macOS), or None: then it is started by hand."""
    if _linux():
        import shutil

        return "systemd" if shutil.which("systemctl") is not None else None
    if _darwin():
        return "launchd"
    return None


def native_door() -> bool:
    """Whether the ``ctrlz`` installed beside this interpreter is the C door (setup.py builds
    it on Linux with a C compiler; the Python script stands in everywhere else)."""
    try:
        with open(os.path.join(os.path.dirname(sys.executable), "ctrlz"), "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def native_launcher() -> str | None:
    """The sandbox's native launcher (``ctrlz-sandbox``, beside this interpreter, setup.py
    builds it where it builds the door), or None: then ``ctrlz run --sandbox`` starts its
    Python twin, ``python -m ctrlz.sandbox.launcher`` (also in portable mode, and with
    ``CTRLZ_SANDBOX_NATIVE=0``)."""
    if not _linux() or os.environ.get("CTRLZ_SANDBOX_NATIVE") == "0":
        return None
    path = os.path.join(os.path.dirname(sys.executable), "ctrlz-sandbox")
    try:
        with open(path, "rb") as f:
            return path if f.read(4) == b"\x7fELF" else None
    except OSError:
        return None


# -- the report -------------------------------------------------------------------------------

class Fact:
    """One line of ``ctrlz doctor``: what this machine offers, and what ctrlz does without.
    A plain class: a dataclass would cost every hook that asks the locator its import."""

    __slots__ = ("key", "what", "value", "without")

    def __init__(self, key: str, what: str, value: str | None, without: str) -> None:
        self.key = key
        self.what = what
        self.value = value  # None: not here
        self.without = without  # what ctrlz does where it is missing

    def to_json(self) -> dict[str, str | None]:
        return {"key": self.key, "what": self.what, "value": self.value,
                "without": self.without}


def _has(module: str) -> bool:
    from importlib.util import find_spec

    return find_spec(module) is not None


def facts() -> list[Fact]:
    """Every platform fact except the sandbox's, which its own package answers (the doctor
    asks it: a face may, this shared module may not import it)."""
    sync = fs_sync()
    return [
        Fact("system", "system", system() + (" (portable mode)" if portable() else ""),
             "-"),
        Fact("rename", "atomic exchange / no-replace rename", rename_call(),
             "rename after a stat check, with the restore's journal; link() for no-replace"),
        Fact("sync", "whole-filesystem flush", sync if sync != "fsync" else None,
             "fsync each file and directory a restore wrote"),
        Fact("direct_io", "direct I/O for large objects",
             "O_DIRECT" if direct_io_flag() else None, "large objects go through the page cache"),
        Fact("clone", "copy-on-write clones", clone_call(),
             "large objects and restores copy the bytes"),
        Fact("watch", "file watching", watcher(),
             "no workspace daemon (install watchdog): hooks and commands walk the tree"),
        Fact("trace", "exec tracing", tracer(),
             "ctrlz run says tracing is off, still snapshots before and after, and "
             + ("samples process starts (psutil)" if _has("psutil")
                else "records only the command (install psutil to sample what it starts)")),
        Fact("service", "service registration", service_manager(),
             "run `python -m ctrlz.service` yourself"),
        Fact("door", "native command door", "C" if native_door() else None,
             "the ctrlz command is the Python script (slower start)"),
    ]


# -- compression ------------------------------------------------------------------------------

_zstd: Any = None


def zstandard() -> Any:
    """The zstandard module for the store (``ZstdCompressor``, ``ZstdDecompressor``,
    ``ZstdError``): its C backend, loaded on first use.

    Not ``import zstandard`` where that can be helped: the package's ``__init__`` imports
    ``platform`` (nine regular expressions compiled) and ``typing`` to pick a backend, ~7 ms
    of a ~0.1 s cold snapshot or rollback, more than the compression itself. So the C
    backend is found and loaded as the package would load it (under its own name,
    ``zstandard.backend_c``, where the package's ``from .backend_c import *`` finds it
    again if a remote or an archive imports the package later in the same process), and
    says so as the package does (``backend`` is ``"cext"``). A backend chosen with
    ``$PYTHON_ZSTANDARD_IMPORT_POLICY``, or anything unexpected (no C backend, another
    layout), is the package's to load."""
    global _zstd
    mod = _zstd
    if mod is None:
        mod = sys.modules.get("zstandard")
        if mod is None and os.environ.get("PYTHON_ZSTANDARD_IMPORT_POLICY",
                                          "default").strip() in ("default", "cext"):
            mod = sys.modules.get("zstandard.backend_c") or _zstandard_c()
        if mod is None:
            import zstandard as mod  # type: ignore[no-redef]
        _zstd = mod
    return mod


def _zstandard_c() -> Any:
    """zstandard's C backend loaded as its package would load it, or None."""
    try:
        import _frozen_importlib as bootstrap
        import _frozen_importlib_external as external

        package = external.PathFinder.find_spec("zstandard")
        spec = external.PathFinder.find_spec(
            "zstandard.backend_c", package.submodule_search_locations)  # type: ignore[union-attr]
        mod = bootstrap.module_from_spec(spec)
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
        mod.ZstdCompressor, mod.ZstdDecompressor, mod.ZstdError  # noqa: B018 - the API
    except Exception:  # noqa: BLE001 - the package knows its own way
        return None
    mod.backend = "cext"
    sys.modules["zstandard.backend_c"] = mod
    return mod
