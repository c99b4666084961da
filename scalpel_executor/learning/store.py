"""The profile store: what earlier runs measured, per profile key, in one SQLite file.

::

    executor (submit, DFK thread) ── lookup(key) ──┐
                                                   v
                        ProfileStore ── one sqlite3 connection, a lock, WAL mode ── profiles.sqlite
                                                   ^                                 (-wal, -shm)
    executor (completion thread) ── record([Observation, ...]) ── one IMMEDIATE transaction

Each row holds running statistics per key: the count, Welford's mean and sum of squared deviations,
and an exponentially weighted mean (``alpha`` = 0.3) that follows drift, for the run time and the
footprint separately (a task whose footprint could not be measured still teaches its run time).
Estimates use the weighted mean.

An observation names up to three keys (:class:`Observation`): the key it is recorded under, the
shape key that key refines, and the call's exact key. Under a shape key that is not split, each
exact key's statistics are kept in ``variants`` (not keys: ``profiles()`` does not list them), and
:func:`~scalpel_executor.learning.refine.should_split` is asked after every batch; a split moves
every variant into ``profiles`` as a key whose ``refines`` names the shape key, and marks the
shape key ``split``. A refined key's observations also update its shape key, which is what a new
exact key falls back to. :meth:`ProfileStore.app_profile` pools every unrefined key of an app.

**Schema.** Version 2 (``meta.schema``) added ``refines``, ``split`` and ``variants``. A store of
version 1 is upgraded when it is opened for writing, once, in one transaction: its keys are
rewritten by today's key rule and merged (:mod:`~scalpel_executor.learning.migrate`). Opened
read-only, or by a process that cannot write it, the same rewrite is done on the copy in memory.
A store of a later version is read, like a damaged one, into memory with one warning.

Rules this module keeps:

- **Safe with several writers.** Every update is a read-modify-write inside ``BEGIN IMMEDIATE``,
  and SQLite's busy timeout queues concurrent writers, so two processes updating one key lose no
  counts.
- **Never fails a task.** A store that cannot be opened or written (corrupt file, read-only
  directory, full disk) logs one warning and carries on in memory: lookups still answer (with what
  could be read), new measurements last until the executor stops. Only a path that names a
  directory is refused at once, because that is a typo, not a fault.
- **Only numbers and strings** cross the disk boundary; nothing is unpickled.
- **User-only permissions**: a new store's directory is 0700 and its file 0600 (SQLite gives the
  -wal and -shm files the same mode).

The default path is ``$SCALPEL_PROFILE_STORE``, else ``$XDG_DATA_HOME/scalpel-executor/profiles.sqlite``
(``~/.local/share/...``).
"""

from __future__ import annotations

import logging
import math
import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import NamedTuple

from scalpel_executor.learning.exchange import document_rows, finite, store_document
from scalpel_executor.learning.migrate import rekey_rows, size_free_match, size_free_prefix
from scalpel_executor.learning.refine import Moments, merge_rows, should_split

logger = logging.getLogger(__name__)

SCHEMA_VERSION = "2"
DEFAULT_ALPHA = 0.3
BUSY_TIMEOUT_MS = 30_000

_STATISTICS = """
    key TEXT PRIMARY KEY,
    app TEXT NOT NULL,
    runs INTEGER NOT NULL DEFAULT 0,
    runtime_mean REAL, runtime_m2 REAL, runtime_ewma REAL,
    footprint_runs INTEGER NOT NULL DEFAULT 0,
    footprint_mean REAL, footprint_m2 REAL, footprint_ewma REAL,
    peak_rss REAL,
    llc_miss_rate REAL,
    origin TEXT NOT NULL,
    updated REAL NOT NULL"""
