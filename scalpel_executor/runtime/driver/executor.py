"""ScalpelExecutor: the Parsl-facing executor.

One module past ~500 lines because it holds the documented, checked constructor arguments of the
Parsl-facing class, its largest part, and both classes (``ScalpelExecutor.__new__`` names
``ScalpelProviderExecutor``, whose provider-mode machinery is the mixin in ``provider_mode.py``, so
no module imports this one back); the machinery below them lives in ``pool.py``, ``hub.py``,
``node/fit.py``, ``host_learning.py``, ``path_learning.py`` and ``report.py``.

Parsl's DataFlowKernel calls ``submit(func, resource_specification, *args, **kwargs)`` from its
own thread; this class validates the hints, serializes the call with Parsl's serializer, and hands
an opaque buffer to the worker pool (:class:`~scalpel_executor.runtime.node.pool.WorkerPool`), which
batches, groups, dispatches to pinned workers and calls back with the outcome. The callback turns
the outcome into the Future's result or exception — on the completion thread, holding no lock, so
the DFK's callbacks (which may submit more tasks) run freely::

    DFK thread ── submit() ── parse_hints ── estimate ── pack_apply_message ──> WorkerPool.submit(Task) ─┐
                                  (footprint, run time, and whether the                                 │
                                   probe measures it: learning.sampling)                                │
    Future.set_result / set_exception <── _complete (completion thread) <────────────── worker result ─┘
                                          └─> Estimator.observe: learn run time, and footprint if measured

By default (``node_manager=True``) the pool runs in a node manager process
(:mod:`scalpel_executor.runtime.node.manager`) and ``WorkerPool`` above is its client,
:class:`~scalpel_executor.runtime.driver.manager_client.ManagerClient`, whose reader thread plays the
completion thread; estimates, learning and the profile store stay in this process.

With ``provider=`` (any Parsl provider) the executor is a :class:`ScalpelProviderExecutor`, a
Parsl ``BlockProviderExecutor``: Parsl's scaling strategy starts blocks through the provider, each
node of a block runs a node manager that connects back over CurveZMQ, and ``WorkerPool`` above is
:class:`~scalpel_executor.runtime.driver.hub.ManagerHub`, which deals tasks to the managers
(:mod:`~scalpel_executor.runtime.driver.placement`); its hub thread plays the completion thread.

The three keep one contract, :class:`~scalpel_executor.runtime.contract.Pool`, and are told one
:class:`~scalpel_executor.runtime.options.PoolOptions`, built and checked in the constructor from
its arguments (policy, pinning, batching, worker environment, seed, contention model, heartbeats).
"""

from __future__ import annotations

import atexit
import dataclasses
import inspect
import itertools
import logging
import math
import os
import sys
import threading
import time
from collections import deque
from concurrent.futures import Future, InvalidStateError
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import typeguard
from parsl.executors.base import ParslExecutor
from parsl.executors.errors import InvalidResourceSpecification  # noqa: F401 - re-exported for users
from parsl.executors.high_throughput.executor import HighThroughputExecutor
from parsl.executors.status_handling import BlockProviderExecutor
from parsl.providers.base import ExecutionProvider
from parsl.monitoring.radios.base import RadioConfig
from parsl.monitoring.radios.filesystem import FilesystemRadio
from parsl.serialize import deserialize, pack_apply_message
from parsl.utils import RepresentationMixin

from scalpel_executor.core.batching import Batching
from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.learning.estimates import Estimate, Estimator
from scalpel_executor.learning.critical_path import GRAPH
from scalpel_executor.learning.hints import HintAudit, Hints, parse_hints, parse_walltime, scheduling_priority
from scalpel_executor.learning.keys import declared as app_declared
from scalpel_executor.learning.sampling import Sampling
from scalpel_executor.runtime.errors import (ExecutorFailed, ExecutorShutdown, ResourcesUnavailable, TaskExit,
                                             WalltimeExceeded, WorkerDied, named)
from scalpel_executor.core.resources import Capacity
from scalpel_executor.core.tasks import Task
from scalpel_executor.runtime.wire.channel import PORT_RANGE
from scalpel_executor.runtime.contract import Job, Outcome, Pool
from scalpel_executor.runtime.driver.graph import GraphMemoizer, nested_future
from scalpel_executor.runtime.driver.driver_pin import BUSY, BusyPin, DriverPin, resolve_pin_driver
from scalpel_executor.runtime.driver.host_learning import HostLearning
from scalpel_executor.runtime.driver.path_learning import PathLearning
from scalpel_executor.runtime.logs import share_parsl_handlers
from scalpel_executor.runtime.driver.manager_client import ManagerClient
from scalpel_executor.runtime.node.fit import NodeFit
from scalpel_executor.runtime.driver.provider_mode import ProviderMode
from scalpel_executor.runtime.driver.monitoring import NodeMonitor, local_node, start_monitor
from scalpel_executor.runtime.options import (HEARTBEAT_PERIOD, HEARTBEAT_THRESHOLD, HTEX_ONLY, LOCAL_BATCHING,
                                              PROVIDER_BATCHING, PoolOption, PoolOptions, memory_budget,
                                              read_contention_model, unknown_arguments)
from scalpel_executor.runtime.node.pool import WorkerPool
from scalpel_executor.runtime.driver.report import TaskRecord, build_report, save_report, script_module
from scalpel_executor.learning.store import ProfileStore, open_store, store_path
from scalpel_executor.core.domains import Topology
from scalpel_executor.host.sysfs import resolve_topology
from scalpel_executor.core.units import parse_mebibytes, parse_size

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_LAUNCH_CMD", "ExecutorFailed", "ExecutorShutdown", "ScalpelExecutor", "ScalpelProviderExecutor",
           "ResourcesUnavailable", "TaskExit", "TaskRecord", "WalltimeExceeded",
           "WorkerDied", "scalpel_config"]

