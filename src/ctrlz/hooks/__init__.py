"""Agent hooks: ``ctrlz hook claude|gemini|codex`` (or ``python -m ctrlz.hooks AGENT``).

One module per agent translates that agent's documented hook JSON into calls of the tool-call
library (``ctrlz.toolcalls``); :mod:`ctrlz.hooks.runner` wraps every call so a hook always exits 0,
prints nothing and records its errors (:mod:`ctrlz.toolcalls.hook_log`, read back by
:func:`recent_hook_errors`).
"""

from __future__ import annotations

from ..toolcalls.hook_log import recent_hook_errors
from .runner import AGENTS, run

__all__ = ["AGENTS", "recent_hook_errors", "run"]