_META = "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)"
_VERSION_2 = f"""
CREATE TABLE IF NOT EXISTS variants ({_STATISTICS}, shape TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS variants_by_shape ON variants (shape);
CREATE INDEX IF NOT EXISTS profiles_by_app ON profiles (app);
"""
# A malleable app's speed-up: Amdahl serial fractions its runs at a width read (core.widths), summed.
# A table of its own, created by IF NOT EXISTS in a store of either version (no version change).
_SPEEDUPS = ("CREATE TABLE IF NOT EXISTS speedups (key TEXT PRIMARY KEY, readings INTEGER NOT NULL, "
             "serial_sum REAL NOT NULL, updated REAL NOT NULL);")
_SCHEMA = (f"CREATE TABLE IF NOT EXISTS profiles ({_STATISTICS}, refines TEXT, split INTEGER NOT NULL DEFAULT 0);"
           + _VERSION_2 + _SPEEDUPS)
_UPGRADE_FROM_1 = ("ALTER TABLE profiles ADD COLUMN refines TEXT;"
                   "ALTER TABLE profiles ADD COLUMN split INTEGER NOT NULL DEFAULT 0;" + _VERSION_2 + _SPEEDUPS)
_COLUMNS = (
    "key, app, runs, runtime_mean, runtime_m2, runtime_ewma, footprint_runs, footprint_mean, footprint_m2, "
    "footprint_ewma, peak_rss, llc_miss_rate, origin, updated"
)
_ALL = _COLUMNS + ", refines, split"
_ROW = ",".join("?" * 14)


def default_path() -> Path:
    """Where the store lives unless told otherwise (see the module docstring)."""
    explicit = os.environ.get("SCALPEL_PROFILE_STORE")
    if explicit:
        return Path(explicit).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(data_home) / "scalpel-executor" / "profiles.sqlite"


def store_path(profiles: str | os.PathLike | ProfileStore | bool | None) -> str | None:
    """The file an executor's ``profiles=`` argument names (None or True: :func:`default_path`);
    None when it opens none (False) or gives one open. A directory is refused here, at once."""
    if profiles is False or isinstance(profiles, ProfileStore):
        return None
    path = str(default_path()) if profiles is None or profiles is True else os.fspath(profiles)
    if path != ":memory:" and os.path.isdir(os.path.expanduser(path)):
        raise ValueError(
            f"profiles={path!r} is a directory; give a file path such as "
            f"{os.path.join(path, 'profiles.sqlite')!r}, or profiles=False to run without a profile store"
        )
    return path


def open_store(profiles: str | os.PathLike | ProfileStore | bool | None, path: str | None) -> ProfileStore | None:
    """The store a run uses: the one given open, else the file ``path`` (:func:`store_path`), else none."""
    if profiles is False:
        return None
    if isinstance(profiles, ProfileStore):
        return profiles
    return ProfileStore(path)


class Observation(NamedTuple):
    """One finished task's measurements. ``None`` means "not measured". (A named tuple: one is made
    per task on the thread that delivers results, 0.5 us where a frozen dataclass took 1.8.)"""

    key: str
    app: str
    runtime: float | None = None  # wall seconds
    footprint: float | None = None  # bytes
    peak_rss: float | None = None  # bytes
    llc_miss_rate: float | None = None  # misses / references, where counters exist
    shape: str | None = None  # the shape key that ``key`` refines, when it is not ``key`` itself
    exact: str | None = None  # the call's exact key, when ``key`` is its (unsplit) shape key
    serial: float | None = None  # the serial fraction a malleable task's run at a width read (core.widths)


@dataclass(frozen=True)
class Profile:
    """The statistics of one key."""

    key: str
    app: str
    runs: int
    runtime_mean: float | None
    runtime_std: float | None
    runtime: float | None  # the estimate: exponentially weighted mean
    footprint_runs: int
    footprint_mean: float | None
    footprint_std: float | None
    footprint: float | None  # the estimate: exponentially weighted mean
    peak_rss: float | None
    llc_miss_rate: float | None
    origin: str  # "measured", "imported:<name>", or "pooled" (an app's profile)
    updated: float  # Unix time
    refines: str | None = None  # the shape key this key was split from
    split: bool = False  # this shape key's small integers have keys of their own

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Speedup:
    """A malleable key's speed-up as its runs at several widths read it: Amdahl's serial fraction
    (the readings' plain mean; the scheduler shrinks it toward no gain, core.widths.SpeedupModel)."""

    key: str
    serial_fraction: float
    readings: int
    updated: float  # Unix time

    def speedup(self, width: int) -> float:
        """Run time on one core over run time on ``width``, by Amdahl's law."""
        return 1.0 / (self.serial_fraction + (1.0 - self.serial_fraction) / width)


