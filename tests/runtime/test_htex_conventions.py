"""What a user switching from HTEX expects of ``parsl_resource_specification``, through real Parsl.

``priority`` runs lower first, in the order HighThroughputExecutor runs the same tasks; a key HTEX
would refuse is refused; keys of Parsl's other executors warn in ``parsl.log``. Workers see
``PARSL_WORKER_RANK`` and ``PARSL_WORKER_COUNT`` as HTEX's workers do.
"""

import os
import shlex
import time
from pathlib import Path

import parsl
import pytest
from parsl import python_app
from parsl.config import Config
from parsl.dataflow.states import States
from parsl.executors import HighThroughputExecutor
from parsl.executors.errors import InvalidResourceSpecification
from parsl.providers import LocalProvider

from scalpel_executor import ScalpelExecutor
from scalpel_executor.learning import hints as hints_module

PRIORITIES = [3, 5, 1, 4, 2]  # the submission order: neither it nor its reverse is the priority order
# HTEX's workers unpickle this module's apps by reference, as ours do; ours inherit the driver's
# sys.path, HTEX's need the folder that holds tests/ on theirs.
PROJECT_ROOT = str(Path(__file__).resolve().parents[2])


@python_app
def blocker(started, release, parsl_resource_specification=None):
    import os
    import time

    open(started, "w").close()
    while not os.path.exists(release):
        time.sleep(0.01)


@python_app
def stamp(priority, parsl_resource_specification=None):
    import time

    return priority, time.monotonic()  # CLOCK_MONOTONIC: one clock for every process of the host


def _wait_for(condition, what, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.01)


def _one_worker_scalpel():
    return ScalpelExecutor(label="scalpel", topology=[[min(os.sched_getaffinity(0))]], profiles=False)


def _order_behind_a_blocker(executor, tmp_path):
    """The priorities of PRIORITIES' tasks in the order they ran on the executor's one worker,
    queued while a blocker held it."""
    started, release = tmp_path / "started", tmp_path / "release"
    config = Config(executors=[executor], run_dir=str(tmp_path / "runinfo"), strategy="none")
    with parsl.load(config):
        block = blocker(str(started), str(release))
        _wait_for(lambda: started.exists() or block.done(), "the blocker's start")
        assert not block.done(), block.exception()
        futures = [stamp(p, parsl_resource_specification={"priority": p}) for p in PRIORITIES]
        _wait_for(lambda: all(f.task_record["status"] == States.launched for f in futures), "the tasks' launch")
        # launched: handed to the executor; the hop to where it queues them (HTEX's interchange, our
        # node manager) is a socket write away, and a task still on its way would join late
        time.sleep(1.0)
        release.touch()
        block.result(timeout=60)
        ran = [f.result(timeout=60) for f in futures]
    return [priority for priority, _ in sorted(ran, key=lambda result: result[1])]


def test_priorities_run_in_htex_order_lower_first(tmp_path):
    htex = HighThroughputExecutor(label="htex", max_workers_per_node=1,
                                  provider=LocalProvider(init_blocks=1, min_blocks=1, max_blocks=1,
                                                         worker_init=f"export PYTHONPATH={shlex.quote(PROJECT_ROOT)}"))
    htex_order = _order_behind_a_blocker(htex, tmp_path / "htex")
    scalpel = _one_worker_scalpel()
    scalpel_order = _order_behind_a_blocker(scalpel, tmp_path / "scalpel")
    assert htex_order == [1, 2, 3, 4, 5]
    assert scalpel_order == htex_order
    rows = scalpel.run_report()["tasks"]
    assert [row["priority"] for row in rows] == [None, *PRIORITIES]  # the user's values, not the scheduler's


@pytest.fixture
def scalpel_dfk(tmp_path, monkeypatch):
    monkeypatch.setattr(hints_module, "_warned", set())  # once per process: this test must see the first
    with parsl.load(Config(executors=[_one_worker_scalpel()], run_dir=str(tmp_path / "runinfo"))) as dfk:
        yield dfk


