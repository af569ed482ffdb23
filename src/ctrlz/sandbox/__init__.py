"""Confining an agent (see docs/sandbox.md), and the Python API nono-py users know.

``from ctrlz.sandbox import CapabilitySet, AccessMode, apply, sandboxed_exec, ...`` offers
nono-py's sandbox surface with its names, signatures and results: code written for
``nono_py`` runs after changing only the import. Linux only, through Landlock and seccomp
(``landlock.py``, ``seccomp.py``). nono-py's policy groups, network proxy and audit log are
not part of it.

The names load on first use: ``ctrlz.run`` and the hooks import this package's submodules
(the launcher, the filters) and must not pay for the API they do not use.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from typing import Any

    from .capabilities import AccessMode, CapabilitySet, CapabilitySource, FsCapability
    from .enforce import SupportInfo, apply, is_supported, support_info
    from .execute import ExecResult, sandboxed_exec
    from .query import QueryContext
    from .state import SandboxState

_EXPORTS = {
    **dict.fromkeys(["AccessMode", "CapabilitySet", "CapabilitySource", "FsCapability"],
                    "capabilities"),
    **dict.fromkeys(["SupportInfo", "apply", "is_supported", "support_info"], "enforce"),
    **dict.fromkeys(["ExecResult", "sandboxed_exec"], "execute"),
    "QueryContext": "query",
    "SandboxState": "state",
}

__all__ = [
    "AccessMode", "CapabilitySet", "CapabilitySource", "ExecResult", "FsCapability",
    "QueryContext", "SandboxState", "SupportInfo", "apply", "is_supported", "sandboxed_exec",
    "support_info",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