def _std(runs: int, m2: float | None) -> float | None:
    return math.sqrt(m2 / (runs - 1)) if runs > 1 and m2 is not None else None


def _profile(row: tuple) -> Profile:
    key, app, runs, rt_mean, rt_m2, rt_ewma, fp_runs, fp_mean, fp_m2, fp_ewma, rss, miss, origin, updated = row[:14]
    refines, split = row[14:] or (None, 0)
    return Profile(key, app, runs, rt_mean, _std(runs, rt_m2), rt_ewma, fp_runs, fp_mean, _std(fp_runs, fp_m2),
                   fp_ewma, rss, miss, origin, updated, refines, bool(split))


_STARTS_WITH = "LIKE ? ESCAPE '\\'"  # with _starting(prefix): keys that start with ``prefix``


def _starting(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _welford(count: int, mean: float | None, m2: float | None, ewma: float | None, value: float, alpha: float):
    """One more value into (count, mean, M2, weighted mean) — Welford's update, O(1)."""
    moments = Moments.of(count, mean, m2).add(value)
    ewma = value if ewma is None or not count else alpha * value + (1 - alpha) * ewma
    return moments.count, moments.mean, moments.m2, ewma


def connect_file(path: Path) -> sqlite3.Connection:
    """A connection to the store's file (created 0600 in a 0700 folder when missing) in WAL mode,
    waiting for writers up to BUSY_TIMEOUT_MS; shared by every table kept in that file."""
    if not path.parent.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))  # sqlite3 would use the umask
    connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
    try:
        connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if connection.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() != "wal":
            raise sqlite3.OperationalError("the file system does not support WAL mode")
        connection.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        connection.close()
        raise
    return connection


_TABLE = re.compile(r"CREATE TABLE IF NOT EXISTS (\w+)", re.IGNORECASE)


def schema_present(connection: sqlite3.Connection, schema: str, meta: dict[str, str] | None = None) -> bool:
    """Whether every table ``schema`` creates exists (and ``meta``'s names have these values in
    the ``meta`` table), read without a write lock: in WAL mode a writer holding one, such as a
    detached refit, does not block it. Opening a store whose schema is current then takes no lock,
    where ``BEGIN IMMEDIATE`` queued behind a refit for up to :data:`BUSY_TIMEOUT_MS` (a starved
    refit held ``parsl.load()`` 30 s and then left the run without its store)."""
    try:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not set(_TABLE.findall(schema)) <= tables:
            return False
        for name, value in (meta or {}).items():
            row = connection.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
            if row is None or row[0] != value:
                return False
    except sqlite3.OperationalError:  # busy on a file another process is creating: take the locked path
        return False
    return True


