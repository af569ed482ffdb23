"""Which workspaces this user protects, and which of them the service watches.

*Known* workspaces are found, never listed by hand: every store under the home
(:func:`ctrlz.session.locator.stores`) names the workspace root it protects, so the dashboard shows
every
workspace ``ctrlz init`` ever protected without a second list that could drift from the stores.
*Registered* workspaces are the ones the service keeps a watcher running for (one process each,
so not every store ever made): their roots are kept in ``<home>/registry.json``, read-modify-
written under an ``flock`` so the CLI and the service can both change it. A workspace's id is its
store directory's name (``app-041e1f2d2ca83e6c``): stable, unique and safe in a URL.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError, WorkspaceError
from ..paths import within
from ..state.fsio.atomic import atomic_write_bytes
from ..state.store.repository import Repository
from .locator import default_home, store_path_for, stores

REGISTRY_NAME = "registry.json"


@dataclass(frozen=True)
class KnownWorkspace:
    """One protected workspace as the service sees it."""

    id: str
    root: str
    store: str
    registered: bool
    present: bool  # the root is still a directory

    def to_json(self) -> dict[str, Any]:
        return {"type": "workspace", "id": self.id, "root": self.root, "store": self.store,
                "registered": self.registered, "present": self.present}


def _home(home: Path | None) -> Path:
    return (home or default_home()).expanduser()


@contextmanager
def _locked(home: Path) -> Iterator[None]:
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(home / (REGISTRY_NAME + ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def registered_roots(home: Path | None = None) -> list[str]:
    """The registered roots, in the order they were registered (a damaged file reads as
    none, and the next register writes a good one)."""
    try:
        data = json.loads((_home(home) / REGISTRY_NAME).read_text(encoding="utf-8"))
        roots = data.get("roots", []) if isinstance(data, dict) else []
        return [r for r in roots if isinstance(r, str)]
    except (OSError, ValueError):
        return []


def stamp(home: Path | None = None) -> int:
    """Changes whenever the registry file does (its mtime in ns; 0 when absent): the service
    polls this to start and stop watchers."""
    try:
        return (_home(home) / REGISTRY_NAME).stat().st_mtime_ns
    except OSError:
        return 0


def _write(home: Path, roots: list[str]) -> None:
    data = json.dumps({"version": 1, "roots": roots}, indent=2).encode() + b"\n"
    atomic_write_bytes(home / REGISTRY_NAME, data)


#: store path -> (catalog inode, its root): a store's root never changes, and the service asks
#: for the known workspaces every second
_ROOTS: dict[str, tuple[int, str | None]] = {}


def _root_of(store: str) -> str | None:
    """The root a workspace store protects (None for stores of another kind or unreadable)."""
    try:
        ino = os.stat(os.path.join(store, "catalog.db")).st_ino
    except OSError:
        return None
    cached = _ROOTS.get(store)
    if cached is not None and cached[0] == ino:
        return cached[1]
    root = _read_root(store)
    if root is not None:  # a store still being made may read as none: look again next time
        _ROOTS[store] = (ino, root)
    return root


def _read_root(store: str) -> str | None:
    try:
        repo = Repository.open(Path(store), readonly=True)
    except Exception:  # a damaged store must not hide the others  # noqa: BLE001
        return None
    try:
        kind = repo.catalog.get_meta("kind") or "workspace"
        return repo.roots[0] if kind == "workspace" and len(repo.roots) == 1 else None
    finally:
        repo.close()


def known(home: Path | None = None) -> list[KnownWorkspace]:
    """Every workspace with a store under ``home``, registered ones first."""
    home = _home(home)
    registered = set(registered_roots(home))
    out = []
    for store in stores(os.fspath(home)):
        root = _root_of(store)
        if root is None:
            continue
        out.append(KnownWorkspace(os.path.basename(store), root, store, root in registered,
                                  os.path.isdir(root)))
    return sorted(out, key=lambda w: (not w.registered, w.root))


def find(ref: str, home: Path | None = None) -> KnownWorkspace:
    """A known workspace by its id, or by its root (or a path inside it)."""
    found = known(home)
    for w in found:
        if w.id == ref:
            return w
    if ref.startswith("/"):
        here = os.path.realpath(ref)
        best = [w for w in found if within(here, w.root)]
        if best:
            return max(best, key=lambda w: len(w.root))
    raise WorkspaceError(f"no protected workspace {ref!r}; see GET /v1/workspaces (or run "
                         "`ctrlz init` in it)")


def check_opened(known: KnownWorkspace, root: str | os.PathLike[str],
                 store: str | os.PathLike[str]) -> None:
    """Refuse a workspace opened for ``known`` that is another one: a root replaced by a
    symlink (``mv app app.old && ln -s app-v2 app``) opens, symlinks followed, as the
    workspace it points to, and a request naming ``app`` by its id would act on
    ``app-v2``, outside the per-workspace lock kept for ``app-v2``'s id. Such a request is
    refused rather than sent to the store its id does not name."""
    if os.fspath(root) == known.root and os.path.realpath(store) == os.path.realpath(
            known.store):
        return
    raise WorkspaceError(f"the workspace {known.root} ({known.id}) now opens as {os.fspath(root)}"
                         " (its root was moved or replaced by a symlink); register the new "
                         "root if it is to be protected")


def register(path: str | os.PathLike[str], home: Path | None = None) -> KnownWorkspace:
    """Protect ``path`` (``ctrlz init``, idempotent) and have the service watch it."""
    from .protected import ProtectedWorkspace

    home = _home(home)
    if not Path(path).expanduser().is_absolute():
        raise UsageError(f"{path} is not an absolute path")
    ProtectedWorkspace.init(path, home=home).close()
    root = str(Path(path).expanduser().resolve())
    with _locked(home):
        roots = registered_roots(home)
        if root not in roots:
            _write(home, [*roots, root])
    return _by_store(home, root)


def unregister(ref: str, home: Path | None = None) -> KnownWorkspace:
    """Stop watching a workspace (its store and snapshots stay)."""
    home = _home(home)
    w = find(ref, home)
    with _locked(home):
        roots = registered_roots(home)
        if w.root in roots:
            _write(home, [r for r in roots if r != w.root])
    return _by_store(home, w.root)


def _by_store(home: Path, root: str) -> KnownWorkspace:
    store = os.fspath(store_path_for(Path(root), home))
    return KnownWorkspace(os.path.basename(store), root, store,
                          root in registered_roots(home), os.path.isdir(root))
