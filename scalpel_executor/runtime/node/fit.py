"""Whether a task fits its node, asked once with one failure form.

::

    ScalpelExecutor(...) ── NodeFit(cores_per_task, mem_per_task, topology): the defaults checked
    start() ─────────────── fix(capacity), local mode's node: defaults no task of it could run with refused
    submit() ────────────── learned_memory(estimate): an undeclared task's memory, at most the budget
                       └─── check(task): max_cores (capped at the widest domain), never_fits, a warning per wide width
    WorkerPool.submit ───── never_fits(task, capacity), where the node is known (provider mode's managers)

:func:`never_fits` is the one refusal of a task no node of this kind could ever start: the figures
:func:`~scalpel_executor.core.resources.unfit_reason` names and the fix, as
:class:`~scalpel_executor.runtime.errors.ResourcesUnavailable`; the executor raises it at submit, a
pool delivers it as the task's outcome. The scheduler's own check (``Scheduler.add``) stands behind
both and never sees a task they passed. Provider mode's hub, which knows every connected node,
refuses a task that fits none of them with a message of its own (``runtime/driver/hub.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

from scalpel_executor.core.domains import Topology
from scalpel_executor.core.resources import Capacity, counted_memory, needs_resources, unfit_reason
from scalpel_executor.core.tasks import Task
from scalpel_executor.core.units import parse_mebibytes
from scalpel_executor.runtime.errors import ResourcesUnavailable
from scalpel_executor.runtime.logs import summary_logger

if TYPE_CHECKING:  # the estimator (and its store) stays out of a node's pool, which imports never_fits
    from scalpel_executor.learning.estimates import Estimate

__all__ = ["NodeFit", "never_fits"]


def never_fits(task: Task, capacity: Capacity, who: str | None = None) -> ResourcesUnavailable | None:
    """The refusal of a task asking for more cores, memory or accelerators than ``capacity`` has,
    naming both figures and the fix; None when it may start once the node frees. ``who`` names the
    task (default ``task <its id>``, the executor's)."""
    if not needs_resources(task) or (problem := unfit_reason(task, capacity, who)) is None:
        return None
    if task.cores > sum(capacity.cores_per_domain):
        fix = "ask for fewer cores, or run it with a provider whose nodes have more"
    elif capacity.memory is not None and task.memory > capacity.memory:
        fix = ("ask for less memory, or raise memory_budget= (default: 90% of the memory available "
               "when the node's pool starts) if the node has it")
    else:
        fix = "ask for fewer, or name the node's devices in available_accelerators="
    return ResourcesUnavailable(f"{problem}; it could never start here: {fix}")


class NodeFit:
    """The executor's per-task resource defaults and, in local mode, the node its tasks are checked
    against (``capacity``, fixed at start; None in provider mode, where each node's pool checks).

    Parameters
    ----------
    cores_per_task : int
        Cores a task gets without a ``cores`` hint.
    mem_per_task : int, float, str or None
        Memory a task holds without a ``memory`` hint (MiB or a size), as the user gave it.
    topology : Topology
        The executor's LLC domains: a task wider than the widest is said to span several.
    """

    def __init__(self, cores_per_task: int, mem_per_task: Union[int, float, str, None], topology: Topology):
        if isinstance(cores_per_task, bool) or cores_per_task < 1:
            raise ValueError(f"cores_per_task must be a whole number >= 1, got {cores_per_task!r}")
        self.cores_per_task, self.mem_per_task = cores_per_task, mem_per_task
        #: bytes a task without a memory hint declares; None: it declares none (its learned memory counts)
        self.default_memory = None if mem_per_task is None else parse_mebibytes(mem_per_task, what="mem_per_task")
        self.widest = max(len(domain.cpus) for domain in topology.domains)
        self.capacity: Capacity | None = None
        self._wide_warned: set[int] = set()
        self._capped: set[int] = set()  # max_cores said to be capped at the widest domain

    def fix(self, capacity: Capacity) -> None:
        """Local mode's node, fixed at start: executor-wide defaults no task of it could run with are
        refused now, naming the option (else every unhinted task would fail at submit, blamed for asking)."""
        cores = sum(capacity.cores_per_domain)
        if self.cores_per_task > cores:
            raise ValueError(f"cores_per_task={self.cores_per_task} is more than this node's {cores} cores: every task "
                             f"without a cores hint would ask for them; give at most {cores}")
        if self.default_memory is not None and capacity.memory is not None and self.default_memory > capacity.memory:
            raise ValueError(f"mem_per_task={self.mem_per_task!r} ({self.default_memory / 2**20:.0f} MiB) is more than "
                             f"this node's memory budget of {capacity.memory / 2**20:.0f} MiB: every task without a "
                             f"memory hint would ask for it; give less, or raise memory_budget=")
        self.capacity = capacity

    def learned_memory(self, estimate: Estimate) -> float:
        """An undeclared task's memory for admission: the largest peak RSS its key measured (0 before
        any), at most the node's budget (:func:`~scalpel_executor.core.resources.counted_memory`); in
        provider mode each node's manager, and the hub per node, cap it at that node's budget."""
        capacity = self.capacity
        return counted_memory(estimate.memory or 0.0, False, None if capacity is None else capacity.memory)

    def check(self, task: Task, who: str | None = None) -> None:
        """Refuse a task this node could never start (local mode; ``who`` names it in the refusal) or a
        malleable range that is not one; say once per width that a task wider than any LLC domain
        spans several, and once per ``max_cores`` that a wider one than the widest domain starts on
        at most its cores."""
        capacity = self.capacity
        if task.max_cores is not None:
            if task.max_cores < task.cores:
                from scalpel_executor.learning.hints import InvalidHint  # Parsl's subclass: a node manager starts without Parsl

                raise InvalidHint({"max_cores"}, f"resource specification key 'max_cores': must be at least the task's "
                                                 f"cores ({task.cores}, cores_per_task={self.cores_per_task} without a "
                                                 f"'cores' key), got {task.max_cores}; raise max_cores or lower cores")
        if capacity is not None and (refusal := never_fits(task, capacity, who)) is not None:
            raise refusal  # before the cap is said: a task refused never starts on it
        if task.max_cores is not None:
            # more than a domain: capped there, as every node of a provider caps it (a workflow written
            # for a 64-core node runs on a laptop), said once per max_cores
            widest = None if capacity is None else max(capacity.cores_per_domain)  # provider mode: each node's own
            if widest is not None and task.max_cores > max(widest, task.cores) and task.max_cores not in self._capped:
                self._capped.add(task.max_cores)
                # said on the terminal too (summary_logger): a notebook's user never opens parsl.log
                if task.cores < widest:
                    summary_logger().warning(
                        "malleable tasks of up to %d cores (max_cores) start on at most %d here: a malleable task "
                        "runs on cores of one LLC domain, and this node's widest has %d", task.max_cores, widest, widest)
                else:  # wider than a domain already: not widened past its own cores
                    summary_logger().warning(
                        "malleable tasks of up to %d cores (max_cores) start on their %d (cores) here: a malleable "
                        "task widens only within one LLC domain, and this node's widest has %d",
                        task.max_cores, task.cores, widest)
        if task.cores > self.widest and task.cores not in self._wide_warned:
            self._wide_warned.add(task.cores)
            summary_logger().warning("tasks of %d cores are wider than any LLC domain here (%d cores): each runs on "
                                     "cores of several domains, and its threads share no last-level cache",
                                     task.cores, self.widest)
