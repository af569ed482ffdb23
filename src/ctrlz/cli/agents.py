"""Agent integration commands: ``ctrlz hook``, ``ctrlz install``/``uninstall``, ``ctrlz rewind``."""

from __future__ import annotations

COMMANDS: list = []
