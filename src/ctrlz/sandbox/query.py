"""Ask what a capability set would allow, without applying it (nono-py's ``QueryContext``).

The answers are plain dicts of nono-py's shape, so code that reads ``result["status"]`` and
``result["reason"]`` works unchanged:

- ``{"status": "allowed", "reason": "granted_path", "granted_path": P, "access": A}``
- ``{"status": "denied", "reason": "path_not_granted"}``
- ``{"status": "denied", "reason": "insufficient_access", "granted": G, "requested": R}``
- ``{"status": "allowed", "reason": "network_allowed"}`` /
  ``{"status": "denied", "reason": "network_blocked"}``

The first grant that covers the path decides, in the order the grants were added; that is
nono's rule, and it is why a READ grant on a directory followed by a READ_WRITE grant on the
same directory answers ``insufficient_access`` for a write until the set is deduplicated.
"""

from __future__ import annotations

import os

from .capabilities import AccessMode, CapabilitySet, _parts

__all__ = ["QueryContext"]


class QueryContext:
    """Permission questions about a capability set, as it was when the context was made.

    The set is copied: grants added to it afterwards do not change the answers.
    """

    def __init__(self, caps: CapabilitySet) -> None:
        if not isinstance(caps, CapabilitySet):
            raise TypeError(f"caps must be a CapabilitySet, not {type(caps).__name__}")
        self._caps = caps._copy()

    def query_path(self, path: str, mode: AccessMode) -> dict[str, str]:
        """Whether ``mode`` on ``path`` would be allowed, and why.

        An existing path is resolved first (symlinks followed) and compared with the grants'
        resolved paths. A path that does not exist yet is compared as written, with both the
        resolved path and the spelling the grant was made with, so that a file about to be
        created under a symlinked grant still counts as covered.
        """
        if not isinstance(mode, AccessMode):
            raise TypeError(f"mode must be an AccessMode, not {type(mode).__name__}")
        raw = os.fspath(path)
        try:  # "" is no path (realpath would take it for the working directory)
            canonical: str | None = os.path.realpath(raw, strict=True) if raw else None
        except (OSError, ValueError):
            canonical = None
        query = _parts(canonical if canonical is not None else raw)
        raw_parts = _parts(raw)
        for cap in self._caps.fs_capabilities():
            resolved, original = _parts(cap.resolved), _parts(cap.original)
            if cap.is_file:
                covers = query == resolved or (canonical is None and raw_parts == original)
            else:
                covers = (query[:len(resolved)] == resolved
                          or (canonical is None and raw_parts[:len(original)] == original))
            if not covers:
                continue
            if cap.access.covers(mode):
                return {"status": "allowed", "reason": "granted_path",
                        "granted_path": cap.resolved, "access": str(cap.access)}
            return {"status": "denied", "reason": "insufficient_access",
                    "granted": str(cap.access), "requested": str(mode)}
        return {"status": "denied", "reason": "path_not_granted"}

    def query_network(self) -> dict[str, str]:
        """Whether the process would have a network."""
        if self._caps.is_network_blocked:
            return {"status": "denied", "reason": "network_blocked"}
        return {"status": "allowed", "reason": "network_allowed"}
