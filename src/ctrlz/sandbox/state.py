"""A capability set as JSON, to keep or to hand to another process (nono-py's ``SandboxState``).

The text is the one nono writes, so a state saved by nono-py loads here and the other way::

    {
      "fs": [
        {"original": "/tmp", "resolved": "/tmp", "access": "read+write", "is_file": false}
      ],
      "net_blocked": true
    }

(pretty-printed with two spaces, one key per line). Loading also takes the shorter form nono-py's
documentation shows, ``{"path": ..., "access": "ReadWrite", ...}``, since users copy from it.

:meth:`SandboxState.to_caps` re-validates every path through ``allow_path``/``allow_file`` from
the spelling it was granted with: a crafted or stale state cannot grant a path that does not
exist, or a file as a directory, and a symlink that was re-pointed is resolved again.
"""

from __future__ import annotations

import json as _json

from .capabilities import AccessMode, CapabilitySet, FsCapability

__all__ = ["SandboxState"]

#: Access words a state may hold: nono's (``str(AccessMode)``) and its documentation's.
_ACCESS = {**{m.value: m for m in AccessMode},
           "Read": AccessMode.READ, "Write": AccessMode.WRITE, "ReadWrite": AccessMode.READ_WRITE}


class _Entry:
    """One serialized grant: the fields nono writes, not yet validated against the disk."""

    __slots__ = ("access", "is_file", "original", "resolved")

    def __init__(self, original: str, resolved: str, access: str, is_file: bool) -> None:
        self.original, self.resolved, self.access, self.is_file = (
            original, resolved, access, is_file)

    def to_dict(self) -> dict:
        return {"original": self.original, "resolved": self.resolved, "access": self.access,
                "is_file": self.is_file}


def _field(obj: dict, key: str, kind: type, where: str) -> object:
    if key not in obj:
        raise ValueError(f"Invalid JSON: missing field `{key}`{where}")
    value = obj[key]
    if type(value) is not kind:  # bool is an int: compare types exactly
        raise ValueError(f"Invalid JSON: `{key}`{where} must be {kind.__name__}, "
                         f"not {type(value).__name__}")
    return value


def _entry(obj: object, index: int) -> _Entry:
    where = f" in fs[{index}]"
    if not isinstance(obj, dict):
        raise ValueError(f"Invalid JSON: fs[{index}] must be an object")
    if "original" not in obj and "resolved" not in obj and "path" in obj:
        path = _field(obj, "path", str, where)
        obj = {**obj, "original": path, "resolved": path}
    return _Entry(_field(obj, "original", str, where), _field(obj, "resolved", str, where),
                  _field(obj, "access", str, where), _field(obj, "is_file", bool, where))


class SandboxState:
    """A serializable snapshot of a :class:`CapabilitySet`: its grants and its network."""

    __slots__ = ("_fs", "_net_blocked")

    def __init__(self, fs: list[_Entry], net_blocked: bool) -> None:
        self._fs = fs
        self._net_blocked = net_blocked

    @staticmethod
    def from_caps(caps: CapabilitySet) -> SandboxState:
        """The state of ``caps`` now (later changes to ``caps`` are not seen)."""
        if not isinstance(caps, CapabilitySet):
            raise TypeError(f"caps must be a CapabilitySet, not {type(caps).__name__}")
        return SandboxState([_Entry(c.original, c.resolved, str(c.access), c.is_file)
                             for c in caps.fs_capabilities()], caps.is_network_blocked)

    def to_json(self) -> str:
        """The state as JSON text (nono's layout)."""
        doc = {"fs": [e.to_dict() for e in self._fs], "net_blocked": self._net_blocked}
        text = _json.dumps(doc, indent=2, ensure_ascii=False)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            # a path that is not UTF-8 (held as surrogate escapes): escape it, so the text
            # stays writable and from_json gives back the same bytes
            text = _json.dumps(doc, indent=2, ensure_ascii=True)
        return text

    @staticmethod
    def from_json(json: str) -> SandboxState:
        """Read a state back from :meth:`to_json`'s text.

        Raises ValueError when the text is not JSON or lacks a field (``fs``, ``net_blocked``,
        and each grant's path, ``access`` and ``is_file``); unknown fields are ignored.
        """
        if not isinstance(json, str):
            raise TypeError(f"json must be str, not {type(json).__name__}")
        try:
            doc = _json.loads(json)
        except ValueError as e:
            raise ValueError(f"Invalid JSON: {e}") from None
        if not isinstance(doc, dict):
            raise ValueError("Invalid JSON: expected an object with `fs` and `net_blocked`")
        fs = _field(doc, "fs", list, "")
        net_blocked = _field(doc, "net_blocked", bool, "")
        assert isinstance(fs, list) and isinstance(net_blocked, bool)
        return SandboxState([_entry(e, i) for i, e in enumerate(fs)], net_blocked)

    def to_caps(self) -> CapabilitySet:
        """A new capability set with these grants, each checked against the disk again.

        Raises FileNotFoundError if a path no longer exists, ValueError if one changed kind
        (file/directory) or an access word is unknown.
        """
        caps = CapabilitySet()
        for e in self._fs:
            mode = _ACCESS.get(e.access)
            if mode is None:
                raise ValueError(f"invalid access mode in sandbox state: {e.access}")
            caps._add(FsCapability.new(e.original, mode, is_file=e.is_file))
        if self._net_blocked:
            caps.block_network()
        return caps

    @property
    def net_blocked(self) -> bool:
        """True if the network is blocked in this state."""
        return self._net_blocked

    def __repr__(self) -> str:
        return f"SandboxState(fs={len(self._fs)}, net_blocked={self._net_blocked})"
