"""An open tool-call store and the workspace root it belongs to: what the tool-call layer's
functions are handed. Its own module so that the intake, which ``core.opened`` calls, can
name it without importing ``core``."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .store import ToolcallStore


class Place:
    """An open tool-call store and the workspace root it belongs to (resolved, as a string).
    A plain class, and no ``pathlib``: agent hooks import this module, and ``dataclasses`` or
    ``pathlib`` would cost each one milliseconds of start-up."""

    __slots__ = ("root", "store")

    def __init__(self, root: str, store: ToolcallStore) -> None:
        self.root = root
        self.store = store

    def __repr__(self) -> str:
        return f"Place(root={self.root!r}, store={self.store!r})"

    @property
    def rootb(self) -> bytes:
        return os.fsencode(self.root)

    @property
    def db(self) -> Any:
        return self.store.db
