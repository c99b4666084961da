"""Tables kept beside the profiles in the profile store's SQLite file, through a connection of their own.

The host's contention fit (:mod:`~scalpel_executor.learning.host_model`) and the keys' critical
paths (:mod:`~scalpel_executor.learning.critical_path`) each keep a few tables there without
touching the profile store's schema. :class:`SideTables` is what they share: the file opened as
the profile store opens it (:func:`~scalpel_executor.learning.store.connect_file`), their schema
created, every statement in an IMMEDIATE transaction, and a file that cannot be used said once in
a warning, after which the tables carry on in memory (``problem`` says why).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from pathlib import Path

from scalpel_executor.learning.store import connect_file

logger = logging.getLogger(__name__)


class SideTables:
    """Tables of ``SCHEMA`` in the SQLite file ``path`` (None or ``":memory:"``: in memory)."""

    SCHEMA = ""  # ';'-separated CREATE statements (IF NOT EXISTS)
    WHAT = "these tables"  # how a warning names what is lost when the file cannot be used

    def __init__(self, path: str | os.PathLike | None):
        self.path = None if path is None or str(path) == ":memory:" else Path(path).expanduser()
        self.problem: str | None = None
        self._lock = threading.Lock()
        try:
            self._connection = self._open()
        except (sqlite3.Error, OSError) as error:
            self._connection = self._fail_over(error)

    def _open(self) -> sqlite3.Connection:
        if self.path is None:
            return self._prepare(sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False))
        connection = connect_file(self.path)
        try:
            return self._prepare(connection)
        except BaseException:
            connection.close()
            raise

    def _prepare(self, connection: sqlite3.Connection) -> sqlite3.Connection:
        connection.execute("BEGIN IMMEDIATE")
        for statement in filter(str.strip, self.SCHEMA.split(";")):
            connection.execute(statement)
        self._upgrade(connection)
        connection.execute("COMMIT")
        return connection

    def _upgrade(self, connection: sqlite3.Connection) -> None:
        """Bring tables written by an older version up to date (inside the schema's transaction)."""

    def _fail_over(self, error: BaseException) -> sqlite3.Connection:
        self.problem = f"{type(error).__name__}: {error}"
        logger.warning("%s cannot be kept in %s (%s); this run's are kept in memory and forgotten at shutdown",
                       self.WHAT, self.path, self.problem)
        return self._prepare(sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False))

    def _run(self, work):
        """``work(connection)`` in an IMMEDIATE transaction; on a file fault, once more in memory."""
        with self._lock:
            for attempt in (1, 2):
                try:
                    self._connection.execute("BEGIN IMMEDIATE")
                    try:
                        result = work(self._connection)
                    except BaseException:
                        self._connection.execute("ROLLBACK")
                        raise
                    self._connection.execute("COMMIT")
                    return result
                except (sqlite3.Error, OSError) as error:
                    if attempt == 2 or self.problem is not None:
                        raise
                    self._connection.close()
                    self._connection = self._fail_over(error)

    def close(self) -> None:
        with self._lock:
            self._connection.close()
