"""A malleable task on the live side: its width and why ride in its outcome's stats."""

from scalpel_executor.core.scheduler import Scheduler
from scalpel_executor.core.tasks import Task
from scalpel_executor.core.widths import EXPLORING, NO_SPEEDUP, PLANNED_EXPLORATION, TAIL
from scalpel_executor.runtime.contract import Job
from scalpel_executor.runtime.node.pool import _placement


def test_a_malleable_task_reports_the_width_it_was_given_and_why_a_fixed_one_does_not():
    scheduler = Scheduler([[0, 1, 2, 3]], "scalpel")
    scheduler.widths.model.seed("blas", 0.05, 10)
    malleable = Task(1, runtime=10.0, key="blas", max_cores=4, payload=Job(b"call"))
    scheduler.add([malleable])
    [start] = scheduler.dispatch(0.0)
    start.task.payload.cpus = tuple(slot.cpu for slot in start.booked)
    placed = _placement(start.task)
    assert (placed["width"], placed["width_reason"], placed["cpus"]) == (4, TAIL, [0, 1, 2, 3])
    fixed = Task(2, cores=2, payload=Job(b"call"))
    assert "width" not in _placement(fixed) and "width_reason" not in _placement(fixed)


def test_a_real_run_keeps_a_malleable_keys_reading_and_the_next_run_starts_from_it(tmp_path):
    """A lone malleable task of a key never run is not explored: its run time is the prior's
    guess, against which a wider run reads nothing, and nothing lands in the profile store (a
    single-threaded stencil once read as perfectly parallel so). The next run knows its run time:
    its task explores a width (planned so, or at its start) and the reading lands in the store;
    the run after carries it to the node manager's scheduler."""
    import parsl
    from parsl.app.app import python_app
    from parsl.config import Config

    from scalpel_executor import ScalpelExecutor
    from scalpel_executor.learning.store import ProfileStore

    @python_app
    def spin(n, parsl_resource_specification=None):
        return sum(i * i for i in range(n))

    path = str(tmp_path / "profiles.sqlite")
    hints = {"max_cores": 2, "profile_key": "spin"}
    rows = []
    for run in range(3):
        executor = ScalpelExecutor(label="scalpel", topology="1x2:32MiB", profiles=path)
        dfk = parsl.load(Config(executors=[executor], run_dir=str(tmp_path / f"runinfo{run}"), strategy="none"))
        try:
            assert spin(200_000, parsl_resource_specification=hints).result() == sum(i * i for i in range(200_000))
            rows.append(executor.run_report()["tasks"])
        finally:
            dfk.cleanup()
            parsl.clear()
        with ProfileStore(path) as store:
            kept = store.speedup("spin")
        [task] = rows[run]
        if run == 0:
            assert task["runtime_source"] == "prior"
            assert task["width"] == 1 and task["width_reason"] == NO_SPEEDUP
            assert kept is None
        elif run == 1:
            assert task["width"] == 2 and task["width_reason"] in (EXPLORING, PLANNED_EXPLORATION)
            assert kept is not None and kept.readings == 1 and 0 <= kept.serial_fraction <= 1
    # one reading is not yet sure (widths.SURE_AFTER): the third run explores again, and its
    # reading joins the one it started from
    assert rows[2][0]["width"] == 2 and rows[2][0]["width_reason"] in (EXPLORING, PLANNED_EXPLORATION)
    assert kept is not None and kept.readings == 2
