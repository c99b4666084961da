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
import numbers
import os
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from scalpel_executor.core.units import parse_size, show
from scalpel_executor.learning.exchange import FORMAT  # one format for files and the store's export

logger = logging.getLogger(__name__)

SCHEMA_VERSION = "1"
DEFAULT_ALPHA = 0.3
BUSY_TIMEOUT_MS = 30_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS profiles (
    key TEXT PRIMARY KEY,
    app TEXT NOT NULL,
    runs INTEGER NOT NULL DEFAULT 0,
    runtime_mean REAL, runtime_m2 REAL, runtime_ewma REAL,
    footprint_runs INTEGER NOT NULL DEFAULT 0,
    footprint_mean REAL, footprint_m2 REAL, footprint_ewma REAL,
    peak_rss REAL,
    llc_miss_rate REAL,
    origin TEXT NOT NULL,
    updated REAL NOT NULL
);
"""
_COLUMNS = (
    "key, app, runs, runtime_mean, runtime_m2, runtime_ewma, footprint_runs, footprint_mean, footprint_m2, "
    "footprint_ewma, peak_rss, llc_miss_rate, origin, updated"
)


def default_path() -> Path:
    """Where the store lives unless told otherwise (see the module docstring)."""
    explicit = os.environ.get("SCALPEL_PROFILE_STORE")
    if explicit:
        return Path(explicit).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(data_home) / "scalpel-executor" / "profiles.sqlite"


@dataclass(frozen=True)
class Observation:
    """One finished task's measurements. ``None`` means "not measured"."""

    key: str
    app: str
    runtime: float | None = None  # wall seconds
    footprint: float | None = None  # bytes
    peak_rss: float | None = None  # bytes
    llc_miss_rate: float | None = None  # misses / references, where counters exist


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
    origin: str  # "measured", or "imported:<name>"
    updated: float  # Unix time

    def to_dict(self) -> dict:
        return asdict(self)


def _std(runs: int, m2: float | None) -> float | None:
    return math.sqrt(m2 / (runs - 1)) if runs > 1 and m2 is not None else None


def _profile(row: tuple) -> Profile:
    key, app, runs, rt_mean, rt_m2, rt_ewma, fp_runs, fp_mean, fp_m2, fp_ewma, rss, miss, origin, updated = row
    return Profile(key, app, runs, rt_mean, _std(runs, rt_m2), rt_ewma, fp_runs, fp_mean, _std(fp_runs, fp_m2),
                   fp_ewma, rss, miss, origin, updated)


def _welford(count: int, mean: float | None, m2: float | None, ewma: float | None, value: float, alpha: float):
    """One more value into (count, mean, M2, weighted mean) — Welford's update, O(1)."""
    if count == 0 or mean is None:
        return 1, value, 0.0, value
    count += 1
    delta = value - mean
    mean += delta / count
    m2 = (m2 or 0.0) + delta * (value - mean)
    ewma = value if ewma is None else alpha * value + (1 - alpha) * ewma
    return count, mean, m2, ewma


def _show(value: object) -> str:
    return show(value, 120)


def _number_field(entry: dict, name: str, *, required: bool = False) -> float | None:
    """A numeric field of an imported task: a number (not bool) or absent; negative or non-finite
    numbers count as absent. TypeError naming the field for anything else."""
    value = entry[name] if required else entry.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {value!r} of type {type(value).__name__}")
    try:
        return _finite(value)
    except OverflowError:
        return None


def _count_field(entry: dict, name: str, default: int) -> int:
    value = entry.get(name, default)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{name} must be a whole number >= 0, got {value!r}")
    return int(value)