@dataclasses.dataclass(eq=False, kw_only=True)
class Submission(Job):
    """What the driver keeps of a task from its submit to its completion: the task's
    :class:`~scalpel_executor.runtime.contract.Job` and, beside what a pool reads, the fields below
    (no pool reads them). One object, not a Job holding a context: each object a submit keeps alive
    until its task ends adds to the driver's garbage collections."""

    future: Future  # Parsl's, set on completion
    estimate: Estimate  # what the scheduler was told, and what the outcome teaches (Estimator.observe)
    hints: Hints  # the task's resource specification, read
    tail_source: str | None  # where its critical-path tail came from (learning.critical_path); None: none
    parsl_id: int | None  # its task id in Parsl's graph, when the graph showed it
    submitted: float  # time.monotonic() when Parsl handed it over
    lengthened: float | None = None  # the chain it was told after its submit (PathLearning.lengthened); None: none

    def who(self) -> str | None:
        """The task as Parsl's log names it, ``task 12 (simulate)``, where the graph showed its id:
        the executor's own ids skip nothing Parsl refused at its hints, so Parsl's run ahead of
        them; None where no graph showed it (the executor used without a DataFlowKernel, or one whose
        memoizer the graph could not wrap)."""
        return None if self.parsl_id is None else f"task {self.parsl_id} ({self.estimate.app.rpartition('.')[2]})"


RECORDS_KEPT = 100_000  # finished tasks remembered in ``records`` (a campaign may run millions)
# What a provider block runs on each node (formatted with python, url, cert_dir, block_id, driver_threshold, log_dir).
DEFAULT_LAUNCH_CMD = ("{python} -m scalpel_executor.runtime.node.manager --connect {url} --cert-dir {cert_dir} "
                      "--block-id {block_id} --driver-threshold {driver_threshold} --log-dir {log_dir}")


