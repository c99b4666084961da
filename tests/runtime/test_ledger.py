"""The driver's ledger of a node manager: what it holds, what it began, how a result settles and how a loss splits.

No socket and no process: the rules ManagerClient and ManagerHub share, on tasks built here.
"""

import logging
from dataclasses import dataclass, field

import pytest
from parsl.executors.high_throughput.errors import ManagerLost

from scalpel_executor.core.tasks import Task
from scalpel_executor.runtime.driver import ledger as ledger_module
from scalpel_executor.runtime.contract import Job
from scalpel_executor.runtime.errors import NodeManagerLost, WorkerDied
from scalpel_executor.runtime.driver.ledger import Ledger, Settled, lost_outcome, receive
from scalpel_executor.runtime.wire.manager_messages import Began, Drain, Failed, Fatal, Heartbeat, Log, Result, Started


@dataclass
class Manager:
    """A driver's record of one manager, as ``receive`` reads it."""

    name: str = "node3:812 (block 2)"
    fatal: str | None = None
    ledger: Ledger = field(default_factory=Ledger)


def holding(*task_ids) -> Ledger:
    ledger = Ledger()
    for task_id in task_ids:
        ledger.hold(Task(task_id, payload=Job(b"call")))
    return ledger


def result(task_id, slot=1) -> Result:
    return Result(task_id, True, {"wall": 0.5}, slot, 0, 3, 12.5, b"value")


def test_a_loss_fails_the_begun_tasks_and_hands_back_the_rest_in_the_order_sent():
    ledger = holding(1, 2, 3, 4)
    ledger.begin([3, 1])
    ledger.begin([99])  # not held: a Began never makes a task the ledger does not hold
    begun, unbegun = ledger.lose()
    assert [t.id for t in begun] == [1, 3] and [t.id for t in unbegun] == [2, 4]
    assert len(ledger) == 0 and ledger.lose() == ([], [])


def test_a_result_settles_its_task_with_its_outcome_and_placement():
    ledger = holding(1, 2)
    ledger.begin([1])
    settled = ledger.settle(result(1), "pid 812")
    assert isinstance(settled, Settled) and settled.task.id == 1
    assert settled.outcome.ok and settled.outcome.payload == b"value" and settled.outcome.stats == {"wall": 0.5}
    job = settled.task.payload
    assert (job.slot, job.domain, job.cpu, job.started) == (1, 0, 3, 12.5)
    assert [t.id for t in ledger.tasks()] == [2]  # settled: no longer held


def test_a_settled_task_is_no_longer_begun():
    ledger = holding(1, 2)
    ledger.begin([1, 2])
    ledger.settle(result(1), "pid 812")
    begun, unbegun = ledger.lose()
    assert [t.id for t in begun] == [2] and unbegun == []


def test_a_failure_is_rebuilt_as_the_drivers_exception_and_an_unstarted_task_has_no_placement():
    ledger = holding(5)
    settled = ledger.settle(Failed(5, "WorkerDied", "task 5 was lost", {"pid": 42, "cpus": [0], "cause": "SIGKILL"},
                                   None, None, None, None), "pid 812")
    assert not settled.outcome.ok and isinstance(settled.outcome.error, WorkerDied)
    assert settled.outcome.error.cause == "SIGKILL"
    job = settled.task.payload
    assert (job.slot, job.domain, job.cpu, job.started) == (None, None, None, None)


def test_a_result_for_a_task_not_held_is_dropped_and_logged(caplog):
    ledger = holding(1)
    assert ledger.settle(result(77), "pid 812") is None
    assert "dropped a result from node manager pid 812 for task 77, which it does not hold" in caplog.text
    assert ledger.settle(result(1), "pid 812") is not None
    assert ledger.settle(result(1), "pid 812") is None  # a duplicate
    assert caplog.text.count("dropped a result") == 2


def test_an_outcome_that_cannot_be_built_leaves_its_task_held_for_the_loss_that_follows(monkeypatch):
    def broken(message):
        raise ValueError("bad detail")

    monkeypatch.setattr(ledger_module, "rebuild_error", broken)
    ledger = holding(5)
    ledger.begin([5])
    with pytest.raises(ValueError):
        ledger.settle(Failed(5, "WorkerDied", "lost", {}, 0, 0, 0, 1.0), "pid 812")
    begun, _ = ledger.lose()
    assert [t.id for t in begun] == [5]


def test_take_all_empties_the_ledger_in_the_order_sent():
    ledger = holding(3, 1, 2)
    ledger.begin([1])
    assert [t.id for t in ledger.take_all()] == [3, 1, 2]
    assert len(ledger) == 0 and ledger.lose() == ([], [])


def test_a_lost_task_fails_with_parsls_manager_lost_naming_the_manager_and_the_cause():
    task = Task(9, payload=Job(b""))
    outcome = lost_outcome(task, "(pid 812)", "was killed by signal SIGKILL", pid=812,
                           then="a new manager (pid 813) takes later tasks")
    error = outcome.error
    assert not outcome.ok and isinstance(error, NodeManagerLost) and isinstance(error, ManagerLost)
    assert str(error) == ("task 9 was lost with its node manager (pid 812), which was killed by signal SIGKILL; "
                          "a new manager (pid 813) takes later tasks")
    assert (error.task_id, error.pid, error.cause) == (9, 812, "was killed by signal SIGKILL")
    remote = lost_outcome(task, "node3:812 (block 2)", "was silent for 9 s", pid=812, hostname="node3").error
    assert str(remote) == "task 9 was lost with its node manager node3:812 (block 2), which was silent for 9 s"
    assert remote.hostname == "node3"


# -- the message switch ----------------------------------------------------------------------


def test_receive_keeps_began_and_settles_results_in_the_managers_ledger():
    manager = Manager(ledger=holding(1, 2))
    assert receive(manager, Began([1]), (Heartbeat, Started)) is None
    settled = receive(manager, result(2), (Heartbeat, Started))
    assert isinstance(settled, Settled) and settled.task.id == 2
    assert [t.id for t in manager.ledger.lose()[0]] == [1]


def test_receive_hands_the_driver_the_messages_it_takes_and_ignores_one_it_does_not(caplog):
    manager = Manager()
    heartbeat = Heartbeat([42], 0, [], [])
    assert receive(manager, heartbeat, (Heartbeat, Started, Drain)) is heartbeat
    assert receive(manager, Drain(60.0), (Heartbeat, Started, Drain)) == Drain(60.0)
    assert receive(manager, Drain(60.0), (Heartbeat, Started)) is None  # local mode's managers never drain
    assert "node manager node3:812 (block 2) sent Drain, which a manager never sends; ignored" in caplog.text


def test_receive_relogs_a_managers_records_under_their_loggers_and_keeps_its_fatal(caplog):
    manager = Manager()
    with caplog.at_level(logging.INFO):
        receive(manager, Log(logging.WARNING, "scalpel_executor.runtime.node.pool", "worker pid 42 died"), ())
        receive(manager, Log(logging.INFO, "user.module", "hello"), ())
        receive(manager, Fatal("could not start its workers"), ())
    records = [(r.name, r.getMessage()) for r in caplog.records]
    assert ("scalpel_executor.runtime.node.pool", "[node manager node3:812 (block 2)] worker pid 42 died") in records
    assert ("scalpel_executor.manager", "[node manager node3:812 (block 2)] hello") in records
    assert manager.fatal == "could not start its workers"
    assert ("scalpel_executor.runtime.driver.ledger", "node manager node3:812 (block 2): could not start its workers") in records