def _finite(value: float | None, minimum: float = 0.0) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    value = float(value)
    return value if math.isfinite(value) and value >= minimum else None


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
        if not self.path.parent.exists():
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not self.path.exists():
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))  # sqlite3 would use the umask
        connection = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                                     check_same_thread=False)
        try:
            connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            if connection.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() != "wal":
                raise sqlite3.OperationalError("the file system does not support WAL mode")
            connection.execute("PRAGMA synchronous = NORMAL")
            self._prepare(connection)
        except BaseException:
            connection.close()
            raise
        return connection

    def _prepare(self, connection: sqlite3.Connection) -> None:
        connection.execute("BEGIN IMMEDIATE")
        for statement in filter(str.strip, _SCHEMA.split(";")):
            connection.execute(statement)
        row = connection.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
        if row is None:
            connection.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
        elif row[0] != SCHEMA_VERSION:
            connection.execute("ROLLBACK")
            raise sqlite3.DatabaseError(f"schema version {row[0]!r}, this version of scalpel-executor reads {SCHEMA_VERSION!r}")
        connection.execute("SELECT count(*) FROM profiles").fetchone()
        connection.execute("COMMIT")

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
                rows = source.execute(f"SELECT {_COLUMNS} FROM profiles").fetchall()
                memory.executemany(f"INSERT OR REPLACE INTO profiles ({_COLUMNS}) VALUES ({','.join('?' * 14)})", rows)
                salvaged = len(rows)
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

    def _write(self, work) -> None:
        """Run ``work(connection)`` in an IMMEDIATE transaction; on a file fault, fail over and redo it."""
        with self._lock:
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
        rows = self._read(f"SELECT {_COLUMNS} FROM profiles WHERE key = ?", (key,))
        return _profile(rows[0]) if rows else None

    def profiles(self, prefix: str = "") -> list[Profile]:
        """Every profile whose key starts with ``prefix``, sorted by key."""
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = self._read(f"SELECT {_COLUMNS} FROM profiles WHERE key LIKE ? ESCAPE '\\' ORDER BY key", (escaped + "%",))
        return [_profile(row) for row in rows]

    def record(self, observations: Iterable[Observation]) -> int:
        """Fold observations into their keys' statistics, in one transaction. Returns how many."""
        batch = list(observations)
        if not batch:
            return 0

        def work(connection: sqlite3.Connection) -> None:
            now = time.time()
            for item in batch:
                row = connection.execute(f"SELECT {_COLUMNS} FROM profiles WHERE key = ?", (item.key,)).fetchone()
                (_, _, runs, rt_mean, rt_m2, rt_ewma, fp_runs, fp_mean, fp_m2, fp_ewma, rss, miss, origin, _) = (
                    row or (item.key, item.app, 0, None, None, None, 0, None, None, None, None, None, "measured", now)
                )
                runtime, footprint = _finite(item.runtime), _finite(item.footprint)
                if runtime is not None:
                    runs, rt_mean, rt_m2, rt_ewma = _welford(runs, rt_mean, rt_m2, rt_ewma, runtime, self.alpha)
                if footprint is not None:
                    fp_runs, fp_mean, fp_m2, fp_ewma = _welford(fp_runs, fp_mean, fp_m2, fp_ewma, footprint, self.alpha)
                peak = _finite(item.peak_rss)
                rss = peak if rss is None else max(rss, peak or 0.0)
                rate = _finite(item.llc_miss_rate)
                miss = rate if rate is not None and miss is None else (
                    miss if rate is None else self.alpha * rate + (1 - self.alpha) * miss)
                connection.execute(
                    f"INSERT OR REPLACE INTO profiles ({_COLUMNS}) VALUES ({','.join('?' * 14)})",
                    (item.key, item.app, runs, rt_mean, rt_m2, rt_ewma, fp_runs, fp_mean, fp_m2, fp_ewma, rss, miss,
                     origin, now),
                )

        self._write(work)
        return len(batch)

    def delete(self, prefix: str = "", *, exact: bool = False) -> int:
        """Remove the profile ``prefix`` (``exact=True``) or every profile starting with it. Returns how many."""
        removed = 0

        def work(connection: sqlite3.Connection) -> None:
            nonlocal removed
            if exact:
                removed = connection.execute("DELETE FROM profiles WHERE key = ?", (prefix,)).rowcount
            else:
                escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
                removed = connection.execute("DELETE FROM profiles WHERE key LIKE ? ESCAPE '\\'", (escaped + "%",)).rowcount

        self._write(work)
        return removed

    def export(self, prefix: str = "", name: str = "profile-store") -> dict:
        """The profiles as a ``scalpel-profile/1`` document (JSON-ready; see ``docs/profiles.md``)."""
        tasks = []
        for profile in self.profiles(prefix):
            entry = {"name": profile.key, "app": profile.app, "runs": profile.runs}
            for field in ("runtime", "runtime_mean", "runtime_std", "footprint", "footprint_mean", "footprint_std",
                          "peak_rss", "llc_miss_rate"):
                value = getattr(profile, field)
                if value is not None:
                    entry[field] = value
            entry["footprint_runs"] = profile.footprint_runs
            if "runtime" not in entry:
                entry["runtime"] = 0.0
            tasks.append(entry)
        return {
            "format": FORMAT,
            "name": name,
            "description": f"profiles exported from {self.path or 'memory'}",
            "exported": time.time(),
            "tasks": tasks,
        }

    def import_document(self, document: dict, *, prefix: str = "", origin: str | None = None) -> int:
        """Load a ``scalpel-profile/1`` document; each task's ``name`` (with ``prefix``) is its key.

        An imported key replaces what the store held for it. Raises ValueError naming the bad entry.
        """
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise ValueError(f"a profile document must be a JSON object with \"format\": \"{FORMAT}\"")
        entries = document.get("tasks")
        if not isinstance(entries, list):
            raise ValueError("a profile document needs a list \"tasks\"")
        rows = []
        origin = origin or f"imported:{document.get('name', 'unnamed')}"
        now = time.time()
        for position, entry in enumerate(entries):
            try:
                if not isinstance(entry, dict):
                    raise TypeError("a task must be a JSON object such as {\"name\": \"adi\", \"runtime\": 41.5}")
                key = prefix + str(entry["name"])
                runtime = _number_field(entry, "runtime", required=True)
                footprint = entry.get("footprint")
                if isinstance(footprint, str):
                    footprint = float(parse_size(footprint, what="footprint"))
                footprint = _number_field({"footprint": footprint}, "footprint")
                runs = _count_field(entry, "runs", 1)
                fp_runs = _count_field(entry, "footprint_runs", runs if footprint is not None else 0)
                if runtime is None:
                    raise ValueError(f"runtime must be a finite number of seconds >= 0, got {entry['runtime']!r}")

                def m2(std_key: str, count: int, entry: dict = entry) -> float:
                    std = _number_field(entry, std_key)
                    return std * std * (count - 1) if std is not None and count > 1 else 0.0

                rows.append((
                    key, str(entry.get("app", key)), runs,
                    _number_field(entry, "runtime_mean") or runtime, m2("runtime_std", runs), runtime,
                    fp_runs, None if footprint is None else (_number_field(entry, "footprint_mean") or footprint),
                    None if footprint is None else m2("footprint_std", fp_runs), footprint,
                    _number_field(entry, "peak_rss"), _number_field(entry, "llc_miss_rate"), origin, now,
                ))
            except KeyError as error:
                raise ValueError(f"task #{position} ({_show(entry)}) is malformed: it needs a field {error}") from None
            except (TypeError, ValueError) as error:
                raise ValueError(f"task #{position} ({_show(entry)}) is malformed: {error}") from None

        self._write(lambda connection: connection.executemany(
            f"INSERT OR REPLACE INTO profiles ({_COLUMNS}) VALUES ({','.join('?' * 14)})", rows))
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
