"""One catalog transaction: ``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back on any exception,
with what a full disk means said as such."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from ...errors import StoreError, StoreFull


def _full(err: sqlite3.Error) -> bool:
    return "full" in str(err).lower()


def _store_full(err: sqlite3.Error) -> StoreFull:
    return StoreFull(f"the store's disk is full ({err}); free some space (`ctrlz gc` also "
                     "removes what a failed snapshot left)")


class Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back on any exception."""

    def __init__(self, db: sqlite3.Connection, on_end: list[Callable[[bool], None]]) -> None:
        self.db = db
        self.on_end = on_end

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if exc is not None:
            self._rollback()
            if isinstance(exc, sqlite3.OperationalError) and _full(exc):
                raise _store_full(exc) from exc
            return
        try:
            self.db.execute("COMMIT")
        except sqlite3.OperationalError as err:
            self._rollback()
            if _full(err):
                raise _store_full(err) from err
            raise StoreError(f"could not commit to the catalog: {err}") from err
        self._ended(True)

    def _rollback(self) -> None:
        """Roll back, unless SQLite already did: on a full disk it ends the transaction itself,
        and a second ROLLBACK raised "no transaction is active" over the real error (which a
        face then showed as an unreadable catalog)."""
        try:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
        finally:
            self._ended(False)

    def _ended(self, committed: bool) -> None:
        todo, self.on_end[:] = list(self.on_end), []
        for fn in todo:
            fn(committed)
