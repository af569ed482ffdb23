"""Where tool-call state lives, for the tool-call layer: the store itself
(:mod:`ctrlz.state.store.toolcall_store`) and the workspace it belongs to
(:mod:`ctrlz.session.locator`).

Kept as one import for the API, the hooks and the tests; it adds only :func:`find_workspace`.
"""

from __future__ import annotations

import os

from ..session.locator import default_home, home_dir, locate, store_path_for
from ..state.store.toolcall_store import ToolcallStore, sync_preimage_cap

TYPE_CHECKING = False

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["ToolcallStore", "default_home", "find_workspace", "home_dir", "locate",
           "store_path_for", "sync_preimage_cap"]


def find_workspace(start: str | os.PathLike[str], home: Path | None = None) -> tuple[Path, Path]:
    """(workspace root, its store) for the protected workspace containing ``start``
    (:func:`ctrlz.session.locator.locate`, the one store locator, with ``Path`` results)."""
    from pathlib import Path

    root, store = locate(start, None if home is None else os.fspath(home))
    return Path(root), Path(store)