def test_a_misspelt_key_is_refused_naming_the_nearest_key(scalpel_dfk):
    with pytest.raises(InvalidResourceSpecification, match=r"'priorty' \(did you mean 'priority'\?\)"):
        stamp(1, parsl_resource_specification={"priorty": 1}).result(timeout=60)


def test_keys_of_other_executors_run_and_warn_once_in_parsl_log(scalpel_dfk):
    specification = {"disk": 100, "category": "x", "priority": 1}
    assert [stamp(i, parsl_resource_specification=specification).result(timeout=60)[0] for i in range(3)] == [0, 1, 2]
    log = open(os.path.join(scalpel_dfk.run_dir, "parsl.log")).read()
    for key in ("disk", "category"):
        assert log.count(f"resource specification key '{key}' (of Parsl's TaskVine and Work Queue executors) "
                         f"is not used by ScalpelExecutor") == 1, log[-3000:]


@python_app
def rank_and_count(meeting, parsl_resource_specification=None):
    """This worker's PARSL_WORKER_RANK and PARSL_WORKER_COUNT, once every worker of the node has
    arrived at ``meeting`` (a folder), so each worker runs one of the tasks."""
    import os
    import time

    rank, count = os.environ.get("PARSL_WORKER_RANK"), os.environ.get("PARSL_WORKER_COUNT")
    open(os.path.join(meeting, f"{rank}-{os.getpid()}"), "w").close()
    deadline = time.monotonic() + 60
    while len(os.listdir(meeting)) < int(count or 0) and time.monotonic() < deadline:
        time.sleep(0.01)
    return rank, count


def test_workers_know_their_rank_and_count_as_under_htex(tmp_path):
    """HTEX's process_worker_pool sets PARSL_WORKER_RANK to the worker's index on its node and
    PARSL_WORKER_COUNT to the node's workers; two workers meeting in one folder see ranks 0 and 1 of 2."""
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    executor = ScalpelExecutor(label="scalpel", topology="1x2", profiles=False)
    with parsl.load(Config(executors=[executor], run_dir=str(tmp_path / "runinfo"), strategy="none")):
        seen = sorted(future.result(timeout=120) for future in [rank_and_count(str(meeting)) for _ in range(2)])
    assert seen == [("0", "2"), ("1", "2")]


@python_app
def pool_and_block(meeting, count):
    """This worker's PARSL_WORKER_POOL_ID and PARSL_WORKER_BLOCK_ID, once ``count`` workers have met."""
    import os
    import time

    open(os.path.join(meeting, str(os.getpid())), "w").close()
    deadline = time.monotonic() + 60
    while len(os.listdir(meeting)) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return os.environ.get("PARSL_WORKER_POOL_ID"), os.environ.get("PARSL_WORKER_BLOCK_ID")


@pytest.mark.parametrize("node_manager", [True, False])
def test_workers_know_their_pool_and_block_as_under_htex(tmp_path, node_manager):
    """HTEX's workers see their manager's id (PARSL_WORKER_POOL_ID, 12 hex digits) and block
    (PARSL_WORKER_BLOCK_ID); local mode's one block is "0", as HTEX's first LocalProvider block."""
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    executor = ScalpelExecutor(label="scalpel", topology="1x2", profiles=False, node_manager=node_manager,
                               worker_env={"PARSL_WORKER_BLOCK_ID": "not this"})
    with parsl.load(Config(executors=[executor], run_dir=str(tmp_path / "runinfo"), strategy="none")):
        seen = {future.result(timeout=120) for future in [pool_and_block(str(meeting), 2) for _ in range(2)]}
    (pool_id, block_id), = seen  # both workers, one manager
    assert block_id == "0" and len(pool_id) == 12 and int(pool_id, 16) >= 0, seen
