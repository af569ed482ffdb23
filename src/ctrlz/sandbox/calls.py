"""The write-intent system calls: where each names the path it writes.

Apart, and small, because two readers of refused writes share it: the tracer's parser
(:mod:`ctrlz.sources.trace.denials`, from strace's lines) and the native launcher's observer
(:mod:`.observer`, from the call's own arguments).
"""

from __future__ import annotations

#: For each syscall, which argument (0-based) holds the path refused and which one its
#: directory fd (None: relative to the cwd). For rename and link, the new name: a write going
#: out of the workspace is refused at its target. ``utimensat(fd, NULL)`` names the fd's file.
PATH_ARG: dict[str, tuple[int, int | None]] = {
    "open": (0, None), "creat": (0, None), "mkdir": (0, None), "mknod": (0, None),
    "unlink": (0, None), "rmdir": (0, None), "truncate": (0, None), "chmod": (0, None),
    "chown": (0, None), "lchown": (0, None), "rename": (1, None), "link": (1, None),
    "symlink": (1, None),
    "openat": (1, 0), "openat2": (1, 0), "mkdirat": (1, 0), "mknodat": (1, 0),
    "unlinkat": (1, 0), "fchmodat": (1, 0), "fchmodat2": (1, 0), "fchownat": (1, 0),
    "utimensat": (1, 0), "renameat": (3, 2), "renameat2": (3, 2), "linkat": (3, 2),
    "symlinkat": (2, 1),
}
