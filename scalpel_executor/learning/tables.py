"""Tables kept beside the profiles in the profile store's SQLite file, through a connection of their own.

The host's contention fit (:mod:`~scalpel_executor.learning.host_model`) and the keys' critical
paths (:mod:`~scalpel_executor.learning.critical_path`) each keep a few tables there without
touching the profile store's schema. :class:`SideTables` is what they share: the file opened as
the profile store opens it (:func:`~scalpel_executor.learning.store.connect_file`), their schema
created (and columns added since, :attr:`SideTables.ADDED`), every write in an IMMEDIATE
transaction, reads in a deferred one, and a file that cannot be used said once in a warning, after
which the tables carry on in memory (``problem`` says why).

Opening and reading take no write lock when the schema is current: in WAL mode a writer, such as
the detached refit that may run for minutes at the lowest priority on a busy host, blocks neither,
so a run's start never queues behind the learning of the last one.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from pathlib import Path

from scalpel_executor.learning.store import connect_file, schema_present

logger = logging.getLogger(__name__)


class SideTables:
    """Tables of ``SCHEMA`` in the SQLite file ``path`` (None or ``":memory:"``: in memory)."""

    SCHEMA = ""  # ';'-separated CREATE statements (IF NOT EXISTS)
    #: Columns added since a table was first written, (table, column, declaration): a file from
    #: before one gets it when opened.
    ADDED: tuple[tuple[str, str, str], ...] = ()
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
        if schema_present(connection, self.SCHEMA) and not self._missing_columns(connection):
            return connection  # current: no write lock taken (the module docstring)
        connection.execute("BEGIN IMMEDIATE")
        for statement in filter(str.strip, self.SCHEMA.split(";")):
            connection.execute(statement)
        for table, column, declaration in self._missing_columns(connection):
            connection.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")  # a file from before it
        connection.execute("COMMIT")
        return connection

    def _missing_columns(self, connection: sqlite3.Connection) -> list[tuple[str, str, str]]:
        columns: dict[str, set[str]] = {}
        for table, _, _ in self.ADDED:
            if table not in columns:
                columns[table] = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
        return [added for added in self.ADDED if added[1] not in columns[added[0]]]

    def _fail_over(self, error: BaseException) -> sqlite3.Connection:
        self.problem = f"{type(error).__name__}: {error}"
        logger.warning("%s cannot be kept in %s (%s); this run's are kept in memory and forgotten at shutdown",
                       self.WHAT, self.path, self.problem)
        return self._prepare(sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False))

    def _read(self, work):
        """``work(connection)``, which only reads, in a deferred transaction (one snapshot, no write
        lock: a writer elsewhere does not block it); on a file fault, once more in memory."""
        return self._run(work, begin="BEGIN")

    def _run(self, work, *, begin: str = "BEGIN IMMEDIATE"):
        """``work(connection)`` in an IMMEDIATE transaction; on a file fault, once more in memory."""
        with self._lock:
            for attempt in (1, 2):
                try:
                    self._connection.execute(begin)
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
