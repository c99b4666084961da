"""What the workflow's graph says about a task an executor is handed: its parents, its pending
descendants, and how long the chain of work behind it is.

Parsl hands an executor a bare call, ``submit(func, resource_specification, *args, **kwargs)``,
once the task's inputs exist: no task id, no parents, no children. The DataFlowKernel (DFK) asks
its memoizer about the same task a moment earlier, on the same thread, with the whole task record.
A :class:`GraphMemoizer` wraps the user's memoizer to look at that record, and leaves what it saw
for the executor::

    DFK launch thread                              this module
    -----------------                              -----------
    _launch_if_ready_async: args unwrapped
    launch_task:
      memoizer.check_memo(record)  ------------>   GraphMemoizer.check_memo: the user's memoizer
                                                   answers first; on a miss, a Sighting (task id,
                                                   parents, the DFK's PendingGraph) is left in a
                                                   thread-local, with the record's args
      executor.submit(func, spec, *args)  ----->   take_sighting(label, args): the executor takes
                                                   it if the label and the args (by ``is``) match
    task completes: memoizer.update_memo_*  --->   PendingGraph.forget(task id)

    executor --- PendingGraph.children(id) / tail(id, estimate, frontier) ---> indexes the task
                 records the DFK created since the last call (ids below ``dfk.task_count``)

The sighting lives in a thread-local because ``check_memo`` and ``submit`` run on one launch thread, one task
at a time, while other launch threads do the same for other tasks. It is matched on the executor's label
because a task for another executor (a join app runs on ``_parsl_internal``) also leaves one, and on the args
because nothing else of the record reaches ``submit``.

The graph knows only tasks already submitted to the DFK: a workflow invoked up front is seen whole, one that
submits as results arrive is seen as far as it got. It never walks ``dfk.tasks`` (other threads insert and
delete there); it reads new ids one by one with ``dfk.tasks.get``.

This touches DFK internals (``dfk.tasks``, ``dfk.task_count``, ``dfk.memoizer``, task record
keys): checked on the Parsl versions in :data:`PARSL_CHECKED`.

A Future the DFK cannot see (inside a list or dict argument) is named by :func:`nested_future`,
for the executor's error when such a call does not serialize.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from parsl.app.futures import DataFuture
from parsl.dataflow.futures import AppFuture
from parsl.dataflow.memoization import BasicMemoizer, Memoizer

__all__ = ["PARSL_CHECKED", "GraphMemoizer", "PendingGraph", "Sighting", "install", "nested_future", "take_sighting"]

logger = logging.getLogger(__name__)

#: Parsl versions whose ``launch_task``, ``submit``, ``wipe_task``, memoizer protocol and future
#: classes this module was read against. A test fails on any other, so an upgrade is re-checked.
PARSL_CHECKED: tuple[str, ...] = ("2026.10.26",)

#: Ids the graph keeps looking for although the DFK's table lacks them (see PendingGraph). A
#: genuine one is a task between ``task_count += 1`` and its insertion, one per submitting thread;
#: more than this are ids whose submit raised half way, and only the newest are worth keeping.
HOLES_KEPT = 256
#: Pairs of estimators whose chain lengths a pending graph memoizes at once (PendingGraph.tail).
MEMOS_KEPT = 4
#: Parents of new edges a pending graph keeps for PendingGraph.fathered_since (halved when passed).
FATHERED_KEPT = 65_536


@dataclass(frozen=True)
class Sighting:
    """What the memoizer saw of the task being launched.

    ``parents`` are the task ids of its dependencies: an ``AppFuture`` of the same DFK names its
    task, a ``DataFuture`` the task that produces the file; any other future is left out.
    """

    task_id: int
    func_name: str
    executor: str
    parents: tuple[int, ...]
    graph: PendingGraph = field(repr=False, compare=False)


def parent_ids(task_record: dict) -> tuple[int, ...]:
    """Task ids of ``task_record['depends']``, in order, each once.

    An ``AppFuture`` of another DFK is left out: its id numbers another table.
    """
    dfk = task_record.get("dfk")
    ids: dict[int, None] = {}
    for dependency in task_record["depends"]:
        if isinstance(dependency, AppFuture):
            if dependency.task_record.get("dfk", dfk) is not dfk:
                continue
            task_id = dependency.tid
        elif isinstance(dependency, DataFuture):
            task_id = dependency.tid
        else:
            continue
        if isinstance(task_id, int):
            ids[task_id] = None
    return tuple(ids)


class PendingGraph:
    """An index from each pending task to the pending tasks that depend on it, for one DFK.

    Parameters
    ----------
    dfk : DataFlowKernel
        Read through ``dfk.tasks.get(id)`` and ``dfk.task_count`` only.

    Notes
    -----
    Edges are stored parent to children, as the DFK's records hold them the other way round. Each call indexes
    the ids from the last one indexed up to ``dfk.task_count``; an id whose record is missing is either
    finished (deleted by ``wipe_task``) or still being built by ``submit`` (``task_count`` is raised before
    the record is inserted). :meth:`forget`, called on every completion, tells them apart: a missing id not
    yet forgotten is looked up again on later calls (at most :data:`HOLES_KEPT` of them, the newest). A task
    is dropped when forgotten, so the graph holds pending tasks only.

    Indexing costs O(1) per task and per edge over the whole run, plus one look-up per missing id still looked
    for on each call. ``tail`` memoizes each descendant's chain length, per pair of estimators (at most
    :data:`MEMOS_KEPT` pairs; the executor passes two, as the tasks ran and at the widest), until a
    *generation* ends: when a newly indexed task has a parent (a new task without one changes nobody's tail),
    when more pairs are passed, or on :meth:`invalidate`. A workflow invoked up front thus computes each
    task's chain once, O(tasks + edges) in all (10,000 tasks in a chain: about 0.13 s on the development
    machine, 4 steps a task). ``steps`` counts the records, edges and ids looked at, for tests that must catch
    quadratic work without timing it. Finishing tasks do not end a generation: a memoized length may still
    count a descendant that failed on another parent's failure until the next one.

    One lock guards everything; ``estimate`` and ``frontier`` are called while it is held and
    must not call back into the graph.
    """

    def __init__(self, dfk: Any):
        self.dfk = dfk
        self.steps = 0
        self.generation = 0
        self.cycles = 0  # edges that closed a cycle, skipped (Parsl cannot make one)
        self._lock = threading.Lock()
        self._names: dict[int, str | None] = {}  # None: a parent seen before its own record
        # id -> its children; () until it has one: a list per task, most of them never filled, joined every
        # garbage collection while its task was pending (the empty tuple is one object, never tracked)
        self._children: dict[int, list[int] | tuple[()]] = {}
        self._next = 0  # lowest id never looked at
        self._holes: set[int] = set()  # ids below _next whose record was missing, not forgotten
        self._finished: set[int] = set()  # ids forgotten before the index reached them
        # this generation's chain length from each task, per pair of estimators (estimate, frontier)
        self._memos: dict[tuple[Any, Any], dict[int, float]] = {}
        self._fathered: list[int] = []  # parents in the order they gained a child (fathered_since)
        self._fathered_base = 0  # the position of _fathered[0] since the graph began

    def children(self, task_id: int) -> list[tuple[int, str]]:
        """The pending tasks ``(id, func_name)`` that depend on ``task_id``, in submission order."""
        with self._lock:
            self._index_new()
            return [(kid, self._names[kid]) for kid in self._children.get(task_id, ()) if kid in self._names]

    def tail(self, task_id: int, estimate: Callable[[str], float], frontier: Callable[[str], float]) -> float:
        """Seconds on the longest chain of pending descendants of ``task_id``, itself excluded.

        Parameters
        ----------
        task_id : int
            A task being launched.
        estimate : callable
            ``estimate(func_name)``: seconds one task of that app is expected to run.
        frontier : callable
            ``frontier(func_name)``: seconds expected after a task of that app whose children are
            not visible yet (a learned tail; 0 when unknown).

        Returns
        -------
        float
            ``max over children c of longest(c)``, where ``longest(c) = estimate(c) +
            max over c's children d of longest(d)``, or ``estimate(c) + frontier(c)`` when ``c``
            has no visible child. A task with no visible child gets 0.0: whether to add
            ``frontier`` of its own app is the caller's decision.

        Example
        -------
        >>> from types import SimpleNamespace
        >>> graph = PendingGraph(SimpleNamespace(tasks={}, task_count=0))
        >>> graph.tail(0, estimate=lambda name: 1.0, frontier=lambda name: 0.0)
        0.0

        Notes
        -----
        Iterative: a chain of any depth costs no recursion. Memoized per generation and pair of
        callables (see the class): pass the same ones each time (bound methods of one object compare
        equal). Call :meth:`invalidate` when what they return has changed.
        """
        with self._lock:
            self._index_new()
            if len(self._memos) >= MEMOS_KEPT and (estimate, frontier) not in self._memos:
                self._new_generation()
            longest = self._memos.setdefault((estimate, frontier), {})
            chains = [self._longest_from(kid, estimate, frontier, longest)
                      for kid in self._children.get(task_id, ()) if kid in self._names]
            return max(chains, default=0.0)

    def fathered_since(self, position: int) -> tuple[list[int], int]:
        """The pending tasks that gained a child since ``position`` (0, then what the last call
        returned), in order, each once per new child, and the position to pass next. The newest
        :data:`FATHERED_KEPT` are kept; a caller further behind gets those."""
        with self._lock:
            self._index_new()
            start = max(0, position - self._fathered_base)
            return self._fathered[start:], self._fathered_base + len(self._fathered)

    def forget(self, task_id: int) -> None:
        """``task_id`` finished (result, failure or dependency failure): it is no longer pending."""
        with self._lock:
            self._names.pop(task_id, None)
            self._children.pop(task_id, None)
            for longest in self._memos.values():
                longest.pop(task_id, None)
            if task_id in self._holes:
                self._holes.discard(task_id)
            elif task_id >= self._next:
                self._finished.add(task_id)

    def invalidate(self) -> None:
        """Drop the memoized chain lengths (the estimates behind them changed)."""
        with self._lock:
            self._new_generation()

    def _new_generation(self) -> None:
        self.generation += 1
        self._memos.clear()

    def _index_new(self) -> None:
        tasks = self.dfk.tasks
        grew = False
        for task_id in sorted(self._holes):
            self.steps += 1
            record = tasks.get(task_id)
            if record is not None:
                self._holes.discard(task_id)
                grew |= self._index(task_id, record)
        end = self.dfk.task_count
        for task_id in range(self._next, end):
            self.steps += 1
            if task_id in self._finished:
                self._finished.discard(task_id)
                continue
            record = tasks.get(task_id)
            if record is None:
                self._holes.add(task_id)
            else:
                grew |= self._index(task_id, record)
        self._next = max(self._next, end)
        if len(self._holes) > HOLES_KEPT:
            dropped = sorted(self._holes)[:-HOLES_KEPT]
            self._holes.difference_update(dropped)
            logger.debug("Stopped looking for %d task ids never inserted into the DFK's table, up to %d",
                         len(dropped), dropped[-1])
        if grew:
            self._new_generation()

    def _index(self, task_id: int, record: dict) -> bool:
        """Add one record; whether it added an edge (so that some pending task's tail changed)."""
        if self._names.get(task_id) is not None:
            return False
        self._names[task_id] = record["func_name"]
        self._children.setdefault(task_id, ())
        added = False
        for parent in parent_ids(record):
            self.steps += 1
            kids = self._children.get(parent)
            if kids is None:
                if parent not in self._holes:
                    continue  # finished: this edge no longer gates anything
                self._names[parent] = None
            if kids:
                kids.append(task_id)
            else:
                self._children[parent] = [task_id]
            self._fathered.append(parent)
            added = True
        if len(self._fathered) > FATHERED_KEPT:
            self._fathered_base += len(self._fathered) - FATHERED_KEPT // 2
            del self._fathered[:len(self._fathered) - FATHERED_KEPT // 2]
        return added

    def _longest_from(self, start: int, estimate: Callable[[str], float],
                      frontier: Callable[[str], float], longest: dict[int, float]) -> float:
        """``longest(start)`` (see :meth:`tail`), by an explicit-stack post-order walk.

        A node is expanded on its first visit (its unresolved children pushed) and valued on its
        second, when every child above it on the stack has a value. A child that is expanded but
        not yet valued lies below on the stack, so it is an ancestor: that edge closes a cycle and
        is skipped.
        """
        names = self._names
        expanded: set[int] = set()
        stack = [start]
        while stack:
            node = stack[-1]
            if node in longest:
                stack.pop()
                continue
            kids = self._children.get(node, ())
            if node not in expanded:
                expanded.add(node)
                for kid in kids:
                    self.steps += 1
                    if kid in longest or kid not in names:
                        continue
                    if kid in expanded:
                        self._cycle(node, kid)
                        continue
                    stack.append(kid)
                continue
            stack.pop()
            live = [kid for kid in kids if kid in names]
            self.steps += len(kids)
            if len(live) < len(kids):
                kids[:] = live  # children finished out of order (a dependency failure): prune
            name = names[node] or ""
            after = max((longest[kid] for kid in live if kid in longest), default=None)
            longest[node] = estimate(name) + (frontier(name) if after is None else after)
        return longest[start]

    def _cycle(self, node: int, kid: int) -> None:
        if not self.cycles:
            logger.warning("Task %d depends on its own descendant %d; that edge is left out of chain lengths",
                           kid, node)
        self.cycles += 1


_sightings = threading.local()


class GraphMemoizer(Memoizer):
    """A memoizer that wraps the user's own and shows the executor each launched task's place in
    the graph.

    Parameters
    ----------
    inner : Memoizer, optional
        The memoizer that decides about cached results; :class:`~parsl.dataflow.memoization.
        BasicMemoizer` when left out. Every call of the DFK's memoizer protocol is passed to it,
        and any other attribute (``checkpoint()``, a user's own) is read from it.

    Attributes
    ----------
    memo_hits : set of int
        Ids of tasks whose result came from ``inner``: they never reach an executor.

    Notes
    -----
    Use it as ``Config(memoizer=GraphMemoizer())`` or ``GraphMemoizer(MyMemoizer(...))``, or let
    :func:`install` wrap a loaded DFK's. Nothing the graph does may break a workflow: an exception
    in it is logged once, as a warning, and ``inner``'s answer is returned as it is.
    """

    def __init__(self, inner: Memoizer | None = None):
        self.inner = inner if inner is not None else BasicMemoizer()
        self.memo_hits: set[int] = set()
        self._graph: PendingGraph | None = None
        self._graph_lock = threading.Lock()
        self._warned = False

    @classmethod
    def wrap(cls, memoizer: Memoizer | None) -> GraphMemoizer:
        """``memoizer`` itself if it is a GraphMemoizer already; else one wrapping it."""
        if isinstance(memoizer, GraphMemoizer):
            return memoizer
        return cls(memoizer)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names this class lacks; the guard keeps copy/pickle (which look up
        # dunders before __init__ ran) from recursing into a missing self.inner.
        inner = self.__dict__.get("inner")
        if inner is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(inner, name)

    @property
    def graph(self) -> PendingGraph | None:
        """The current DFK's graph, once a task has been launched."""
        return self._graph

    def start(self, *, run_dir: str, config_run_dir: str) -> None:
        self._graph = None
        self.inner.start(run_dir=run_dir, config_run_dir=config_run_dir)

    def close(self) -> None:
        self.inner.close()

    def check_memo(self, task_record: dict) -> Any:
        _sightings.pending = None
        hit = self.inner.check_memo(task_record)
        try:
            if hit:  # the DFK's own test of the answer
                self.memo_hits.add(task_record["id"])
            else:
                _sightings.pending = (self.sighting(task_record), task_record["args"])
        except Exception as error:  # noqa: BLE001 - the graph is advice; the launch goes on without it
            self._swallow(error)
        return hit

    def sighting(self, task_record: dict) -> Sighting:
        """The graph's view of ``task_record``'s task (a plain Config's first call too: runtime.driver.path_learning)."""
        return Sighting(task_id=task_record["id"], func_name=task_record["func_name"], executor=task_record["executor"],
                        parents=parent_ids(task_record), graph=self._graph_of(task_record["dfk"]))

    def update_memo_result(self, task_record: dict, r: Any) -> None:
        self.inner.update_memo_result(task_record, r)
        self._forget(task_record)

    def update_memo_exception(self, task_record: dict, e: BaseException) -> None:
        self.inner.update_memo_exception(task_record, e)
        self._forget(task_record)

    def _graph_of(self, dfk: Any) -> PendingGraph:
        with self._graph_lock:
            if self._graph is None or self._graph.dfk is not dfk:
                self._graph = PendingGraph(dfk)
            return self._graph

    def _forget(self, task_record: dict) -> None:
        try:
            graph = self._graph
            if graph is not None and graph.dfk is task_record["dfk"]:
                graph.forget(task_record["id"])
        except Exception as error:  # noqa: BLE001 - the task's completion must not fail over the graph
            self._swallow(error)

    def _swallow(self, error: Exception) -> None:
        if not self._warned:
            self._warned = True
            logger.warning("The task graph is unavailable from here on; the workflow runs unaffected "
                           "(%s: %s)", type(error).__name__, error)
        else:
            logger.debug("The task graph failed again (%s: %s)", type(error).__name__, error)


def take_sighting(executor_label: str, args: tuple) -> Sighting | None:
    """The sighting of the task this thread is submitting to ``executor_label``, taken once.

    Call it from the executor's ``submit`` with its positional ``args``. It returns the sighting
    that the memoizer left on this thread, and clears it, if that task was for this executor and
    its unwrapped args are these very objects (``launch_task`` unpacks the record's args into
    ``submit``, also when monitoring wraps the function); otherwise None, leaving it in place.
    """
    pending = getattr(_sightings, "pending", None)
    if pending is None:
        return None
    sighting, expected = pending
    if sighting.executor != executor_label or len(args) != len(expected):
        return None
    if any(given is not wanted for given, wanted in zip(args, expected)):
        return None
    _sightings.pending = None
    return sighting


def install(dfk: Any) -> bool:
    """Wrap a loaded DFK's memoizer in a :class:`GraphMemoizer`, unless it is one already.

    For a plain ``Config(executors=[ScalpelExecutor()])``, where the user named no memoizer. This
    replaces ``dfk.memoizer``, a DFK internal, and the graph reads ``dfk.tasks`` and
    ``dfk.task_count``: checked on Parsl :data:`PARSL_CHECKED`. The user's memoizer stays in
    charge of cached results.

    Returns
    -------
    bool
        True if ``dfk.memoizer`` is a GraphMemoizer now. False, after one INFO log line saying
        which attribute is missing, if the DFK lacks what this relies on; it never raises.
    """
    try:
        for name in ("memoizer", "tasks", "task_count"):
            if not hasattr(dfk, name):
                logger.info("Task graph not installed: the DFK (%s) has no attribute %r; "
                            "tasks run in arrival order", type(dfk).__name__, name)
                return False
        memoizer = dfk.memoizer
        for name in ("check_memo", "update_memo_result", "update_memo_exception", "start", "close"):
            if not callable(getattr(memoizer, name, None)):
                logger.info("Task graph not installed: the DFK's memoizer (%s) has no method %r; "
                            "tasks run in arrival order", type(memoizer).__name__, name)
                return False
        if not hasattr(dfk.tasks, "get"):
            logger.info("Task graph not installed: the DFK's tasks (%s) have no get(); tasks run in "
                        "arrival order", type(dfk.tasks).__name__)
            return False
        dfk.memoizer = GraphMemoizer.wrap(memoizer)
        return True
    except Exception as error:  # noqa: BLE001 - an unfamiliar DFK means no graph, never a failed start
        logger.info("Task graph not installed: %s: %s; tasks run in arrival order",
                    type(error).__name__, error)
        return False


def nested_future(args: Sequence[Any], kwargs: dict[str, Any]) -> str | None:
    """Which argument holds a Future inside a list, tuple, set or dict (one level down), or None: Parsl
    resolves only Futures that are arguments themselves, and a Future does not pickle.

    >>> nested_future((1, [Future()]), {}), nested_future((), {"parts": {"a": Future()}}), nested_future((1,), {})
    ('argument 2', "argument 'parts'", None)
    """
    named = [(f"argument {position}", value) for position, value in enumerate(args, start=1)]
    named += [(f"argument {name!r}", value) for name, value in kwargs.items() if name != "inputs"]
    for name, value in named:
        items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple, set)) else ()
        if any(isinstance(item, Future) for item in items):
            return name
    return None
