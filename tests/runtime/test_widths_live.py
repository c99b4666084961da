"""A malleable task on the live side: its width and why ride in its outcome's stats."""

from scalpel_executor.core.scheduler import Scheduler
from scalpel_executor.core.tasks import Task
from scalpel_executor.core.widths import TAIL
from scalpel_executor.runtime.contract import Job
from scalpel_executor.runtime.pool import _placement


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