class ProfileStore:
    """Per-key running statistics of run time and footprint, in SQLite.

    Parameters
    ----------
    path : str or Path, optional
        The SQLite file (created with its directory if missing). Default :func:`default_path`.
        ``":memory:"`` keeps everything in memory.
    alpha : float
        Weight of the newest value in the exponentially weighted means (0 < alpha <= 1).

    Raises
    ------
    ValueError
        If ``path`` is an existing directory, or ``alpha`` is out of range. Every other problem
        (corrupt, unreadable, read-only) is one warning, and the store carries on in memory;
        ``persistent`` then says False and ``problem`` says why.
    """

    def __init__(self, path: str | os.PathLike | None = None, *, alpha: float = DEFAULT_ALPHA):
        if not (isinstance(alpha, (int, float)) and 0 < alpha <= 1):
            raise ValueError(f"alpha must be a number in (0, 1], got {alpha!r}")
        self.alpha = float(alpha)
        if path is None:
            self.path: Path | None = default_path()
        elif str(path) == ":memory:":
            self.path = None
        else:
            self.path = Path(path).expanduser()
        if self.path is not None and self.path.is_dir():
            raise ValueError(
                f"profile store path {str(self.path)!r} is a directory; give a file path such as "
                f"{str(self.path / 'profiles.sqlite')!r}, or profiles=False to run without a store"
            )
        self.problem: str | None = None
        self._lock = threading.Lock()
        self._identity: tuple[int, int] | None = None  # (device, inode) of the file while it is in use
        self._connection = self._open()

    @property
    def persistent(self) -> bool:
        """True while measurements are being saved to the file."""
        return self.path is not None and self.problem is None

    # -- opening and failing over ---------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        if self.path is None:
            return self._memory()
        try:
            return self._open_file()
        except (sqlite3.Error, OSError) as error:
            return self._fail_over(error)

    def _open_file(self) -> sqlite3.Connection:
        connection = connect_file(self.path)
        try:
            self._prepare(connection)
            status = os.stat(self.path)
        except BaseException:
            connection.close()
            raise
        self._identity = (status.st_dev, status.st_ino)
        return connection

    def _still_there(self) -> None:
        """A store file deleted or replaced while in use takes writes that reach no file: write
        it again, with every profile this connection still reads, and warn once (lock held)."""
        if not self.persistent or self._identity is None:
            return
        try:
            status = os.stat(self.path)
            if (status.st_dev, status.st_ino) == self._identity:
                return
            cause = "was replaced"
        except FileNotFoundError:
            cause = "was deleted"
        old = self._connection
        try:
            self._connection = self._open_file()
            kept = self._salvage(old, self._connection)
        except (sqlite3.Error, OSError) as error:
            self._connection = self._fail_over(error)
            kept = 0
        old.close()
        logger.warning("profile store %s %s while in use; wrote it again with the %d profiles this run held, so "
                       "later measurements are kept", self.path, cause, kept)

    def _prepare(self, connection: sqlite3.Connection) -> None:
        if schema_present(connection, _META + ";" + _SCHEMA, {"schema": SCHEMA_VERSION}):
            connection.execute("SELECT count(*) FROM profiles").fetchone()  # a file that is no database fails here
            return  # nothing to create: no write lock taken, so a refit holding one does not hold up the start
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(_META)
        row = connection.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
        if row is not None and row[0] not in ("1", SCHEMA_VERSION):
            connection.execute("ROLLBACK")
            raise sqlite3.DatabaseError(f"schema version {row[0]!r}, this version of scalpel-executor reads {SCHEMA_VERSION!r}")
        if row is not None and row[0] == "1":
            for statement in filter(str.strip, _UPGRADE_FROM_1.split(";")):
                connection.execute(statement)
            self._rekey(connection)
            connection.execute("UPDATE meta SET value = ? WHERE name = 'schema'", (SCHEMA_VERSION,))
        else:
            for statement in filter(str.strip, _SCHEMA.split(";")):
                connection.execute(statement)
            connection.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
        connection.execute("SELECT count(*) FROM profiles").fetchone()
        connection.execute("COMMIT")

    def _rekey(self, connection: sqlite3.Connection) -> None:
        """Rewrite schema-1 keys by today's rule (:mod:`~scalpel_executor.learning.migrate`), inside the caller's transaction."""
        rows = connection.execute(f"SELECT {_COLUMNS} FROM profiles").fetchall()
        merged, variants, changed = rekey_rows(rows)
        if not changed:
            return
        connection.execute("DELETE FROM profiles")
        connection.executemany(f"INSERT INTO profiles ({_COLUMNS}) VALUES ({_ROW})", merged)
        connection.executemany(f"INSERT OR REPLACE INTO variants ({_COLUMNS}, shape) VALUES ({_ROW}, ?)",
                               [(*row, shape) for shape, row in variants])
        for shape in sorted({shape for shape, _ in variants}):
            self._split_if_different(connection, shape)
        logger.info("profile store %s: %d profiles from before the key rule changed became %d (see docs/profiles.md, "
                    "\"Migration\")", self.path or ":memory:", len(rows), len(merged))

    def _memory(self) -> sqlite3.Connection:
        connection = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self._prepare(connection)
        return connection

    def _fail_over(self, error: BaseException) -> sqlite3.Connection:
        """Carry on in memory with whatever can still be read from the file; warn once."""
        self.problem = f"{type(error).__name__}: {error}"
        memory = self._memory()
        salvaged = 0
        try:
            source = sqlite3.connect(f"file:{self.path}?mode=ro&immutable=1", uri=True)
            try:
                salvaged = self._salvage(source, memory)
            finally:
                source.close()
        except (sqlite3.Error, OSError):
            pass
        logger.warning(
            "profile store %s cannot be used (%s); running without persistence: %s, new measurements "
            "last until the executor stops", self.path, self.problem,
            f"{salvaged} stored profiles were read" if salvaged else "no stored profiles could be read",
        )
        return memory

    def _salvage(self, source: sqlite3.Connection, memory: sqlite3.Connection) -> int:
        """Copy what ``source`` holds into the in-memory store; a schema-1 file's keys are rewritten on the way."""
        columns = {row[1] for row in source.execute("PRAGMA table_info(profiles)")}
        current = "split" in columns
        rows = source.execute(f"SELECT {_ALL if current else _COLUMNS} FROM profiles").fetchall()
        memory.execute("BEGIN")
        memory.executemany(f"INSERT OR REPLACE INTO profiles ({_ALL if current else _COLUMNS}) "
                           f"VALUES ({_ROW}{',?,?' if current else ''})", rows)
        if current:
            memory.executemany(f"INSERT OR REPLACE INTO variants ({_COLUMNS}, shape) VALUES ({_ROW}, ?)",
                               source.execute(f"SELECT {_COLUMNS}, shape FROM variants").fetchall())
        else:
            self._rekey(memory)
        memory.execute("COMMIT")
        return len(rows)

    def _write(self, work) -> None:
        """Run ``work(connection)`` in an IMMEDIATE transaction; on a file fault, fail over and redo it."""
        with self._lock:
            self._still_there()
            for attempt in (1, 2):
                try:
                    self._connection.execute("BEGIN IMMEDIATE")
                    try:
                        work(self._connection)
                    except BaseException:
                        self._connection.execute("ROLLBACK")
                        raise
                    self._connection.execute("COMMIT")
                    return
                except (sqlite3.Error, OSError) as error:
                    if attempt == 2 or not self.persistent:
                        raise
                    self._connection.close()
                    self._connection = self._fail_over(error)

    def _read(self, query: str, parameters: tuple = ()) -> list[tuple]:
        with self._lock:
            try:
                return self._connection.execute(query, parameters).fetchall()
            except (sqlite3.Error, OSError) as error:
                if not self.persistent:
                    raise
                self._connection.close()
                self._connection = self._fail_over(error)
                return self._connection.execute(query, parameters).fetchall()

    # -- the API --------------------------------------------------------------------------------

    def get(self, key: str) -> Profile | None:
        """The statistics of ``key``, or None if it was never seen."""
        rows = self._read(f"SELECT {_ALL} FROM profiles WHERE key = ?", (key,))
        return _profile(rows[0]) if rows else None

    def profiles(self, prefix: str = "") -> list[Profile]:
        """Every profile whose key starts with ``prefix``, sorted by key."""
        rows = self._read(f"SELECT {_ALL} FROM profiles WHERE key {_STARTS_WITH} ORDER BY key", (_starting(prefix),))
        return [_profile(row) for row in rows]

    def adoptable(self, key: str) -> Profile | None:
        """The history a key with size-free arguments (``f(~512,*)``) adopts from the keys its app's
        calls had before it declared them (``f(~512,~108)``, ``f(~512,~128)``): their rows merged,
        read without a lock; None when there are none or ``key`` has no size-free argument. The
        first :meth:`record` of ``key`` writes it as ``key``'s row (docs/profiles.md)."""
        rows = self._adoptable(key, self._read)
        return _profile(merge_rows(key, rows)) if rows else None

    @staticmethod
    def _adoptable(key: str, read) -> list[tuple]:
        prefix = size_free_prefix(key)
        if prefix is None:
            return []
        rows = read(f"SELECT {_COLUMNS} FROM profiles WHERE key {_STARTS_WITH} AND refines IS NULL",
                    (_starting(prefix),))
        return [row for row in rows if size_free_match(key, row[0])]

    def _adopt(self, connection: sqlite3.Connection, key: str) -> None:
        """Inside ``record``'s transaction: give ``key``, new, the history of the keys it stands for
        (:meth:`adoptable`), which then refine it, so the app's pooled profile counts their runs once."""
        if connection.execute("SELECT 1 FROM profiles WHERE key = ?", (key,)).fetchone() is not None:
            return
        rows = self._adoptable(key, lambda query, parameters: connection.execute(query, parameters).fetchall())
        if not rows:
            return
        connection.execute(f"INSERT INTO profiles ({_COLUMNS}) VALUES ({_ROW})", merge_rows(key, rows))
        connection.executemany("UPDATE profiles SET refines = ? WHERE key = ?", [(key, row[0]) for row in rows])
        logger.info("profile %s: its size-free arguments join the history of %d keys that split on them: %s",
                    key, len(rows), ", ".join(sorted(row[0] for row in rows)[:4]) + (", …" if len(rows) > 4 else ""))

    def speedup(self, key: str) -> Speedup | None:
        """The speed-up ``key``'s malleable runs read, or None when none ran at a width."""
        found = self.speedups(key, exact=True)
        return found[0] if found else None

    def speedups(self, prefix: str = "", *, exact: bool = False) -> list[Speedup]:
        """The speed-ups of every key starting with ``prefix`` (``exact``: of ``prefix`` alone), by key."""
        where = "key = ?" if exact else f"key {_STARTS_WITH}"
        rows = self._read(f"SELECT key, readings, serial_sum, updated FROM speedups WHERE {where} AND readings > 0 "
                          "ORDER BY key", (prefix if exact else _starting(prefix),))
        return [Speedup(key, min(1.0, max(0.0, total / readings)), readings, updated)
                for key, readings, total, updated in rows]

    def family_speedup(self, family: str) -> Speedup | None:
        """The speed-up every key of ``family`` read (keys ``family(...)``: an app's calls, each value
        its key): their readings' mean and count, keyed ``family``; None when none ran at a width.
        What a key of it with no reading of its own starts from (core.widths.SpeedupModel.join)."""
        found = self.speedups(family + "(")
        readings = sum(item.readings for item in found)
        if not readings:
            return None
        return Speedup(family, sum(item.serial_fraction * item.readings for item in found) / readings, readings,
                       max(item.updated for item in found))

    def app_profile(self, app: str) -> Profile | None:
        """Every key of ``app`` pooled into one profile (keys split from a shape key count in that key
        only), or None when none has a run. Its ``runtime`` and ``footprint`` are plain means over
        every run, and its standard deviations include the differences between keys."""
        rows = self._read(f"SELECT {_COLUMNS} FROM profiles WHERE app = ? AND refines IS NULL", (app,))
        if not rows:
            return None
        merged = _profile(merge_rows(app, rows))
        if not (merged.runs or merged.footprint_runs):
            return None
        return replace(merged, runtime=merged.runtime_mean, footprint=merged.footprint_mean,
                                   origin="pooled")

    def record(self, observations: Iterable[Observation]) -> int:
        """Fold observations into their keys' statistics, in one transaction. Returns how many.

        Each is folded into ``key``; into ``shape`` too when ``key`` refines it; and, when ``exact``
        differs from ``key``, into that exact key's variant (its key, once the shape key is split).
        A key's row is read once and written once per batch, its observations folded in between in
        their order (as many SQL statements per key as per observation cost the driver 20-44 us a task).
        """
        batch = list(observations)
        if not batch:
            return 0

        def work(connection: sqlite3.Connection) -> None:
            now = time.time()
            shapes = set()
            for key in dict.fromkeys(item.key for item in batch):
                self._adopt(connection, key)
            rows: dict[tuple[str, str], list] = {}  # (table, key) -> its row's values and parent, folded so far
            split: dict[str, bool] = {}  # shape keys split before this batch (a split happens after its folds)
            for item in batch:
                refines = item.shape if item.shape not in (None, item.key) else None
                self._fold(connection, rows, "profiles", item.key, item, now, refines)
                if refines is not None:
                    self._fold(connection, rows, "profiles", refines, item, now)
                if item.exact in (None, item.key):
                    continue
                if item.key not in split:
                    row = connection.execute("SELECT split FROM profiles WHERE key = ?", (item.key,)).fetchone()
                    split[item.key] = bool(row and row[0])
                if split[item.key]:  # split since this task's estimate: its exact key is a key now
                    self._fold(connection, rows, "profiles", item.exact, item, now, item.key)
                else:
                    self._fold(connection, rows, "variants", item.exact, item, now, item.key)
                    shapes.add(item.key)
            statistics = ", ".join(f"{column} = excluded.{column}" for column in _COLUMNS.split(", ")[2:])
            connection.executemany(f"INSERT OR REPLACE INTO variants ({_COLUMNS}, shape) VALUES ({_ROW}, ?)",
                                   [values for (table, _), values in rows.items() if table == "variants"])
            connection.executemany(  # an upsert: a key's split mark stays
                f"INSERT INTO profiles ({_COLUMNS}, refines) VALUES ({_ROW}, ?) ON CONFLICT (key) DO UPDATE SET "
                f"{statistics}, refines = coalesce(excluded.refines, refines)",
                [values for (table, _), values in rows.items() if table == "profiles"])
            for shape in sorted(shapes):
                self._split_if_different(connection, shape)
            connection.executemany(
                "INSERT INTO speedups VALUES (?, 1, ?, ?) ON CONFLICT (key) DO UPDATE SET readings = readings + 1, "
                "serial_sum = serial_sum + excluded.serial_sum, updated = excluded.updated",
                [(item.key, serial, now) for item in batch
                 if (serial := finite(item.serial)) is not None and 0 <= serial <= 1])

        self._write(work)
        return len(batch)

    def _fold(self, connection: sqlite3.Connection, rows: dict[tuple[str, str], list], table: str, key: str,
              item: Observation, now: float, parent: str | None = None) -> None:
        """One observation into one row of ``profiles`` (``parent``: the shape key it refines) or of
        ``variants`` (``parent``: its shape key), as ``rows`` holds it (read from ``table`` the first time)."""
        values = rows.get((table, key))
        if values is None:
            row = connection.execute(f"SELECT {_COLUMNS} FROM {table} WHERE key = ?", (key,)).fetchone()
            values = rows[(table, key)] = [*(row or (key, item.app, 0, None, None, None, 0, None, None, None,
                                                     None, None, "measured", now)), None]
        (_, _, runs, rt_mean, rt_m2, rt_ewma, fp_runs, fp_mean, fp_m2, fp_ewma, rss, miss, _, _, _) = values
        runtime, footprint = finite(item.runtime), finite(item.footprint)
        if runtime is not None:
            values[2:6] = _welford(runs, rt_mean, rt_m2, rt_ewma, runtime, self.alpha)
        if footprint is not None:
            values[6:10] = _welford(fp_runs, fp_mean, fp_m2, fp_ewma, footprint, self.alpha)
        peak = finite(item.peak_rss)
        values[10] = peak if rss is None else max(rss, peak or 0.0)
        rate = finite(item.llc_miss_rate)
        values[11] = rate if rate is not None and miss is None else (
            miss if rate is None else self.alpha * rate + (1 - self.alpha) * miss)
        values[13] = now
        if parent is not None:  # as the upsert's coalesce: the latest given parent, else the row's own
            values[14] = parent

    def _split_if_different(self, connection: sqlite3.Connection, shape: str) -> None:
        """Split ``shape`` when its variants differ (:func:`~scalpel_executor.learning.refine.should_split`)."""
        rows = connection.execute(
            "SELECT runs, runtime_mean, runtime_m2, footprint_runs, footprint_mean, footprint_m2 FROM variants "
            "WHERE shape = ?", (shape,)).fetchall()
        if not should_split((Moments.of(*row[:3]), Moments.of(*row[3:])) for row in rows):
            return
        connection.execute(f"INSERT OR IGNORE INTO profiles ({_COLUMNS}, refines) SELECT {_COLUMNS}, shape "
                           "FROM variants WHERE shape = ?", (shape,))
        connection.execute("DELETE FROM variants WHERE shape = ?", (shape,))
        connection.execute("UPDATE profiles SET split = 1 WHERE key = ?", (shape,))
        logger.info("profile %s: its small integers change its run time or footprint, so its %d variants are "
                    "keys of their own from now on", shape, len(rows))

    def set_app(self, key: str, app: str) -> None:
        """Count ``key``'s profile as one of ``app``'s (its pooled profile, :meth:`app_profile`):
        ``scalpel profile run --key`` measures a function under a workflow's key, whose app is the
        workflow's (``__main__.relax`` for a script), not the function's module's."""
        self._write(lambda connection: connection.execute("UPDATE profiles SET app = ? WHERE key = ?", (app, key)))

    def delete(self, prefix: str = "", *, exact: bool = False) -> int:
        """Remove the profile ``prefix`` (``exact=True``) or every profile starting with it. Returns how many."""
        removed = 0

        def work(connection: sqlite3.Connection) -> None:
            nonlocal removed
            if exact:
                removed = connection.execute("DELETE FROM profiles WHERE key = ?", (prefix,)).rowcount
            else:
                removed = connection.execute(f"DELETE FROM profiles WHERE key {_STARTS_WITH}", (_starting(prefix),)).rowcount
            connection.execute("DELETE FROM speedups WHERE key NOT IN (SELECT key FROM profiles)")
            connection.execute("DELETE FROM variants WHERE shape NOT IN (SELECT key FROM profiles)")

        self._write(work)
        return removed

    def delete_speedups(self, prefix: str = "", *, exact: bool = False) -> int:
        """Remove the speed-up readings of the key ``prefix`` (``exact=True``) or of every key starting
        with it, keeping their profiles (a run at several widths on a loaded host read too little
        gain: its next run explores again). Returns how many keys had readings."""
        removed = 0

        def work(connection: sqlite3.Connection) -> None:
            nonlocal removed
            where = "key = ?" if exact else f"key {_STARTS_WITH}"
            removed = connection.execute(f"DELETE FROM speedups WHERE {where}",
                                         (prefix if exact else _starting(prefix),)).rowcount

        self._write(work)
        return removed

    def export(self, prefix: str = "", name: str = "profile-store") -> dict:
        """The profiles as a ``scalpel-profile/1`` document (JSON-ready; see ``docs/profiles.md``)."""
        return store_document(self.profiles(prefix), name, f"profiles exported from {self.path or 'memory'}")

    def import_document(self, document: dict, *, prefix: str = "", origin: str | None = None) -> int:
        """Load a ``scalpel-profile/1`` document; each task's ``name`` (with ``prefix``) is its key.

        An imported key replaces what the store held for it. Raises ValueError naming the bad entry.
        """
        rows = document_rows(document, prefix, origin)
        self._write(lambda connection: connection.executemany(
            f"INSERT OR REPLACE INTO profiles ({_ALL}) VALUES ({_ROW}, ?, ?)", rows))
        return len(rows)

    def close(self) -> None:
        with self._lock:
            self._connection.close()

    def __enter__(self) -> ProfileStore:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "persistent" if self.persistent else f"in memory ({self.problem})" if self.problem else "in memory"
        return f"ProfileStore({str(self.path) if self.path else ':memory:'!r}, {state})"
