"""Agent hooks: ``ctrlz hook claude|gemini|codex`` (or ``python -m ctrlz.hooks AGENT``).

One module per agent translates that agent's documented hook JSON into calls of the tool-call
library (``ctrlz.toolcalls``); :mod:`ctrlz.hooks.runner` wraps every call so a hook always exits 0,
prints nothing and records its errors (:mod:`ctrlz.toolcalls.hook_log`, read back by
:func:`recent_hook_errors`).
"""

from __future__ import annotations

from .runner import AGENTS, run

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..toolcalls.hook_log import recent_hook_errors

__all__ = ["AGENTS", "recent_hook_errors", "run"]


def __getattr__(name: str) -> object:
    """``recent_hook_errors`` on first use: every hook imports this package, and only the
    ones that fail need the error log."""
    if name == "recent_hook_errors":
        from ..toolcalls.hook_log import recent_hook_errors

        return recent_hook_errors
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
