"""What a hook adapter is handed: the agent, the workspace root and store, the payload's cwd."""

from __future__ import annotations

import os

TYPE_CHECKING = False

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


class HookContext:
    """What an adapter needs: the agent, the workspace root and store, the payload's cwd.

    It has ``root`` and ``store_path`` like a Workspace, so the tool-call API accepts it as
    ``workspace=`` without opening the heavier Workspace object. Those two are ``Path`` objects
    made on first use; ``root_dir`` and ``store_dir`` are the same paths as strings, which is
    what the file-tool path uses, so that it never needs to import ``pathlib``. A plain class,
    not a dataclass: importing ``dataclasses`` costs a hook several milliseconds."""

    __slots__ = ("agent", "root_dir", "store_dir", "cwd", "take_snapshot", "index_later",
                 "_root", "_store_path")

    def __init__(self, agent: str, root: str | os.PathLike[str],
                 store_path: str | os.PathLike[str], cwd: str) -> None:
        self.agent = agent
        self.root_dir = os.fspath(root)
        self.store_dir = os.fspath(store_path)
        self.cwd = cwd
        #: who takes a shell call's workspace snapshot: None for the usual way (the daemon
        #: if one answers, else this process); the daemon's own, when it runs the hook
        self.take_snapshot: Callable[[str], str] | None = None
        #: leave a file tool's capture in the inbox for the next opener of the store to index
        #: (:mod:`ctrlz.toolcalls.inbox`): true in a hook's own process, where importing the
        #: store costs more than the capture; false in the daemon, which has it loaded
        self.index_later = False
        self._root: Path | None = None
        self._store_path: Path | None = None

    @property
    def root(self) -> Path:
        if self._root is None:
            from pathlib import Path

            self._root = Path(self.root_dir)
        return self._root

    @property
    def store_path(self) -> Path:
        if self._store_path is None:
            from pathlib import Path

            self._store_path = Path(self.store_dir)
        return self._store_path

    def __repr__(self) -> str:
        return (f"HookContext(agent={self.agent!r}, root={self.root_dir!r}, "
                f"store_path={self.store_dir!r}, cwd={self.cwd!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HookContext):
            return NotImplemented
        return (self.agent, self.root_dir, self.store_dir, self.cwd) == (
            other.agent, other.root_dir, other.store_dir, other.cwd)

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaces
