"""What a workspace knows about its remotes: ``<store>/remotes.db`` (SQLite, WAL).

* ``remotes`` — name, URL, optional endpoint URL, region and AWS profile, and for an encrypted
  remote *where* its key is (a file path or an environment variable's name), never the key and
  never any credential: those come from the AWS chain each time;
* ``pushed`` — which snapshots each remote is known to hold (pushed from here, or pulled from
  there), so ``ctrlz status`` can say what is not pushed yet without asking the network;
* ``origins`` — who made each snapshot that came from elsewhere (machine, user, agent,
  session), so pushing it on keeps its provenance;
* ``meta`` — this workspace's remote identity: ``workspace_id`` (the name of its ref on every
  remote, shared by every clone) and ``workspace_name``.

Kept beside the catalog, not in it: the catalog is the snapshot format, and a store that never
meets a remote never grows this file.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import StoreError, UsageError

SCHEMA = """
CREATE TABLE IF NOT EXISTS remotes (
    name TEXT PRIMARY KEY, url TEXT NOT NULL, endpoint_url TEXT, region TEXT, profile TEXT,
    encrypt INTEGER NOT NULL DEFAULT 0, key_file TEXT, key_env TEXT, created_ns INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS pushed (
    remote TEXT NOT NULL, snapshot_id TEXT NOT NULL, PRIMARY KEY (remote, snapshot_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS origins (snapshot_id TEXT PRIMARY KEY, origin TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class RemoteSpec:
    name: str
    url: str
    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    encrypt: bool = False
    key_file: str | None = None
    key_env: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "url": self.url, "endpoint_url": self.endpoint_url,
                "region": self.region, "profile": self.profile, "encrypt": self.encrypt,
                "key_file": self.key_file, "key_env": self.key_env}


def check_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise UsageError(f"{name!r} is not a remote name; use letters, digits, '.', '_' and "
                         "'-' (up to 64, starting with a letter or digit)")
    return name


class Registry:
    def __init__(self, store: Path) -> None:
        self.path = store / "remotes.db"
        try:
            self.db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
            self.db.execute("PRAGMA busy_timeout = 30000")
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = FULL")
            with self.db:
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        self.db.execute(statement)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from exc

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- remotes -----------------------------------------------------------------------------

    def add(self, spec: RemoteSpec) -> None:
        import time

        try:
            with self.db:
                self.db.execute(
                    "INSERT INTO remotes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (spec.name, spec.url, spec.endpoint_url, spec.region, spec.profile,
                     int(spec.encrypt), spec.key_file, spec.key_env, time.time_ns()))
        except sqlite3.IntegrityError:
            raise UsageError(f"a remote named {spec.name!r} exists already; "
                             f"`ctrlz remote remove {spec.name}` first") from None

    def remove(self, name: str) -> RemoteSpec:
        spec = self.get(name)
        with self.db:
            self.db.execute("DELETE FROM remotes WHERE name = ?", (name,))
            self.db.execute("DELETE FROM pushed WHERE remote = ?", (name,))
        return spec

    def get(self, name: str) -> RemoteSpec:
        row = self.db.execute("SELECT name, url, endpoint_url, region, profile, encrypt, "
                              "key_file, key_env FROM remotes WHERE name = ?", (name,)).fetchone()
        if row is None:
            known = ", ".join(s.name for s in self.all()) or "none yet"
            raise UsageError(f"no remote named {name!r} (remotes: {known}); add one with "
                             "`ctrlz remote add NAME URL`")
        return RemoteSpec(row[0], row[1], row[2], row[3], row[4], bool(row[5]), row[6], row[7])

    def all(self) -> list[RemoteSpec]:
        return [RemoteSpec(r[0], r[1], r[2], r[3], r[4], bool(r[5]), r[6], r[7])
                for r in self.db.execute("SELECT name, url, endpoint_url, region, profile, "
                                         "encrypt, key_file, key_env FROM remotes ORDER BY "
                                         "created_ns, name")]

    # -- what each remote holds ------------------------------------------------------------

    def mark_pushed(self, remote: str, ids: list[str]) -> None:
        with self.db:
            self.db.executemany("INSERT OR IGNORE INTO pushed VALUES (?, ?)",
                                [(remote, i) for i in ids])

    def set_pushed(self, remote: str, ids: list[str]) -> None:
        """What the remote's ref was just seen to hold, replacing what was known."""
        with self.db:
            self.db.execute("DELETE FROM pushed WHERE remote = ?", (remote,))
            self.db.executemany("INSERT OR IGNORE INTO pushed VALUES (?, ?)",
                                [(remote, i) for i in ids])

    def pushed(self, remote: str) -> set[str]:
        return {r[0] for r in self.db.execute(
            "SELECT snapshot_id FROM pushed WHERE remote = ?", (remote,))}

    def set_origins(self, origins: dict[str, dict[str, Any]]) -> None:
        with self.db:
            self.db.executemany("INSERT OR REPLACE INTO origins VALUES (?, ?)",
                                [(k, json.dumps(v)) for k, v in origins.items()])

    def origins(self) -> dict[str, dict[str, Any]]:
        return {r[0]: json.loads(r[1]) for r in self.db.execute("SELECT * FROM origins")}

    # -- identity --------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def workspace_id(self, default_name: str) -> tuple[str, str]:
        """(id, name) of this workspace on remotes, made on first use."""
        wid = self.get_meta("workspace_id")
        if wid is None:
            wid = os.urandom(8).hex()
            self.set_meta("workspace_id", wid)
            self.set_meta("workspace_name", default_name)
        return wid, self.get_meta("workspace_name") or default_name
