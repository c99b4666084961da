"""What every pool is told: one frozen :class:`PoolOptions`, its defaults, its checks, its wire form.

The executor builds one ``PoolOptions`` from its constructor's arguments and hands it to whichever
pool runs its tasks (:mod:`scalpel_executor.runtime.contract`): ``WorkerPool`` reads it in this
process; ``ManagerClient`` and ``ManagerHub`` send it to their node managers as itself
(``to_dict`` in the ``Configure`` message, ``from_dict`` in the manager), and the manager's
``WorkerPool`` reads the same object. So an option is declared, defaulted and checked here once,
and a new one is a new field here, nothing else on the way::

    ScalpelExecutor(...) ──> PoolOptions(...) ──> WorkerPool(topology, options, on_complete)
                                   │          ──> ManagerClient(topology, options, ...) ──┐ Configure(config,
                                   │          ──> ManagerHub(config, options, ...) ───────┤   options.to_dict())
                                   └── checked once (__post_init__)                      v
                                                    node manager: PoolOptions.from_dict ──> WorkerPool

The batching option is a :class:`~scalpel_executor.core.batching.Batching`, which the simulator
uses too (it travels as its three fields); the contention model travels as the document ``scalpel calibrate --out`` writes
(``capacity_fraction``, ``sensitivity``), read back by the same
:func:`~scalpel_executor.core.contention_fit.load_model`, which also reads the constructor's
``contention_model=`` path (:func:`read_contention_model`). :data:`HTEX_ONLY` answers a
HighThroughputExecutor argument the executor does not take with the option that does its work;
:func:`unknown_arguments` any other unknown keyword with the argument it likely means.
"""

from __future__ import annotations

import difflib
import json
import logging
import math
import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

import psutil

from scalpel_executor.core.batching import Batching
from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.contention_fit import load_model
from scalpel_executor.core.policies import DEFAULT_POLICY, resolve_policy
from scalpel_executor.host.accelerators import resolve_accelerators

logger = logging.getLogger(__name__)

__all__ = ["HEARTBEAT_PERIOD", "HEARTBEAT_THRESHOLD", "HTEX_ONLY", "LOCAL_BATCHING", "PROVIDER_BATCHING", "PINS", "ALSO_CALLED",
           "WALLTIME_GRACE", "MEMORY_RESERVE", "PoolOption", "PoolOptions", "memory_budget",
           "read_contention_model", "unknown_arguments"]

PINS = ("core", "domain")  # a worker pinned to its core, or to every core of its LLC domain
LOCAL_BATCHING = Batching()  # local mode's batch rule
PROVIDER_BATCHING = Batching(window=0.0)  # provider mode's: the driver deals each manager its share in passes
WALLTIME_GRACE = 3.0  # seconds past a task's walltime before its worker is killed
HEARTBEAT_PERIOD = 2.0  # seconds between a node manager's heartbeats (and, in provider mode, the driver's pings)
HEARTBEAT_THRESHOLD = 120.0  # seconds of silence after which a node manager is lost (HTEX's default)
MEMORY_RESERVE = 0.1  # of the memory available at start, kept out of the default budget (the driver, the OS)


def memory_budget(options: PoolOptions) -> float:
    """The bytes of declared task memory a node may run at once: the option, else 90% of what is
    available now (psutil)."""
    if options.memory_budget is not None:
        total = psutil.virtual_memory().total
        if options.memory_budget > total:
            logger.warning("memory_budget of %.0f MiB is more than this node's %.0f MiB of memory: tasks' declared "
                           "memory may oversubscribe it; give at most what the node has", options.memory_budget / 2**20,
                           total / 2**20)
        return options.memory_budget
    return psutil.virtual_memory().available * (1 - MEMORY_RESERVE)


