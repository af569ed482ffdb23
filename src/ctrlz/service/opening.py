"""Opening a workspace the service knows by id: the one way every route and the event poller
open one, so that none acts on a workspace other than the one it names (a root moved, or
replaced by a symlink to another workspace, opens as that other one)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .. import errors

if TYPE_CHECKING:
    from pathlib import Path

    from ..session.registry import KnownWorkspace
    from ..workspace import Workspace


def open_known(known: KnownWorkspace, home: Path) -> Workspace:
    """The workspace ``known`` names, opened; refused (404) when its root is gone, or when
    it now opens as another workspace (:func:`ctrlz.session.registry.check_opened`): every
    route and the event poller open workspaces here, so none can act on one it did not
    name."""
    from ..session.registry import check_opened
    from ..workspace import Workspace

    if not os.path.isdir(known.root):
        raise errors.WorkspaceError(f"the workspace {known.root} is gone (its store "
                                    f"{known.store} is kept)")
    ws = Workspace.open(known.root, home=home)
    try:
        check_opened(known, ws.root, ws.store_path)
    except BaseException:
        ws.close()
        raise
    return ws