class ScalpelExecutor(ParslExecutor, RepresentationMixin):
    """Runs Parsl apps on one pinned worker per core, co-scheduled to spare the shared caches.

    Parameters
    ----------
    label : str
        The executor's name in Parsl (``executors=`` of an app).
    policy : str
        ``"scalpel"`` (default: a dispatch order checked in the contention model, never predicted
        worse than longest-first or the paper's algorithm, and kept over longest-first's only
        when its gain survives the spread of the run-time estimates; docs/design.md), ``"scalpel-paper"``
        (the paper's Algorithm 1 + 2), or a baseline: ``"scalpel-lpt"``, ``"longest_first"``,
        ``"grouping+fifo"``, ``"fifo"``, ``"random"``, ``"di"``.
    contention_model : ContentionModel, path or None
        The model ``scalpel`` plans with: a ``ContentionModel``, the path of a calibration that
        ``scalpel calibrate --out`` wrote, or None: in local mode, the model fitted on this host
        from earlier runs' co-runs (kept in the profile store) once it rests on 20 of them, else the
        default (rho 0.5, sigma 1); each run's co-runs are added at shutdown (docs/design.md, "Where
        the model comes from"). A model that overstates this machine's contention makes the plan
        trade order for separation it does not need (keyword only).
    topology : Topology, str or list of CPU lists, optional
        The LLC domains to schedule for. Default: detected from sysfs and this process's affinity.
        A spec such as ``"2x4:12MiB"`` describes a machine you do not have; its decisions are then
        laid over the real cores (for tests and demonstrations). ``[[0, 1], [2, 3]]`` picks CPUs.
    pin : "core" or "domain"
        Pin each worker to its core (default), or to every core of its LLC domain.
    batching : Batching, optional
        How arriving tasks are collected before they are grouped (:class:`~scalpel_executor.core.batching.Batching`):
        ``window``, the longest time (seconds) to collect them; ``quiet``, how long a lone arrival
        waits for a second one (default 0.001 s; a task estimated to run long waits up to 1% of its
        estimated run time, at most the window), after which a burst is collected the whole window
        from its first task and on while submits keep coming less than ``quiet`` apart (at most 4
        windows); ``max_batch``, arrivals that start grouping before the window ends. Default
        (None): ``Batching()`` (a 0.005 s window) in local mode; a window of 0 in provider mode,
        where the driver deals each manager its share in passes and a window at the manager would
        only delay it (docs/results/throughput.md, "Provider mode"). ``Batching(window=0)``: group
        whatever has arrived whenever a core frees, dispatching at once to idle cores.
    default_footprint : int or str
        The prior: footprint assumed for a task with no hint and no profile yet (default 0 bytes).
    default_runtime : float
        The prior run time (seconds) for a task with no hint and no profile yet (default 1.0).
    profiles : str, path, ProfileStore or bool, optional
        The profile store that remembers measured footprints and run times across runs. Default
        (None or True): ``$SCALPEL_PROFILE_STORE`` or ``~/.local/share/scalpel-executor/profiles.sqlite``.
        A path or a :class:`~scalpel_executor.learning.store.ProfileStore` picks another; False
        turns persistence off (the executor still learns within a run).
    profile_key : callable(func, args, kwargs) -> str or None, optional
        Names a task's profile instead of :func:`scalpel_executor.learning.keys.profile_key` (app
        name plus a size signature of the arguments); None falls back to the default.
    probe : bool
        Measure tasks' footprints in their workers (referenced-page sampling; default True). False:
        no task is measured and no sampler process runs; estimates learn run times only.
    sampling : Sampling
        Which tasks the probe measures (:class:`~scalpel_executor.learning.sampling.Sampling`):
        the first ``measure_first`` of each profile key in this run (default 3), then one in
        ``measure_every`` (default 20; 1: every task; 0: only the first ones and those after a
        drift), and a key's next task after an unmeasured one ran more than ``remeasure_drift``
        times longer or shorter than the key's learned run time (default 2.0; None: never).
        Unmeasured tasks still report wall and CPU time, so run-time estimates learn from every
        task; footprints and LLC counts come from measured ones. ``learn_cold=False``: a worker's
        first call of an app, which imported modules, teaches nothing (default True: it teaches).
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
        Seeds the ``random`` policy (the default policy's searches are seeded by the tasks they
        plan, so a plan is a function of its tasks).
    node_manager : bool, optional
        Local mode: run the worker pool (scheduler, batching, pinned workers, walltime kills,
        respawn) in a node manager process of its own (:mod:`scalpel_executor.runtime.node.manager`), so
        it does not share this interpreter with Parsl's DataFlowKernel (default, None: True).
        The manager is a child on a private socket pair; estimates and learning stay here. If it
        dies, each of its unfinished tasks fails once with Parsl's ``ManagerLost``
        (:class:`~scalpel_executor.runtime.errors.NodeManagerLost`), so ``retries=``
        reruns them, and a new manager takes later tasks. False runs the pool in this process
        (threads beside the DataFlowKernel's). Provider mode always runs node managers: leave it out.
    provider : ExecutionProvider, optional
        Provider mode (keyword only): any Parsl provider (``LocalProvider``, ``SlurmProvider``, ...)
        with its launcher. The executor is then a :class:`ScalpelProviderExecutor`, a Parsl
        ``BlockProviderExecutor`` whose blocks each run one node manager per node; Parsl's scaling
        strategy (``init_blocks``, ``min_blocks``, ``max_blocks``, ``parallelism``) applies. The
        options below apply to provider mode only, but for ``max_workers_per_node`` and the
        heartbeat settings, which apply in both modes.
    address : str
        Where the driver binds its node manager channel, and where managers connect: an IP address
        of this host (default ``"127.0.0.1"``: managers on this host only; on a cluster, the
        address of the interface the compute nodes reach). ``"*"`` binds every interface and
        tells managers this host's name.
    port_range : (int, int)
        Ports the channel may bind, lowest included, highest excluded (default 54000-55000).
    max_workers_per_node : int, optional
        Workers (pinned cores) per node, the first CPUs of its topology domain by domain, in local
        mode too (default: all the CPUs its node lets it use).
    prefetch_capacity : int
        Tasks each manager is sent beyond one per worker, so its scheduler has the next task at hand
        when a core frees (default 1).
    heartbeat_period, heartbeat_threshold : float
        Seconds between a node manager's heartbeats (in provider mode both ways); seconds of silence
        after which a manager is lost and each task it had begun fails with ``ManagerLost`` (defaults 2
        and 120; HTEX's are 30 and 120: a shorter period finds a silent manager sooner, at about
        20 µs of driver CPU per manager per second). Local mode's manager (``node_manager=True``) and
        provider blocks' managers alike; a manager that exits, or whose connection drops, is lost at once.
    drain_period : float, optional
        Seconds after a block's node manager starts at which it drains, as HTEX's ``drain_period``:
        it is dealt no new task, finishes the tasks it holds (running and prefetched), then exits,
        so its block's job ends without killing a task, and Parsl's strategy starts a new block for
        the work still waiting. Set it to the block's walltime less the time a block takes to start
        and the longest task. Default None: never. A drained manager is not a lost one (no
        ``ManagerLost``). Provider mode only.
    launch_cmd : str, optional
        The command a block runs on each node, formatted with ``python``, ``url``, ``cert_dir``,
        ``block_id``, ``driver_threshold`` and ``log_dir`` (``<run_dir>/<label>``, below which the
        managers and workers write their logs; empty without a DataFlowKernel) (default
        :data:`DEFAULT_LAUNCH_CMD`). Append
        ``--cpus {block_id}`` or other ``scalpel-manager`` options here.
    block_error_handler : bool or callable
        Parsl's handling of blocks that fail (default True: Parsl's simple handler).

    Per-task resources (keyword only; a task's ``parsl_resource_specification`` may ask for
    ``cores``, ``memory`` in MiB and ``gpus``, as TaskVine's and Work Queue's do; docs/executor.md):

    cores_per_task : int
        Cores a task gets without a ``cores`` hint (default 1). Where HTEX's ``cores_per_worker``
        sizes every worker alike, here each task may differ: a k-core task runs on k cores of one
        LLC domain (its affinity and BLAS/OpenMP threads set to them), beside other tasks on the rest.
    mem_per_task : int, float or str, optional
        Memory a task holds without a ``memory`` hint, in MiB or a size such as ``"2GiB"`` (HTEX's
        ``mem_per_worker`` is in GB per worker); None (default): 0, not counted.
    memory_budget : int, float or str, optional
        What the running tasks' declared memory may add up to on a node, in MiB or a size (default:
        what is available when the node's pool starts, less 10%). Tasks that would exceed it wait;
        a task asking more than it fails at submit with ``ResourcesUnavailable``.
    available_accelerators : int or list of str, optional
        Accelerators a node's tasks share, as HTEX names it: a count (ids ``"0"`` … ``"n-1"``) or
        device ids. A task with ``gpus=k`` is given k ids no running task holds, in
        ``CUDA_VISIBLE_DEVICES``, ``ROCR_VISIBLE_DEVICES`` and ``ZE_AFFINITY_MASK``; a task without
        one sees none.
    worker_init : str, optional
        Shell commands run before local mode's node manager, and so every worker, starts (as
        HTEX's ``worker_init``, e.g. ``"module load gcc; source env/bin/activate"``), however long
        they take; a failing command fails every task with ``ExecutorFailed`` and its error output.
        With ``provider=``, give it to the provider instead.
    enforce_memory : bool
        Stop a task that holds more than its declared ``memory``: it fails alone with
        ``MemoryExceeded`` naming the task, its declaration, the limit and what enforced it
        (default False: memory is admission only). Each worker runs in a memory cgroup of its own
        (cgroup v2 where usable, else v1), limited while such a task runs to the worker's usage
        plus the declaration and 64 MiB; past it the kernel's OOM killer ends the worker, which is
        replaced. Where no memory cgroup is usable, an address-space limit (RLIMIT_AS: the
        worker's size plus the declaration and 256 MiB) stands in, which also refuses a task that
        maps far more than it touches. Each node's pool logs at start which one it uses.
    pin_driver : "busy", "auto", int or None, optional
        Local mode: this process's Parsl threads (the one that calls ``start()``, under
        ``parsl.load()`` the main thread; Parsl's launch thread; the executor's reader) on one CPU.
        They take turns at one interpreter lock anyway; on one CPU they stop handing it to each
        other at every line Parsl logs, which cut the driver's CPU per no-op task by about 40% and
        raised the no-op rate 1.3–1.6× (docs/results/throughput.md). ``"busy"`` (the default)
        pins them only while they take most of a CPU (a burst of short tasks) and gives their
        CPUs back once they do not; ``"auto"`` pins them from ``start()`` to ``shutdown()``, with
        the threads they start meanwhile (your own code in the main thread, thread pools it
        makes, processes another executor's provider starts share the CPU too: pinned for a whole
        run, two workflows of short tasks that kept every worker busy ran 9–10% slower on a
        2-core machine); an int pins them so to that CPU; None leaves them where the OS puts them.
        ``"busy"`` and ``"auto"`` take the last CPU the process may use that no worker is on
        (``max_workers_per_node`` one below the cores leaves one), else the last. The node
        manager and its workers keep the process's CPUs; the run report's ``driver_pin`` says how
        long ``"busy"`` pinned them. (:mod:`~scalpel_executor.runtime.driver.driver_pin`.)

    The arguments that are pool options (``policy``, ``pin``, ``seed``, ``batching``, the heartbeat
    settings, ``drain_period``, ``enforce_memory``) are read-only attributes of the executor, read
    from the :class:`~scalpel_executor.runtime.options.PoolOptions` every pool is told.
    """

    provider = None  # local mode; ScalpelProviderExecutor has its provider here

    # Arguments that are pool options, shown as attributes (Parsl's repr reads them) and stored once, in self._options.
    policy, pin, seed, batching = PoolOption(), PoolOption(), PoolOption(), PoolOption()
    heartbeat_period, heartbeat_threshold, drain_period = PoolOption(), PoolOption(), PoolOption()
    enforce_memory = PoolOption()

    def __new__(cls, *args: Any, **kwargs: Any):
        htex_only = [name for name in kwargs if name in HTEX_ONLY]
        if htex_only:
            raise TypeError("; ".join(f"{name}= is HighThroughputExecutor's: {HTEX_ONLY[name]}" for name in htex_only))
        parameters = inspect.signature(cls.__init__).parameters
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):  # a subclass's **kwargs
            unknown = unknown_arguments(kwargs, parameters)
            if unknown:
                raise TypeError(unknown)
        if cls is ScalpelExecutor and kwargs.get("provider") is not None:
            cls = ScalpelProviderExecutor  # __init__ then runs on it, with the same arguments
        return super().__new__(cls)

    @typeguard.typechecked
    def __init__(
        self,
        label: str = "scalpel",
        policy: str = PoolOptions.policy,
        topology: Union[Topology, str, Sequence[Sequence[int]], None] = None,
        pin: str = PoolOptions.pin,
        batching: Optional[Batching] = None,
        default_footprint: Union[int, float, str] = 0,
        default_runtime: Union[int, float] = 1.0,
        profiles: Union[str, os.PathLike, ProfileStore, bool, None] = None,
        profile_key: Optional[Callable[..., Optional[str]]] = None,
        probe: bool = True,
        sampling: Sampling = Sampling(),
        worker_env: Optional[Dict[str, str]] = None,
        smt: bool = False,
        storage_access: Optional[List[Any]] = None,
        working_dir: Optional[str] = None,
        remote_monitoring_radio: Optional[RadioConfig] = None,
        seed: int = PoolOptions.seed,
        node_manager: Optional[bool] = None,
        *,
        provider: Optional[ExecutionProvider] = None,
        address: str = "127.0.0.1",
        port_range: Tuple[int, int] = PORT_RANGE,
        max_workers_per_node: Optional[int] = None,
        prefetch_capacity: int = 1,
        heartbeat_period: Union[int, float] = HEARTBEAT_PERIOD,
        heartbeat_threshold: Union[int, float] = HEARTBEAT_THRESHOLD,
        drain_period: Union[int, float, None] = None,
        launch_cmd: Optional[str] = None,
        block_error_handler: Union[bool, Callable[..., None]] = True,
        contention_model: Union[ContentionModel, str, os.PathLike, None] = None,
        cores_per_task: int = 1,
        mem_per_task: Union[int, float, str, None] = None,
        memory_budget: Union[int, float, str, None] = None,
        available_accelerators: Union[int, Sequence[str], None] = None,
        enforce_memory: bool = False,
        worker_init: Optional[str] = None,
        pin_driver: Union[int, str, None] = BUSY,
    ):
        ParslExecutor.__init__(self)
        if provider is not None:
            if node_manager is not None:
                raise ValueError(f"node_manager={node_manager!r} is a local-mode option; with provider= every node "
                                 f"runs a node manager: leave node_manager out")
            BlockProviderExecutor.__init__(self, provider=provider, block_error_handler=block_error_handler)
        elif drain_period is not None:
            raise ValueError(f"drain_period={drain_period!r} is a provider-mode option (a block's managers drain "
                             f"before its walltime); local mode's manager lives as long as the executor: leave it "
                             f"out, or give provider=")
        if max_workers_per_node is not None and max_workers_per_node < 1:
            raise ValueError(f"max_workers_per_node must be at least 1 or None, got {max_workers_per_node!r}")
        if prefetch_capacity < 0:
            raise ValueError(f"prefetch_capacity must be 0 or more tasks, got {prefetch_capacity!r}")
        low, high = port_range
        if not 0 < low < high <= 65536:
            raise ValueError(f"port_range must be (lowest, highest + 1) with 0 < lowest < highest <= 65536, "
                             f"got {port_range!r}")
        self.address = address
        self.port_range = port_range
        self.max_workers_per_node = max_workers_per_node
        self.prefetch_capacity = prefetch_capacity
        self.launch_cmd = launch_cmd or DEFAULT_LAUNCH_CMD
        if provider is None:  # with one, BlockProviderExecutor keeps the handler it resolved
            self.block_error_handler = block_error_handler
        self._unset_run_dir = self.run_dir
        if not label.strip():
            raise ValueError(f"label must name the executor, as in executors=['scalpel'], got {label!r}")
        if "/" in label or "\0" in label or label in (".", ".."):
            raise ValueError(f"label names the executor's files in the run directory and cannot contain '/' "
                             f"or NUL or be '.' or '..'; got {label!r}; try {label.replace('/', '-')!r}")
        if isinstance(default_runtime, bool):
            raise TypeError(f"default_runtime must be a number, got the boolean {default_runtime!r}")
        if math.isnan(default_runtime) or math.isinf(default_runtime) or default_runtime < 0:
            raise ValueError(f"default_runtime must be a finite number of seconds >= 0, got {default_runtime!r}")
        self.contention_model = read_contention_model(contention_model)
        # Every pool option, checked once; start() swaps in the model it plans with.
        self._options = PoolOptions(
            policy=policy, pin=pin, seed=seed,
            batching=(LOCAL_BATCHING if provider is None else PROVIDER_BATCHING) if batching is None else batching,
            worker_env={**({} if probe else {"SCALPEL_PROBE": "off"}), **(worker_env or {})},
            contention_model=self.contention_model, heartbeat_period=heartbeat_period,
            heartbeat_threshold=heartbeat_threshold, accelerators=available_accelerators, enforce_memory=enforce_memory,
            drain_period=drain_period,
            memory_budget=None if memory_budget is None else parse_mebibytes(memory_budget, what="memory_budget"))
        self.cores_per_task, self.mem_per_task = cores_per_task, mem_per_task
        self.memory_budget, self.available_accelerators = memory_budget, available_accelerators
        if worker_init is not None and (provider is not None or node_manager is False):
            raise ValueError(f"worker_init={worker_init!r} runs before local mode's node manager starts; "
                             + ("with provider=, give it to the provider (its worker_init)" if provider is not None
                                else "it needs node_manager=True (the default)"))
        self.worker_init = worker_init
        if pin_driver not in (None, BUSY) and (provider is not None or node_manager is False):
            raise ValueError(f"pin_driver={pin_driver!r} is a local-mode option for the node manager's driver: "
                             + ("with provider=, the driver's node runs no workers; leave it out"
                                if provider is not None else "it needs node_manager=True (the default)"))
        self.pin_driver = pin_driver
        self.label = label
        self._refused = 0  # tasks handed over after shutdown (_refused_after_shutdown)
        self._cut_short = 0  # tasks still running or waiting at shutdown (the run report's tasks_cut_short)
        self._rejected = 0  # submits that raised (a bad hint, a task no node fits, a call that won't serialize)
        # read while the script runs: Python drops __main__.__file__ once it ends, before a report written at exit
        self._script = script_module()
        self.topology = topology  # as given: Parsl's RepresentationMixin reads each argument back; resolved: _topology
        self.default_footprint = default_footprint
        self.default_runtime = float(default_runtime)
        self.profiles = profiles
        self.profile_key = profile_key
        self.probe = probe
        self.sampling = sampling
        self.worker_env = worker_env
        self.smt = smt
        self.storage_access = storage_access
        self.working_dir = working_dir
        self.node_manager = True if node_manager is None else node_manager
        self.remote_monitoring_radio = remote_monitoring_radio or FilesystemRadio()
        self._default_footprint_bytes = float(parse_size(default_footprint, what="default_footprint"))
        self._topology = resolve_topology(topology, smt=smt)  # bad CPUs fail here, not at start()
        if provider is None:  # local mode's node: as many workers as HTEX would run here
            self._topology = self._topology.first(max_workers_per_node)
        self._fit = NodeFit(cores_per_task, mem_per_task, self._topology)  # local mode: the node, fixed at start()
        # A CPU this process may not use fails here; "auto" and "busy" prefer one no worker is on. "busy",
        # the default, is off where the driver runs no node manager of its own (provider mode, in-process).
        self._driver_cpu = resolve_pin_driver(pin_driver if provider is None and node_manager is not False else None,
                                              self._topology.cpus)
        self._driver_pin: DriverPin | None = None
        self._busy_pin: BusyPin | None = None
        self._finished = (0, 0.0)  # tasks finished, the wall seconds they ran (pin_driver="busy": busy with tasks?)
        # What start() plans with (the given model, else this host's fit) and what the run adds to the fit.
        self._paths = PathLearning(self, self.default_runtime)  # the tails told to tasks and learned from the run
        self._host = HostLearning(label, self._topology, self.contention_model, given=contention_model is not None,
                                  local=provider is None)
        self._store_path = store_path(profiles)  # a directory fails here; faults warn at start()
        self._estimator: Estimator | None = None
        self._hint_audit = HintAudit()  # hints far off their tasks' measurements (run report: hints_off)
        self._take_back_log_handlers: Callable[[], None] | None = None
        self._ids = itertools.count()
        self.records: deque[TaskRecord] = deque(maxlen=RECORDS_KEPT)  # the latest finished tasks, in completion order
        self._pool: Pool | None = None
        self._node_monitor: NodeMonitor | None = None  # with Parsl monitoring: node (and local block) rows
        self._shut_down = False

    @property
    def resolved_topology(self) -> Topology:
        """The LLC domains this executor schedules for."""
        return self._topology

    @property
    def pool(self) -> Pool | None:
        """What runs the tasks (None before ``start()``): the worker pool, its pinned workers and the
        scheduler driving them; with ``node_manager=True`` the client of the node manager process that
        runs it; in provider mode the hub of the blocks' managers (:mod:`~scalpel_executor.runtime.contract`).
        """
        return self._pool

    def _begin_start(self) -> bool:
        """Whether ``start()`` has work to do (False: already started); makes the estimator."""
        if self._shut_down:
            raise ExecutorShutdown(f"executor {self.label!r} was shut down and cannot be restarted")
        if self._pool is not None:
            return False
        self._estimator = self._make_estimator()
        self._paths.start(self._estimator.store)
        if self._host.model_source == "default" and self.provider is None:  # provider mode's nodes are other hosts
            self._host.start(self._estimator.store if self._estimator is not None else None, self._log_dir())
        if self.run_dir != self._unset_run_dir:  # run by a DataFlowKernel: our warnings into its parsl.log
            self._take_back_log_handlers = share_parsl_handlers()
        # A script that ends without dfk.cleanup() (Parsl only warns then) still stores what the run
        # taught and writes its report (the pool's own exit hook may end the pool first: both are idempotent).
        atexit.register(self.shutdown)
        return True

    def start(self) -> None:
        if not self._begin_start():
            return
        manager_cpus = None
        if self._driver_cpu is not None and self.pin_driver == BUSY:  # once the pool runs: its threads are watched
            self._busy_pin = BusyPin(self._driver_cpu, self._pool_threads, finished=lambda: self._finished,
                                     workers=len(self._topology.cpus))
            self._busy_pin.watch(threading.current_thread())
            manager_cpus = sorted(self._busy_pin.process_cpus)  # a replacement started while pinned: all the same
        elif self._driver_cpu is not None:  # before the reader and sender start: they inherit the CPU
            self._driver_pin = DriverPin(self._driver_cpu)
            self._driver_pin.pin()
            manager_cpus = sorted(self._driver_pin.process_cpus)
        try:
            if self.node_manager:  # returns once the manager is launched, as HTEX's start: tasks wait for its workers
                pool = ManagerClient(self._topology, self._pool_options(), self._complete,
                                     worker_init=self.worker_init, log_dir=self._log_dir(), cpus=manager_cpus)
                pool.start(wait=False)
            else:
                pool = WorkerPool(self._topology, self._pool_options(), self._complete)
                pool.start()
        except BaseException:
            if self._driver_pin is not None:  # a start that failed leaves no thread on the one CPU
                self._driver_pin.release()
            raise
        self._pool = pool
        if self._busy_pin is not None:
            self._busy_pin.start()
        self._start_node_monitor()
        logger.info(
            "executor %r started (policy %s, pin %s, %s) on %s",
            self.label, self.policy, self.pin,
            f"node manager pid {pool.pid} starting its workers" if self.node_manager
            else f"{len(pool.worker_pids)} workers",
            self._topology.describe().replace("\n", ";"),
        )

    def _pool_threads(self) -> list[threading.Thread]:
        """The pool's threads in this process (what ``pin_driver="busy"`` watches with Parsl's)."""
        pool = self._pool
        return pool.driver_threads() if isinstance(pool, ManagerClient) else []

    def _start_node_monitor(self) -> None:
        """With Parsl monitoring on, report node managers (and local mode's block) to its database."""
        self._node_monitor = start_monitor(self.monitoring_messages, self.run_id, self.label, self._node_managers,
                                           local=self.provider is None)

    def _node_managers(self) -> List[Dict[str, Any]]:
        return local_node(self._pool, self._topology.cpus)

    def _log_dir(self) -> Optional[str]:
        """``<run_dir>/<label>``, below which node managers and workers write their log files (as HTEX's
        ``--logdir``; :mod:`~scalpel_executor.runtime.logs`); None when no DataFlowKernel set a run directory."""
        return None if self.run_dir == self._unset_run_dir else os.path.join(self.run_dir, self.label)

    def _make_estimator(self) -> Estimator:
        return Estimator(open_store(self.profiles, self._store_path), self._default_footprint_bytes,
                         self.default_runtime, key_function=self.profile_key,
                         sampling=self.sampling if self.probe else None)

    def _pool_options(self) -> PoolOptions:
        """The options every pool of this executor runs with, planning with the model start() chose;
        in local mode with the memory budget of this host, fixed now, so submit() checks against
        the one the node's scheduler has."""
        options = dataclasses.replace(self._options, contention_model=self._host.planning_model,
                                      model_measured=self._host.model_source != "default")
        if self.provider is None:
            options = dataclasses.replace(options, memory_budget=memory_budget(options))
            self._fit.fix(Capacity(tuple(len(d.cpus) for d in self._topology.domains), options.memory_budget,
                                   len(options.accelerators)))
        return options

    def submit(self, func, resource_specification: Dict[str, Any], *args: Any, **kwargs: Any) -> Future:
        try:
            return self._submit(func, resource_specification, *args, **kwargs)
        except Exception:  # Parsl fails the task with it; the run's closing sentence counts it
            self._rejected += 1
            raise

    def _submit(self, func, resource_specification: Dict[str, Any], *args: Any, **kwargs: Any) -> Future:
        pool = self._pool  # read once: a concurrent shutdown() sets it to None
        if pool is None and self._shut_down:
            return self._refused_after_shutdown()
        if pool is None:
            raise ExecutorShutdown(
                f"executor {self.label!r} has not been started: call start() or use it through parsl.load()")
        hints = parse_hints(resource_specification, app_declared(func).get("specification"))
        walltime = parse_walltime(kwargs)
        estimate = self._estimator.estimate(func, args, kwargs, hints)
        tail, wide_tail, tail_source, parsl_id = self._paths.tail_of(func, args, estimate.key)
        task_id = next(self._ids)
        submitted = time.monotonic()
        future: Future = Future()
        future.parsl_executor_task_id = task_id  # type: ignore[attr-defined]
        try:
            buffer = pack_apply_message(func, args, kwargs)
        except Exception as error:
            nested = nested_future(args, kwargs)
            advice = (f"{nested} holds a Future: Parsl waits only for Futures passed as arguments themselves "
                      f"(or in inputs=), so pass them one by one (*futures) or as inputs=futures"
                      if nested is not None else
                      "pass only values that pickle (no open files, locks held by others, generators, sockets)")
            raise TypeError(f"the call of {getattr(func, '__name__', func)!r} cannot be serialized for a worker: "
                            f"{error}; {advice}") from error
        declared = hints.memory if hints.memory is not None else self._fit.default_memory
        terms = self._host.terms(estimate.key)
        runtime = estimate.runtime if terms is None else self._host.planned_runtime(estimate)[0]
        task = Task(task_id, estimate.footprint, runtime, scheduling_priority(hints.priority),  # lower first
                    estimate.intensity,
                    payload=Submission(buffer=buffer, walltime=walltime, measure=estimate.measure,
                                       memory_limit=declared or 0.0, future=future, estimate=estimate, hints=hints,
                                       tail_source=tail_source, parsl_id=parsl_id, submitted=submitted),
                    runtime_spread=estimate.runtime_spread, key=estimate.key,
                    footprint_known=estimate.footprint_source != "prior",
                    cores=hints.cores or self.cores_per_task,
                    memory=declared if declared is not None else self._fit.learned_memory(estimate),
                    gpus=hints.gpus or 0,
                    tail=tail, wide_tail=wide_tail, interference=terms, max_cores=hints.max_cores,
                    serial_fraction=estimate.speedup[0] if estimate.speedup else None,
                    serial_readings=estimate.speedup[1] if estimate.speedup else 0,
                    family=estimate.family[0] if estimate.family else None,
                    family_serial=estimate.family[1] if estimate.family else None,
                    family_readings=estimate.family[2] if estimate.family else 0)
        if task.interference is not None:
            self._host.told()
        self._fit.check(task, task.payload.who() or f"this call of {estimate.app.rpartition('.')[2]}")
        busy_pin = self._busy_pin
        if busy_pin is not None and not busy_pin.watching(caller := threading.current_thread()):
            busy_pin.watch(caller)  # Parsl's launch thread
        try:
            pool.submit(task)
        except ExecutorShutdown:
            if self._shut_down:  # shutdown() began since the check above: refused as any later task
                return self._refused_after_shutdown()
            raise  # the pool cannot run tasks any more (no worker could be started), not shut down
        self._paths.watch(task, parsl_id, tail_source)
        for earlier, seconds, wide in self._paths.lengthened():  # their children invoked after them
            earlier.payload.tail_source, earlier.payload.lengthened = GRAPH, seconds
            pool.lengthen(earlier.id, seconds, wide)
        return future

    def _refused_after_shutdown(self) -> Future:
        """A task handed over after shutdown (``dfk.cleanup()`` with tasks still in Parsl's launch
        queue): a Future failed with ExecutorShutdown, returned, not raised, so Parsl logs no launch
        traceback for it, and one log line for all of them. (Raising cost two tracebacks per task:
        8,000 queued no-ops made cleanup take 12–30 s and parsl.log 77 MB.)"""
        self._refused += 1
        if self._refused == 1:
            logger.warning("executor %r is shut down: the tasks Parsl still hands it fail with ExecutorShutdown "
                           "(said once)", self.label)
        future: Future = Future()
        future.set_exception(ExecutorShutdown(f"executor {self.label!r} was shut down before this task was "
                                              f"handed to it (dfk.cleanup() with tasks not yet launched)"))
        return future

    def _complete(self, task: Task, outcome: Outcome) -> None:
        job: Submission = task.payload
        future, estimate, hints = job.future, job.estimate, job.hints
        succeeded = outcome.ok and outcome.error is None
        finished = time.monotonic()
        if isinstance(outcome.error, ExecutorShutdown) and not future.done():  # done: Parsl failed it already
            self._cut_short += 1  # (a provider's BadStateException), not this shutdown
        try:  # the run's bookkeeping: a fault here costs the report a row, never the task its result
            self.records.append(
                TaskRecord(task_id=task.id, slot=job.slot, domain=job.domain, cpu=job.cpu, started=job.started,
                           finished=finished, footprint=task.footprint, runtime=task.runtime, ok=succeeded,
                           stats=outcome.stats, profile_key=estimate.key, footprint_source=estimate.footprint_source,
                           runtime_source=self._host.planned_runtime(estimate)[1], intensity=task.intensity,
                           measured=estimate.measure, runtime_spread=task.runtime_spread, priority=hints.priority,
                           cores=task.cores, memory=task.memory, gpus=task.gpus,
                           tail=task.tail if job.lengthened is None else job.lengthened,
                           tail_source=job.tail_source, submitted=job.submitted, parsl_id=job.parsl_id)
            )
            wall = outcome.stats.get("wall")
            measured = isinstance(wall, (int, float))
            self._finished = (self._finished[0] + 1, self._finished[1] + (wall if measured else 0.0))
            if not measured:
                wall = finished - (job.started if job.started is not None else finished)
            self._paths.ended(job.parsl_id, wall, self._chain_seconds(task, outcome.stats, wall), succeeded)
        except Exception:  # noqa: BLE001
            logger.exception("could not record task %s in the run report; its result is delivered all the same",
                             task.id)
        try:
            if succeeded and self._estimator is not None:
                self._estimator.observe(estimate, outcome.stats, hints.cores or self.cores_per_task)
            if succeeded:
                self._hint_audit.observe(estimate.key, hints, outcome.stats)
        except Exception:  # noqa: BLE001 - odd measurements cost what they would teach, never the future
            logger.exception("could not learn from task %s's measurements %r", task.id, outcome.stats)
        try:
            if outcome.error is not None:  # made by the executor: it names the task as Parsl does
                future.set_exception(named(outcome.error, task.id, job.who()))
            elif outcome.ok:
                future.set_result(deserialize(outcome.payload))
            else:
                wrapper = deserialize(outcome.payload)
                try:
                    wrapper.reraise()
                except Exception as error:  # the task's own exception, re-raised (or the worker's MemoryExceeded)
                    future.set_exception(named(error, task.id, job.who()))
                except BaseException as error:  # noqa: BLE001 - sys.exit() in a task fails that task alone
                    future.set_exception(TaskExit.wrap(error))
        except InvalidStateError:
            pass  # cancelled by the caller; nothing to deliver
        except Exception as error:  # noqa: BLE001 - e.g. a result that cannot be deserialized here
            try:
                future.set_exception(error)
            except InvalidStateError:
                pass
        except BaseException as error:  # noqa: BLE001 - unpickling the result called sys.exit(): fail it alone
            # Never KeyboardInterrupt from Ctrl-C: this runs on a completion thread, and Python delivers
            # signals to the main thread; whatever arrives here was raised by the result's own code.
            try:
                failure = TaskExit(f"{job.who() or f'task {task.id}'}'s {'result' if outcome.ok else 'exception'} raised {error!r} "
                                   f"while it was deserialized in the driver", error)
                failure.__cause__ = error
                future.set_exception(failure)
            except InvalidStateError:
                pass

    def _chain_seconds(self, task: Task, stats: Mapping[str, Any], wall: float) -> float:
        """What a chain at the widest counts ``task`` (the run's tails, learning.critical_path): its
        wall time, or a malleable task's at its widest on the cache domain it ran on (its node's
        word, ``widest`` in its stats), by its key's speed-up so far, as the scheduler widens a task
        whose end decides the work's when it arrives."""
        width, widest = stats.get("width"), stats.get("widest")
        if (task.max_cores is None or self._estimator is None or not isinstance(width, int)
                or not isinstance(widest, int) or not 1 <= width <= widest):
            return wall
        return self._estimator.at_widest(task.key, wall, width, widest)

    def shutdown(self) -> None:
        """Fail unfinished tasks with ExecutorShutdown and end every worker. Idempotent."""
        if self._shut_down:
            return
        self._shut_down = True
        self._shut_down_by = _ending_with()
        atexit.unregister(self.shutdown)
        if self._node_monitor is not None:  # before the pool goes: its managers' last rows say inactive
            self._node_monitor.stop()
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown()
        if self._driver_pin is not None:
            self._driver_pin.release()
        if self._busy_pin is not None:
            self._busy_pin.stop()
        if self._estimator is not None:
            self._estimator.flush()
            if self._estimator.store is not None and not isinstance(self.profiles, ProfileStore):
                self._estimator.store.close()
            self._host.learn(self.records, self._log_dir())
            self._paths.learn()
            self._write_report()
        if self._take_back_log_handlers is not None:
            self._take_back_log_handlers()
        super().shutdown()

    def run_report(self) -> dict:
        """Where every finished task ran and where its estimates came from (JSON-ready); its fields
        are :func:`~scalpel_executor.runtime.driver.report.build_report`'s (docs/executor.md)."""
        records = list(self.records)
        return build_report(self.label, self.policy, self._topology, self._estimator, self._hint_audit.counts, records,
                            self._host.report(records, self._shut_down), self._paths.report(),
                            cut_short=self._cut_short, rejected=self._rejected,
                            shut_down_by=getattr(self, "_shut_down_by", None),
                            driver_pin=self._driver_pin_report(), script=self._script)

    def _driver_pin_report(self) -> Optional[dict]:
        """The run report's ``driver_pin``: where the driver's threads were pinned, how often and how long."""
        if self._busy_pin is not None:
            return self._busy_pin.summary()
        if self._driver_cpu is not None:
            return {"mode": "run", "cpu": self._driver_cpu, "engaged": 1, "seconds": None}
        return None

    def _write_report(self) -> None:
        """Write the run report next to Parsl's logs (``<run_dir>/scalpel-<label>-report.json``, mode 0600)."""
        run_dir = self.run_dir
        if run_dir == self._unset_run_dir or not os.path.isdir(run_dir) or not self.records:
            return  # not run by a DataFlowKernel, which sets run_dir: do not litter the working directory
        save_report(self.run_report(), run_dir, self.label)

    def monitor_resources(self) -> bool:
        return True