def read_contention_model(value: Any) -> ContentionModel:
    """The contention model the ``scalpel`` policy plans with: a ContentionModel, the path of a
    calibration (``scalpel calibrate --out``), or None for the default (rho 0.5, sigma 1; start()
    may plan with the host's fit instead)."""
    if value is None:
        return ContentionModel()
    if isinstance(value, ContentionModel):
        return value
    try:
        with open(value, encoding="utf-8") as handle:
            document = json.load(handle)
    except OSError as error:
        raise ValueError(f"contention_model: cannot read {os.fspath(value)!r}: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"contention_model: {os.fspath(value)!r} is not JSON ({error.msg} at line {error.lineno})") \
            from None
    try:
        return load_model(document)
    except ValueError as error:
        raise ValueError(f"contention_model: {os.fspath(value)!r}: {error}") from None


#: HighThroughputExecutor's arguments that ScalpelExecutor does not take, each with what does its work here:
#: a user moving a configuration over is told the equivalent, not handed a bare TypeError.
HTEX_ONLY = {
    "cpu_affinity": "workers are always pinned here, one to each core (pin='core', the default) or to every core "
                    "of its LLC domain (pin='domain'); topology= chooses the cores",
    "cores_per_worker": "a worker here is one core; give a task several with cores_per_task= or its "
                        "parsl_resource_specification={'cores': k}",
    "mem_per_worker": "give mem_per_task= (a task's memory without a hint), memory_budget= (the node's) or "
                      "parsl_resource_specification={'memory': MiB}",
    "max_workers": "one worker runs per core of topology= (local mode) or max_workers_per_node= (with provider=)",
    "worker_debug": "node managers and workers log at the driver's level for scalpel_executor, under "
                    "runinfo/<run>/<label>/block-N/",
    "worker_port_range": "give port_range= (provider mode: the ports the driver binds)",
    "worker_ports": "give port_range= (provider mode: the ports the driver binds)",
    "interchange_port_range": "there is no interchange: the driver deals tasks to node managers itself (port_range=)",
    "interchange_launch_cmd": "there is no interchange: the driver deals tasks to node managers itself",
    "loopback_address": "give address= (provider mode: where node managers reach the driver)",
    "encrypted": "provider mode's channel is always CurveZMQ-encrypted, with keys made per run",
    "manager_selector": "the executor places tasks on node managers by footprint itself (runtime.driver.placement)",
    "poll_period": "give heartbeat_period= (seconds between a node manager's heartbeats)",
}

#: Names users reach for that ScalpelExecutor spells otherwise: an unknown keyword among them is
#: answered with the argument it means; any other gets the nearest argument names (difflib).
ALSO_CALLED = {"profile_store": "profiles", "profile_db": "profiles", "store": "profiles", "profile": "profiles",
               "cores": "cores_per_task", "memory": "mem_per_task", "gpus": "available_accelerators",
               "accelerators": "available_accelerators", "workers": "max_workers_per_node"}


def unknown_arguments(given: Any, known: Any) -> str | None:
    """A message for the keywords of ``given`` that are not in ``known`` (the constructor's
    arguments), each with the argument it likely means; None where every one is known."""
    known = list(known)
    clauses = []
    for name in (name for name in given if name not in known):
        meant = [ALSO_CALLED[name]] if ALSO_CALLED.get(name) in known else difflib.get_close_matches(name, known, n=2)
        clauses.append(f"{name}=" + (f" (did you mean {' or '.join(m + '=' for m in meant)}?)" if meant else ""))
    if not clauses:
        return None
    return f"ScalpelExecutor got {'an unexpected keyword argument' if len(clauses) == 1 else 'unexpected keyword arguments'}: {', '.join(clauses)}"


def _batching(document: Any) -> Batching:
    """The batch rule ``to_dict`` sent as its fields, checked as Batching checks them."""
    if not isinstance(document, dict):
        raise ValueError(f"must be a dict of Batching's fields, got {document!r:.200}")
    try:
        return Batching(**document)
    except TypeError as error:  # an unknown field, or max_batch not an int
        raise ValueError(str(error)) from None


class PoolOption:
    """An executor attribute that is the field of the same name of its :class:`PoolOptions`
    (``self._options``): stored once, so what the attribute shows is what every pool is told.
    Read-only: a pool is told its options when it starts, so a later assignment could not reach it."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, executor: Any, owner: type | None = None) -> Any:
        return self if executor is None else getattr(executor._options, self.name)

    def __set__(self, executor: Any, value: Any) -> None:
        raise AttributeError(f"{self.name} is fixed when the executor is made: give {self.name}={value!r} "
                             f"to its constructor")


@dataclass(frozen=True)
class PoolOptions:
    """How a pool runs its tasks, whichever pool and wherever it runs.

    Each field but ``walltime_grace`` and ``model_measured`` is the :class:`~scalpel_executor.runtime.driver.executor.ScalpelExecutor`
    argument of the same name, described there once; the executor shows them as read-only
    attributes read from here (:class:`PoolOption`). Where a field holds a resolved form of the
    argument:

    batching : Batching
        The argument, or the mode's default (:data:`LOCAL_BATCHING`, :data:`PROVIDER_BATCHING`).
    worker_env : dict
        The argument, with ``SCALPEL_PROBE=off`` first when the executor's ``probe`` is False.
    contention_model : ContentionModel
        The model the default policy plans with: the argument, else the one ``start()`` chose.
    memory_budget : float, optional
        Bytes (the argument is in MiB or a size); None: what is available when the pool starts,
        less :data:`MEMORY_RESERVE` of it (:func:`memory_budget`).
    accelerators : tuple of str
        Device ids (``available_accelerators``, a count or ids); () none.
    walltime_grace : float
        Seconds past a task's ``walltime`` before its worker is killed (not an executor argument).
    model_measured : bool
        Whether ``contention_model`` was measured (given, or fitted on this host) rather than the
        default's guess: the width rule counts the cache a narrow width crowds only then (the
        scheduler's ``crowding``; not an executor argument).

    Every field is checked on construction (a ValueError or TypeError naming the field and the
    bad value), numbers are stored as floats and ``worker_env`` as a copy, so an options object
    that exists is one every pool and every node manager accepts.
    """

    policy: str = DEFAULT_POLICY
    pin: str = "core"
    batching: Batching = LOCAL_BATCHING
    worker_env: dict = field(default_factory=dict, hash=False)
    seed: int = 0
    walltime_grace: float = WALLTIME_GRACE
    contention_model: ContentionModel = field(default_factory=ContentionModel)
    model_measured: bool = False
    heartbeat_period: float = HEARTBEAT_PERIOD
    heartbeat_threshold: float = HEARTBEAT_THRESHOLD
    # Per-task resources (core.resources): what a node's running tasks may hold together.
    memory_budget: float | None = None
    accelerators: tuple = ()
    enforce_memory: bool = False
    drain_period: float | None = None

    # Fields that travel as a document of their own, and what reads that document back.
    _DOCUMENTS: ClassVar[dict[str, Any]] = {"contention_model": load_model, "batching": _batching}

    def __post_init__(self) -> None:
        resolve_policy(self.policy)  # ValueError listing the policies
        if self.pin not in PINS:
            raise ValueError(f"pin must be 'core' or 'domain', got {self.pin!r}")
        if not isinstance(self.batching, Batching):
            raise TypeError(f"batching must be a Batching (scalpel_executor.core.batching), got {self.batching!r:.200}")
        if not isinstance(self.worker_env, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in self.worker_env.items()):
            raise ValueError(f"worker_env must map names to strings, got {self.worker_env!r:.200}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise TypeError(f"seed must be an integer, got {self.seed!r}")
        if not isinstance(self.contention_model, ContentionModel):
            raise TypeError(f"contention_model must be a ContentionModel, got {self.contention_model!r:.200}")
        _seconds("walltime_grace", self.walltime_grace, zero=True)
        _seconds("heartbeat_period", self.heartbeat_period, zero=False)
        _seconds("heartbeat_threshold", self.heartbeat_threshold, zero=False)
        for name in ("walltime_grace", "heartbeat_period", "heartbeat_threshold"):
            object.__setattr__(self, name, float(getattr(self, name)))
        object.__setattr__(self, "worker_env", dict(self.worker_env))
        if self.memory_budget is not None:
            if isinstance(self.memory_budget, bool) or not isinstance(self.memory_budget, (int, float)) \
                    or not math.isfinite(self.memory_budget) or self.memory_budget < 0:
                raise ValueError(f"memory_budget must be a finite number of bytes >= 0 or None, got {self.memory_budget!r}")
            object.__setattr__(self, "memory_budget", float(self.memory_budget))
        object.__setattr__(self, "accelerators", resolve_accelerators(self.accelerators))
        if not isinstance(self.model_measured, bool):
            raise TypeError(f"model_measured must be True or False, got {self.model_measured!r}")
        if not isinstance(self.enforce_memory, bool):
            raise TypeError(f"enforce_memory must be True or False, got {self.enforce_memory!r}")
        if self.drain_period is not None:
            _seconds("drain_period", self.drain_period, zero=False)
            object.__setattr__(self, "drain_period", float(self.drain_period))

    def to_dict(self) -> dict:
        """The options as JSON-ready values: what a node manager is sent."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["worker_env"] = dict(self.worker_env)
        values["accelerators"] = list(self.accelerators)
        values["batching"] = asdict(self.batching)
        model = self.contention_model
        values["contention_model"] = {"capacity_fraction": model.capacity_fraction, "sensitivity": model.sensitivity}
        return values

    @classmethod
    def from_dict(cls, values: dict) -> "PoolOptions":
        """The options ``to_dict`` gave, checked; a key this version does not know is named (a
        driver and a node manager of different versions)."""
        if not isinstance(values, dict):
            raise ValueError(f"pool options must be a dict of fields, got {values!r:.200}")
        unknown = sorted(set(values) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"the pool options have unknown keys {unknown}; the driver and the node manager "
                             f"must run the same scalpel-executor version")
        values = dict(values)
        for name, read in cls._DOCUMENTS.items():
            if name in values:
                try:
                    values[name] = read(values[name])
                except ValueError as error:
                    raise ValueError(f"{name}: {error}") from None
        return cls(**values)


def _seconds(name: str, value: Any, *, zero: bool) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0 or (value == 0 and not zero):
        raise ValueError(f"{name} must be a finite number of seconds {'>= 0' if zero else '> 0'}, got {value!r}")
