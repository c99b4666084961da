"""ScalpelExecutor: the Parsl-facing executor.

Parsl's DataFlowKernel calls ``submit(func, resource_specification, *args, **kwargs)`` from its
own thread; this class validates the hints, serializes the call with Parsl's serializer, and hands
an opaque buffer to the node-level part (:class:`~scalpel_executor.node.NodeScheduler`), which
batches, groups, dispatches to pinned workers and calls back with the outcome. The callback turns
the outcome into the Future's result or exception — on the completion thread, holding no lock, so
the DFK's callbacks (which may submit more tasks) run freely::

    DFK thread ── submit() ── parse_hints ── pack_apply_message ──> NodeScheduler.submit ──┐
                                                                                            │
    Future.set_result / set_exception <── _complete (completion thread) <── worker result ┘
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Union

import typeguard
from parsl.executors.base import ParslExecutor
from parsl.executors.errors import InvalidResourceSpecification  # noqa: F401 - re-exported for users
from parsl.monitoring.radios.base import RadioConfig
from parsl.monitoring.radios.filesystem import FilesystemRadio
from parsl.serialize import deserialize, pack_apply_message
from parsl.utils import RepresentationMixin

from scalpel_executor.hints import parse_hints
from scalpel_executor.node import ExecutorShutdown, NodeScheduler, NodeTask, Outcome, WorkerDied
from scalpel_executor.scheduling import resolve_policy
from scalpel_executor.topology import Topology
from scalpel_executor.units import parse_size

logger = logging.getLogger(__name__)

__all__ = ["ScalpelExecutor", "ExecutorShutdown", "TaskRecord", "WorkerDied", "scalpel_config"]


@dataclass(frozen=True)
class TaskRecord:
    """What happened to one task: where it ran (slot, LLC domain, CPU), when, and its estimates."""

    task_id: int
    slot: int | None  # None: it never started (shutdown)
    domain: int | None
    cpu: int | None
    started: float | None  # time.monotonic() when it was sent to its worker
    finished: float
    footprint: float
    runtime: float
    ok: bool  # False for a task exception, a worker death or a shutdown
    stats: dict  # wall / cpu seconds and peak RSS measured in the worker


class ScalpelExecutor(ParslExecutor, RepresentationMixin):
    """Runs Parsl apps on one pinned worker per core, co-scheduled to spare the shared caches.

    Parameters
    ----------
    label : str
        The executor's name in Parsl (``executors=`` of an app).
    policy : str
        ``"scalpel"`` (grouping + two-level LPT, default), or a baseline: ``"longer_first"``,
        ``"grouping+fifo"``, ``"fifo"``, ``"random"``, ``"di"``.
    topology : Topology, str or list of CPU lists, optional
        The LLC domains to schedule for. Default: detected from sysfs and this process's affinity.
        A spec such as ``"2x4:12MiB"`` describes a machine you do not have; its decisions are then
        laid over the real cores (for tests and demonstrations). ``[[0, 1], [2, 3]]`` picks CPUs.
    pin : "core" or "domain"
        Pin each worker to its core (default), or to every core of its LLC domain.
    batch_window : float
        Seconds to collect arriving tasks before grouping them (default 0.005). 0: group whatever
        has arrived whenever a core frees, dispatching at once to idle cores.
    max_batch : int
        Arrivals that start grouping before the window ends.
    default_footprint : int or str
        Footprint assumed for a task without a ``footprint`` hint (default 0 bytes).
    default_runtime : float
        Run time (seconds) assumed for a task without a ``runtime`` hint (default 1.0).
    worker_env : dict, optional
        Extra environment for workers; overrides the OMP/BLAS thread counts (set to the number
        of cores each worker owns).
    smt : bool
        Use every hardware thread rather than one per physical core when detecting the topology.
    storage_access : list of Staging, optional
        Parsl staging providers; None uses Parsl's defaults.
    working_dir : str, optional
        Where staged files go (read by Parsl's staging).
    remote_monitoring_radio : RadioConfig, optional
        How tasks report to Parsl monitoring; default a filesystem radio (opens no socket).
    seed : int
        Seeds the ``random`` policy.
    """

    @typeguard.typechecked
    def __init__(
        self,
        label: str = "scalpel",
        policy: str = "scalpel",
        topology: Union[Topology, str, Sequence[Sequence[int]], None] = None,
        pin: str = "core",
        batch_window: Union[int, float] = 0.005,
        max_batch: int = 4096,
        default_footprint: Union[int, float, str] = 0,
        default_runtime: Union[int, float] = 1.0,
        worker_env: Optional[Dict[str, str]] = None,
        smt: bool = False,
        storage_access: Optional[List[Any]] = None,
        working_dir: Optional[str] = None,
        remote_monitoring_radio: Optional[RadioConfig] = None,
        seed: int = 0,
    ):
        ParslExecutor.__init__(self)
        resolve_policy(policy)
        if pin not in ("core", "domain"):
            raise ValueError(f"pin must be 'core' or 'domain', got {pin!r}")
        if math.isnan(batch_window) or math.isinf(batch_window) or batch_window < 0:
            raise ValueError(f"batch_window must be a finite number of seconds >= 0, got {batch_window!r}")
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch!r}")
        if math.isnan(default_runtime) or math.isinf(default_runtime) or default_runtime < 0:
            raise ValueError(f"default_runtime must be a finite number of seconds >= 0, got {default_runtime!r}")
        self.label = label
        self.policy = policy
        self.topology = topology
        self.pin = pin
        self.batch_window = float(batch_window)
        self.max_batch = max_batch
        self.default_footprint = default_footprint
        self.default_runtime = float(default_runtime)
        self.worker_env = worker_env
        self.smt = smt
        self.storage_access = storage_access
        self.working_dir = working_dir
        self.seed = seed
        self.remote_monitoring_radio = remote_monitoring_radio or FilesystemRadio()
        self._default_footprint_bytes = float(parse_size(default_footprint, what="default_footprint"))
        self._topology = Topology.resolve(topology, smt=smt)  # bad CPUs fail here, not at start()
        self._ids = itertools.count()
        self.records: list[TaskRecord] = []  # one per finished task, in completion order
        self._node: NodeScheduler | None = None
        self._shut_down = False

    @property
    def resolved_topology(self) -> Topology:
        """The LLC domains this executor schedules for."""
        return self._topology

    @property
    def node(self) -> NodeScheduler | None:
        """The node-level scheduler (None before ``start()``)."""
        return self._node

    def start(self) -> None:
        if self._shut_down:
            raise ExecutorShutdown(f"executor {self.label!r} was shut down and cannot be restarted")
        if self._node is not None:
            return
        node = NodeScheduler(
            self._topology,
            self.policy,
            self._complete,
            pin=self.pin,
            batch_window=self.batch_window,
            max_batch=self.max_batch,
            worker_env=self.worker_env,
            seed=self.seed,
        )
        node.start()
        self._node = node
        logger.info(
            "executor %r started %d workers (policy %s, pin %s) on %s",
            self.label, len(node.worker_pids), self.policy, self.pin, self._topology.describe().replace("\n", ";"),
        )

    def submit(self, func, resource_specification: Dict[str, Any], *args: Any, **kwargs: Any) -> Future:
        if self._node is None:
            raise ExecutorShutdown(
                f"executor {self.label!r} is shut down" if self._shut_down
                else f"executor {self.label!r} has not been started: call start() or use it through parsl.load()"
            )
        hints = parse_hints(resource_specification)
        task_id = next(self._ids)
        future: Future = Future()
        future.parsl_executor_task_id = task_id  # type: ignore[attr-defined]
        buffer = pack_apply_message(func, args, kwargs)
        self._node.submit(
            NodeTask(
                task_id,
                buffer,
                footprint=self._default_footprint_bytes if hints.footprint is None else hints.footprint,
                runtime=self.default_runtime if hints.runtime is None else hints.runtime,
                priority=hints.priority,
                context=future,
            )
        )
        return future

    def _complete(self, task: NodeTask, outcome: Outcome) -> None:
        self.records.append(
            TaskRecord(task.id, task.slot, task.domain, task.cpu, task.started, time.monotonic(),
                       task.footprint, task.runtime, outcome.ok and outcome.error is None, outcome.stats)
        )
        future: Future = task.context
        try:
            if outcome.error is not None:
                future.set_exception(outcome.error)
            elif outcome.ok:
                future.set_result(deserialize(outcome.payload))
            else:
                wrapper = deserialize(outcome.payload)
                try:
                    wrapper.reraise()
                except BaseException as error:  # noqa: BLE001 - the task's own exception, re-raised
                    future.set_exception(error)
        except InvalidStateError:
            pass  # cancelled by the caller; nothing to deliver
        except Exception as error:  # noqa: BLE001 - e.g. a result that cannot be deserialized here
            try:
                future.set_exception(error)
            except InvalidStateError:
                pass

    def shutdown(self) -> None:
        """Fail unfinished tasks with ExecutorShutdown and end every worker. Idempotent."""
        if self._shut_down:
            return
        self._shut_down = True
        node, self._node = self._node, None
        if node is not None:
            node.shutdown()
        super().shutdown()

    def monitor_resources(self) -> bool:
        return True


def scalpel_config(run_dir: str = "runinfo", **executor_options: Any):
    """A ready ``parsl.Config`` with one ScalpelExecutor: ``parsl.load(scalpel_config())``.

    Keyword arguments go to :class:`ScalpelExecutor` (``policy=``, ``topology=``, ...).
    """
    from parsl.config import Config

    return Config(executors=[ScalpelExecutor(**executor_options)], run_dir=run_dir)