def _ending_with() -> str | None:
    """What the script is ending with when the executor shuts down: ``"a Ctrl-C"`` or ``"an error
    (ValueError)"`` while an exception leaves ``with parsl.load()`` (its ``__exit__`` runs
    ``dfk.cleanup()`` with the exception in flight), else None."""
    error = sys.exc_info()[1]
    if error is None:
        return None
    return "a Ctrl-C" if isinstance(error, KeyboardInterrupt) else f"an error ({type(error).__name__})"


class ScalpelProviderExecutor(ProviderMode, ScalpelExecutor, BlockProviderExecutor):
    """ScalpelExecutor in provider mode: what ``ScalpelExecutor(provider=...)`` builds.

    A Parsl ``BlockProviderExecutor``: the DataFlowKernel's strategy submits blocks through the
    provider (``_get_launch_command``), scales out on ``outstanding`` against
    ``workers_per_node``, scales idle blocks in (``scale_in`` cancels idle blocks first) and
    cancels every block at cleanup. Each node of a block runs ``scalpel-manager --connect``,
    which registers with this executor's :class:`~scalpel_executor.runtime.driver.hub.ManagerHub`.
    The arguments are ScalpelExecutor's; see there. What provider mode adds is
    :class:`~scalpel_executor.runtime.driver.provider_mode.ProviderMode`.
    """


# Parsl's htex_auto_scale strategy scales in idle blocks while tasks run elsewhere only for executors that
# are HighThroughputExecutors (it calls scale_in with max_idletime); for any other it logs an ERROR at every
# poll and cancels nothing. This executor has what that needs (connected_managers' HTEX keys, scale_in with
# max_idletime), so it declares itself one to isinstance (an ABC's virtual subclass: nothing is inherited).
HighThroughputExecutor.register(ScalpelProviderExecutor)


def scalpel_config(run_dir: str = "runinfo", **executor_options: Any):
    """A ready ``parsl.Config`` with one ScalpelExecutor: ``parsl.load(scalpel_config())``.

    Keyword arguments go to :class:`ScalpelExecutor` (``policy=``, ``topology=``, ...).
    """
    from parsl.config import Config

    return Config(executors=[ScalpelExecutor(**executor_options)], run_dir=run_dir, memoizer=GraphMemoizer())
