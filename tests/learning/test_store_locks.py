"""A run's start never queues behind the store's learning: opening the profile store and its side
tables, and reading them, take no write lock when their schema is current, so a detached refit
stopped inside its write transaction (as a starved one is) holds up neither; a store whose schema
must still be created or upgraded does wait for the writer, as before.

Each check shortens SQLite's busy timeout to a fraction of a second: a store that took the write
lock would give up within it and carry on in memory (``persistent`` False), so the checks read
that, not a clock."""

import sqlite3
import threading

import parsl
import pytest
from parsl import python_app
from parsl.config import Config

from scalpel_executor import ScalpelExecutor
from scalpel_executor.learning import store as store_module
from scalpel_executor.learning.critical_path import CriticalPathStore
from scalpel_executor.learning.host_model import HostModelStore
from scalpel_executor.learning.store import Observation, ProfileStore


@pytest.fixture
def short_busy_timeout(monkeypatch):
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_MS", 200)


def _hold_write_lock(path):
    """A writer in the middle of its transaction, as a refit the scheduler starved: its connection."""
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT OR REPLACE INTO meta VALUES ('refit-in-progress', '1')")
    return writer


def _made(path):
    with ProfileStore(path) as store:
        store.record([Observation("app(~64)", "app", runtime=1.5, footprint=2**20)])
    HostModelStore(path).close()
    CriticalPathStore(path).close()


def test_the_store_and_its_tables_open_and_read_while_a_refit_holds_the_write_lock(tmp_path, short_busy_timeout):
    path = tmp_path / "profiles.sqlite"
    _made(path)
    writer = _hold_write_lock(path)
    try:
        store, models, tails = ProfileStore(path), HostModelStore(path), CriticalPathStore(path)
        assert store.persistent and store.get("app(~64)").runtime == pytest.approx(1.5)
        assert models.problem is None and models.fitted("host") is None and models.history("host") == ([], {})
        assert not models.stale("host") and models.interference("host") is None
        assert tails.problem is None and tails.get(["app(~64)"]) == {}
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_a_store_whose_schema_must_be_created_still_waits_for_the_writer(tmp_path, short_busy_timeout):
    path = tmp_path / "profiles.sqlite"
    with ProfileStore(path):
        pass
    writer = _hold_write_lock(path)
    try:
        models = HostModelStore(path)  # its tables do not exist yet: it needs the lock, and gives up in memory
        assert models.problem is not None and "locked" in models.problem
    finally:
        writer.execute("ROLLBACK")
        writer.close()


@python_app
def double(x):
    return 2 * x


def test_parsl_load_keeps_the_store_while_a_refit_holds_its_write_lock(tmp_path, short_busy_timeout):
    path = tmp_path / "profiles.sqlite"
    executor = ScalpelExecutor(label="locked", profiles=str(path))
    with parsl.load(Config(executors=[executor], run_dir=str(tmp_path / "runinfo"))):  # a first run makes every table
        assert double(2).result(timeout=60) == 4
    writer = _hold_write_lock(path)
    released = threading.Event()
    try:
        executor = ScalpelExecutor(label="locked", profiles=str(path))
        with parsl.load(Config(executors=[executor], run_dir=str(tmp_path / "runinfo"))):
            assert executor._estimator.store.persistent  # its start neither waited it out nor fell back to memory
            assert double(3).result(timeout=60) == 6
            writer.execute("ROLLBACK")  # the refit ends; the run's own writes at shutdown then go through
            released.set()
    finally:
        if not released.is_set():
            writer.execute("ROLLBACK")
        writer.close()
