"""The one store locator: where the store of a workspace lives.

``<home>/workspaces/<slug>-<first 16 hex of sha256(real path)>``, with ``home`` from
``$CTRLZ_HOME`` or the platform's user data directory. Everything that looks for a store (the
Python API, the CLI, agent hooks, the daemon) goes through :func:`store_dir` or
:func:`store_path_for`, so they can never disagree.

The string functions here run in every agent hook, so they import neither ``pathlib`` nor
``hashlib`` nor ``re`` (each costs a hook milliseconds of start-up); the ``Path`` versions are
for everything else.
"""

from __future__ import annotations

import os

from .. import platform
from ..errors import ConfigError, UsageError, WorkspaceError
from ..paths import within

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

if TYPE_CHECKING:
    from pathlib import Path

# what re.sub(r"[^A-Za-z0-9._-]", "_", name) keeps, without compiling a regular expression
_SLUG_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def _expanduser(path: str, env: Mapping[str, str]) -> str:
    """``os.path.expanduser`` of ``~`` or ``~/...`` (a ``$CTRLZ_HOME``) with ``$HOME`` from
    ``env``; as it does, the password database's home when ``env`` has none."""
    home = env.get("HOME")
    if home is None:
        import pwd

        home = pwd.getpwuid(os.getuid()).pw_dir
    return (home.rstrip("/") + path[1:]) or "/"


def home_dir(environ: Mapping[str, str] | None = None) -> str:
    """``$CTRLZ_HOME`` if set, else the platform's user data directory for ctrlz (``environ``:
    another process's environment instead of this one's, see
    :func:`ctrlz.platform.user_dir`).

    A home that cannot be a directory (a file, or under one) is a
    :class:`~ctrlz.errors.ConfigError` here, where the home is resolved: otherwise every
    lookup misses and says "run `ctrlz init`", and init then fails on "Not a directory". An
    existing directory costs one ``stat``; a home not made yet is fine (init makes it)."""
    env = (os.environ if environ is None else environ).get("CTRLZ_HOME")
    if not env:
        home = platform.user_dir("data", environ)
    elif environ is not None and env[:2] in ("~", "~/"):
        home = _expanduser(env, environ)
    else:  # this process's own, a plain path, or ~user (the password database's, for anyone)
        home = os.path.expanduser(env)
    if not os.path.isdir(home):
        _check_home(home, env)
    return home


def _check_home(home: str, env: str | None) -> None:
    """Raise if ``home``, or the nearest of its parents that exists, is not a directory."""
    blocker = os.path.abspath(home)
    while not os.path.lexists(blocker):
        parent = os.path.dirname(blocker)
        if parent == blocker:
            return
        blocker = parent
    if os.path.isdir(blocker):
        return
    what = ("is not a directory" if blocker == os.path.abspath(home)
            else f"is under {blocker}, which is not a directory")
    if env:
        raise ConfigError(f"$CTRLZ_HOME ({env}) {what}; set CTRLZ_HOME to a directory for "
                          "the stores (or unset it for the default)")
    raise ConfigError(f"the store home {home} {what}; move it away, or set CTRLZ_HOME to a "
                      "directory for the stores")


def default_home() -> Path:
    from pathlib import Path

    return Path(home_dir())


def _sha256(data: bytes) -> Any:
    """SHA-256 without ``hashlib``, whose import loads OpenSSL (milliseconds of every hook's
    start-up) for one short digest; CPython's built-in module gives the same bytes."""
    try:
        from _sha256 import sha256  # CPython 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # CPython 3.12+
        except ImportError:
            from hashlib import sha256
    return sha256(data)


def store_dir(real_root: str, home: str) -> str:
    """The store of the workspace at ``real_root`` (already resolved)."""
    slug = "".join(c if c in _SLUG_CHARS else "_" for c in os.path.basename(real_root))
    slug = slug[:40] or "root"
    digest = _sha256(os.fsencode(real_root)).hexdigest()[:16]
    return os.path.join(home, "workspaces", f"{slug}-{digest}")


def has_store(store: str | os.PathLike[str]) -> bool:
    """Whether a store is at ``store``: its catalog is there (a directory alone may be a
    store whose creation was interrupted, or something else)."""
    return os.path.isfile(os.path.join(store, "catalog.db"))


def store_path_for(root: Path, home: Path) -> Path:
    from pathlib import Path

    return Path(store_dir(os.fspath(root.resolve()), os.fspath(home)))


def locate(start: str | os.PathLike[str], home: str | None = None) -> tuple[str, str]:
    """(workspace root, its store) for the protected workspace containing ``start``, on
    strings."""
    home = os.path.expanduser(home or home_dir())
    here = os.path.realpath(os.path.expanduser(os.fspath(start)))
    candidate = here
    while True:
        store = store_dir(candidate, home)
        if has_store(store):
            return candidate, store
        parent = os.path.dirname(candidate)
        if parent == candidate:
            break
        candidate = parent
    raise WorkspaceError(f"{here} is not inside a protected workspace; run `ctrlz init` there "
                         "first")


def stores_dir(home: str | None = None) -> str:
    """The directory every store under ``home`` is in (what the service watches for stores
    made or removed)."""
    return os.path.join(os.path.expanduser(home or home_dir()), "workspaces")


def stores(home: str | None = None) -> list[str]:
    """Every store under ``home`` (default :func:`home_dir`) that has a catalog, by path: the
    workspaces this user protects, for the service's overview. Unreadable entries are left
    out; reading a store's roots is its opener's business."""
    base = stores_dir(home)
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    return [os.path.join(base, n) for n in names if has_store(os.path.join(base, n))]


def inside(path: Path, root: Path) -> bool:
    """Whether ``path`` is ``root`` or below it, links resolved."""
    return within(str(path.resolve()), str(root.resolve()))


def refuse_root_in_home(root: Path, home: Path) -> None:
    """A directory inside the store home (a store, its objects) is never a workspace: one
    protected there has its "restores" rewrite another workspace's catalog and packs under
    that workspace's feet, unseen by its verify. Every protecting and opening goes through
    here (``ctrlz init``, ``POST /v1/workspaces``, the faces' opens); one made before this
    check cannot be opened either."""
    if inside(root, home):
        raise UsageError(f"{root} is inside the ctrlz store home {home}, which holds stores, "
                         "not workspaces; protect a directory outside it")
