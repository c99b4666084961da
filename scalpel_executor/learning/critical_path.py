"""Which tasks gate long chains: each profile key's *tail*, seen in the pending graph and learned across runs.

A task's tail is the longest chain of work that waits for its result (its upward rank less its own
run time). The default policy starts a task with a long tail early (``Task.tail``,
:mod:`scalpel_executor.core.planning`). The executor tells it one per task, at submit::

    Parsl launches a task ─ GraphMemoizer.check_memo ─> Sighting: its Parsl id, app, parents, the DFK's
    (runtime.driver.graph)                                      pending graph (children not yet launched)
    executor.submit ────── Tails.tail(sighting, key, app) ─> seconds, the same at the widest, and their source:
       "graph":   the pending children's longest chain, each child's run time estimated by its app
                  (learned in this run, else in the store, else the executor's default_runtime), and
                  where the visible graph ends, that app's learned tail;
       "learned": no child visible (no graph: a plain Config, or none invoked yet): the key's learned tail;
       None:      neither: 0, and the task is ordered as before
    executor.shutdown ──── RunGraph.learned() ─> per key and per app, this run's mean tail of its tasks
                           (their measured wall times down the chains the run really had) and the
                           same at the widest (below) ──>
                           CriticalPathStore.record: folded into the stored values (ALPHA per run)

**Two tails: as the tasks ran, and at the widest.** Every tail is counted twice. ``tail`` (the
run's mean wall times, the tails learned, the stored run times) is the chain as its tasks ran; it
orders the tasks (``Task.tail``). ``wide_tail`` counts each malleable task in it at the time it
would take on its widest width on the cache domain it ran on (its node's word) by its key's speed-up
so far (``Estimator.at_widest``), an estimate, not a measurement; the width rule weighs it
(``Task.wide_tail``). The width rule widens a task whose end decides the work's when it arrives,
so the width it ran at beside many others overstates the chain a width must meet, and tasks waiting
for that chain were widened for an end it would not have; but a stage of many malleable tasks
cannot all run at their widest, so the chain at the widest understates what gates the tasks
before it, and they lost their place in the order (the simulator's tails count the same,
:func:`scalpel_executor.core.simulate.graph_tails`; docs/results/widths.md).

**The graph wins where it is seen.** A key whose learned tail is stale (the workflow changed
shape) or contradicts the pending graph is told what the graph shows; its learned tail counts only
where no child of the task is visible. A run's tails are learned only from the edges the graph
showed (the executor's memoizer, :func:`scalpel_executor.runtime.driver.graph.install`): without it a
run teaches nothing here, and says so in the run report.

**Counted right.** A retried task counts once (its last try's wall time); a failed task teaches
its key nothing (its children never ran, so its tail would read 0); a memoized task (Parsl's
cache) ran nowhere and teaches nothing, but its children do; a task whose children run on
another executor (a ``join_app``, another label) sees no wall time for them and counts their
chain as 0 beyond them. Keys are the profile keys (``learning.keys``), so one app in several
roles (different argument shapes) learns one tail per role; within one key the mean is kept, as
fan-out that grows with the input changes the work below a task, not its chain.
"""

from __future__ import annotations

import itertools
import json
import math
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scalpel_executor.learning.tables import SideTables

__all__ = ["Learned", "CriticalPathStore", "RunGraph", "Tails", "APP_PREFIX", "ALPHA", "CHILD_KEYS_KEPT",
           "GRAPH", "LEARNED"]

APP_PREFIX = "app:"  # rows kept per app (Parsl's func_name): what a child not yet launched is estimated by
ALPHA = 0.5  # weight of the latest run in a key's stored tail: a workflow that changed shape is followed in a few runs
CHILD_KEYS_KEPT = 8  # the child keys a key's row names, most frequent first
#: Tasks a run's graph remembers (:class:`RunGraph`); from there its oldest ended ones are forgotten, so a
#: campaign of millions of tasks holds a bounded graph and learns its tails from the latest ones.
NODES_KEPT = 200_000
GRAPH, LEARNED = "graph", "learned"  # where a task's tail came from (the run report's tail_source)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS key_tails (key TEXT PRIMARY KEY, tail REAL NOT NULL, runtime REAL NOT NULL,
    children TEXT NOT NULL, tasks INTEGER NOT NULL, runs INTEGER NOT NULL, updated REAL NOT NULL,
    wide_tail REAL, wide_runtime REAL)
"""
_COLUMNS = "key, tail, runtime, children, tasks, runs, wide_tail, wide_runtime"


@dataclass(frozen=True)
class Learned:
    """What the runs of one key (or one app: :data:`APP_PREFIX`) taught: the mean longest chain after
    its tasks (``tail``, seconds), their mean wall time, the keys of their children, how many tasks
    and runs taught it; the chain and the wall time with malleable tasks at their widest (module
    docstring; None: a row from before they were kept, read as ``tail`` and ``runtime``)."""

    tail: float
    runtime: float
    children: tuple[str, ...] = ()
    tasks: int = 0
    runs: int = 1
    wide_tail: float | None = None
    wide_runtime: float | None = None

    @property
    def widest(self) -> tuple[float, float]:
        """The chain and the wall time at the widest (``tail`` and ``runtime`` where not kept)."""
        return (self.tail if self.wide_tail is None else self.wide_tail,
                self.runtime if self.wide_runtime is None else self.wide_runtime)

    def to_dict(self) -> dict:
        wide_tail, wide_runtime = self.widest
        return {"tail": round(self.tail, 6), "runtime": round(self.runtime, 6), "children": list(self.children),
                "tasks": self.tasks, "runs": self.runs, "wide_tail": round(wide_tail, 6),
                "wide_runtime": round(wide_runtime, 6)}


class CriticalPathStore(SideTables):
    """The learned tails, in the profile store's file (table ``key_tails``)."""

    SCHEMA = _SCHEMA
    ADDED = (("key_tails", "wide_tail", "REAL"), ("key_tails", "wide_runtime", "REAL"))
    WHAT = "the learned critical paths"

    def get(self, keys: Iterable[str]) -> dict[str, Learned]:
        """The stored rows of ``keys`` (those that have one)."""
        keys = list(dict.fromkeys(keys))
        if not keys:
            return {}
        rows = self._read(lambda c: c.execute(
            f"SELECT {_COLUMNS} FROM key_tails WHERE key IN ({','.join('?' * len(keys))})", keys).fetchall())
        return {row[0]: learned for row in rows if (learned := _parse(row)) is not None}

    def rows(self, prefix: str = "") -> dict[str, Learned]:
        """Every stored row whose key starts with ``prefix``."""
        rows = self._read(lambda c: c.execute(
            f"SELECT {_COLUMNS} FROM key_tails WHERE substr(key, 1, ?) = ? ORDER BY key",
            (len(prefix), prefix)).fetchall())
        return {row[0]: learned for row in rows if (learned := _parse(row)) is not None}

    def record(self, run: Mapping[str, Learned]) -> None:
        """Fold one run's values into the stored ones (the latest weighs :data:`ALPHA`), in one transaction."""
        now = time.time()

        def fold(connection) -> None:
            stored = {row[0]: learned for row in connection.execute(
                f"SELECT {_COLUMNS} FROM key_tails WHERE key IN ({','.join('?' * len(run))})",
                list(run)).fetchall() if (learned := _parse(row)) is not None}
            for key, new in run.items():
                old = stored.get(key)
                if old is not None:
                    children = tuple(dict.fromkeys([*new.children, *old.children]))[:CHILD_KEYS_KEPT]
                    (new_wide, new_wide_runtime), (old_wide, old_wide_runtime) = new.widest, old.widest
                    new = Learned(ALPHA * new.tail + (1 - ALPHA) * old.tail,
                                  ALPHA * new.runtime + (1 - ALPHA) * old.runtime, children,
                                  old.tasks + new.tasks, old.runs + 1,
                                  ALPHA * new_wide + (1 - ALPHA) * old_wide,
                                  ALPHA * new_wide_runtime + (1 - ALPHA) * old_wide_runtime)
                connection.execute(f"INSERT OR REPLACE INTO key_tails ({_COLUMNS}, updated) "
                                   f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                   (key, new.tail, new.runtime, json.dumps(list(new.children)), new.tasks, new.runs,
                                    *new.widest, now))

        if run:
            self._run(fold)


def _parse(row: tuple) -> Learned | None:
    """A stored row, or None for one no version wrote (hand-edited: a tail that is not a number ≥ 0);
    a value at the widest that is not such a number reads as none kept."""
    _, tail, runtime, children, tasks, runs, wide_tail, wide_runtime = row
    if not all(_seconds(v) for v in (tail, runtime)):
        return None
    try:
        names = tuple(str(c) for c in json.loads(children)) if children else ()
    except (TypeError, ValueError):
        names = ()
    return Learned(float(tail), float(runtime), names, int(tasks or 0), int(runs or 1),
                   float(wide_tail) if _seconds(wide_tail) else None,
                   float(wide_runtime) if _seconds(wide_runtime) else None)


def _seconds(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value >= 0


@dataclass
class _Node:
    key: str
    app: str
    parents: tuple[int, ...]
    wall: float | None = None  # None: it has not ended (or ended by shutdown)
    ok: bool = False
    wide: float | None = None  # its wall time taken to its widest width (module docstring)


#: Where a run graph's node keeps its wall time (a node is held as a plain tuple of _Node's fields:
#: of strings and numbers only, the garbage collector stops tracking it within a pass or two, where a
#: _Node per task, kept for the run, was one more object in every collection after it).
_WALL = 3


class RunGraph:
    """The run's tasks as the graph showed them (Parsl task id, key, app, parents) and their wall
    times; thread-safe (submits on Parsl's launch threads, ends on the completion thread).

    From ``kept`` tasks on (default :data:`NODES_KEPT`) the oldest ended ones are forgotten, a quarter of
    ``kept`` at a time (amortised O(1) a launch): once they have ended, at most 1.25 × ``kept`` are
    held. Tasks not yet ended are always kept."""

    def __init__(self, kept: int = NODES_KEPT):
        if kept < 4:
            raise ValueError(f"a run graph keeps at least 4 tasks, got kept={kept!r}")
        self.kept = kept
        self.forgotten = 0  # ended tasks dropped to stay within ``kept``
        self._check_at = kept  # at this many tasks, forget
        self._nodes: dict[int, tuple] = {}  # task id -> _Node's fields
        self._lock = threading.Lock()
        self._walls: dict[str, list[float]] = {}  # by app: [total, count, total at the widest] of its wall times

    def launched(self, task_id: int, key: str, app: str, parents: Iterable[int]) -> None:
        """A task (or a retry of it: the latest try counts) was handed to the executor."""
        with self._lock:
            self._nodes[task_id] = (key, app, tuple(parents), None, False, None)
            if len(self._nodes) >= self._check_at:
                self._forget(self.kept // 4)

    def _forget(self, count: int) -> None:
        """Drop up to ``count`` of the oldest ended tasks (under the lock); the next look is a quarter
        of ``kept`` launches later, also when too few had ended (so never a scan per launch)."""
        old = list(itertools.islice((task_id for task_id, node in self._nodes.items() if node[_WALL] is not None),
                                    count))
        for task_id in old:
            del self._nodes[task_id]
        self.forgotten += len(old)
        self._check_at = max(self.kept, len(self._nodes)) + self.kept // 4

    def ended(self, task_id: int, wall: float, ok: bool, wide: float | None = None) -> None:
        """Task ``task_id`` ran ``wall`` seconds (``wide``: taken to its widest width; None: ``wall``)."""
        with self._lock:
            node = self._nodes.get(task_id)
            if node is not None:
                key, app, parents = node[:3]
                wall = max(0.0, wall)
                wide = wall if wide is None else max(0.0, wide)
                self._nodes[task_id] = (key, app, parents, wall, ok, wide)
                if ok:
                    walls = self._walls.setdefault(app, [0.0, 0, 0.0])
                    walls[0] += wall
                    walls[1] += 1
                    walls[2] += wide

    def mean_wall(self, app: str, *, wide: bool = False) -> float | None:
        """This run's mean wall time of ``app``'s succeeded tasks (``wide``: taken to their widest),
        or None. O(1): every submit whose task has children in the pending graph asks it per child
        (a sum over the run's wall times cost a two-stage pipeline of n items O(n²))."""
        with self._lock:
            walls = self._walls.get(app)
            return walls[2 if wide else 0] / walls[1] if walls else None

    def __len__(self) -> int:
        return len(self._nodes)

    def learned(self) -> dict[str, Learned]:
        """Per key, and per app (:data:`APP_PREFIX`), the mean tail and wall time of its succeeded
        tasks down the chains this run had (children ended here, their wall times)."""
        with self._lock:
            nodes = {task_id: _Node(*node) for task_id, node in self._nodes.items()}
        children: dict[int, list[int]] = defaultdict(list)
        for task_id, node in nodes.items():
            for parent in node.parents:
                if parent in nodes and parent != task_id:
                    children[parent].append(task_id)
        tail: dict[int, float] = {}
        wide: dict[int, float] = {}
        # Parsl numbers a task after every task it depends on, so descending ids are a reverse topological order.
        for task_id in sorted(nodes, reverse=True):
            after = [c for c in children[task_id] if nodes[c].ok and c > task_id]
            tail[task_id] = max((nodes[c].wall + tail[c] for c in after), default=0.0)
            wide[task_id] = max((nodes[c].wide + wide[c] for c in after), default=0.0)
        groups: dict[str, list[int]] = defaultdict(list)
        for task_id, node in nodes.items():
            if node.ok:
                groups[node.key].append(task_id)
                groups[APP_PREFIX + node.app].append(task_id)
        out = {}
        for name, members in groups.items():
            kids = Counter(nodes[c].key for m in members for c in children[m] if nodes[c].ok)
            out[name] = Learned(sum(tail[m] for m in members) / len(members),
                                sum(nodes[m].wall for m in members) / len(members),
                                tuple(k for k, _ in kids.most_common(CHILD_KEYS_KEPT)), len(members),
                                wide_tail=sum(wide[m] for m in members) / len(members),
                                wide_runtime=sum(nodes[m].wide for m in members) / len(members))
        return out


class Tails:
    """The tail each submitted task is told (module docstring): the pending graph where it shows
    children, else the key's learned tail; the run's graph kept for learning."""

    def __init__(self, store: CriticalPathStore | None, default_runtime: float):
        self.store = store
        self.default_runtime = default_runtime
        self.run = RunGraph()
        self._learned: dict[str, Learned | None] = {}  # what the store holds, read once per name
        self._lock = threading.Lock()
        self.sources: Counter = Counter()  # tasks told a tail, by source

    def _stored(self, name: str) -> Learned | None:
        with self._lock:
            if name in self._learned:
                return self._learned[name]
        row = self.store.get([name]).get(name) if self.store is not None else None
        with self._lock:
            self._learned[name] = row
        return row

    def _estimate(self, app: str) -> float:
        """A child's run time, by its app: this run's mean, else the store's, else the default."""
        wall = self.run.mean_wall(app)
        if wall is not None:
            return wall
        row = self._stored(APP_PREFIX + app)
        return row.runtime if row is not None else self.default_runtime

    def _frontier(self, app: str) -> float:
        row = self._stored(APP_PREFIX + app)
        return row.tail if row is not None else 0.0

    def _wide_estimate(self, app: str) -> float:
        """:meth:`_estimate` at the widest."""
        wall = self.run.mean_wall(app, wide=True)
        if wall is not None:
            return wall
        row = self._stored(APP_PREFIX + app)
        return row.widest[1] if row is not None else self.default_runtime

    def _wide_frontier(self, app: str) -> float:
        row = self._stored(APP_PREFIX + app)
        return row.widest[0] if row is not None else 0.0

    def tail(self, sighting, key: str, app: str) -> tuple[float, float, str | None]:
        """Seconds of the chain waiting for this task, the same at the widest (module docstring), and
        where they came from (``graph``, ``learned``, None). ``sighting``:
        :class:`scalpel_executor.runtime.driver.graph.Sighting`, or None."""
        if sighting is not None:
            self.run.launched(sighting.task_id, key, app, sighting.parents)
            if (chain := self.chain(sighting.graph, sighting.task_id)) is not None:
                self.sources[GRAPH] += 1
                return *chain, GRAPH
        row = self._stored(key)
        if row is not None and row.tail > 0:
            self.sources[LEARNED] += 1
            return row.tail, row.widest[0], LEARNED
        return 0.0, 0.0, None

    def chain(self, graph, task_id: int) -> tuple[float, float] | None:
        """Seconds of the chain ``graph`` (a :class:`~scalpel_executor.runtime.driver.graph.PendingGraph`)
        shows waiting for task ``task_id``, and the same at the widest; None while it shows no child."""
        if not graph.children(task_id):
            return None
        return (graph.tail(task_id, self._estimate, self._frontier),
                graph.tail(task_id, self._wide_estimate, self._wide_frontier))

    def learn(self) -> dict[str, Learned]:
        """Store what this run's graph taught (nothing without a graph); returns it."""
        learned = self.run.learned()
        if self.store is not None and learned:
            self.store.record(learned)
        return learned


def describe(tail: float, source: str | None) -> str | None:
    """The run report's note on a task told a tail: why it may have started ahead of longer tasks."""
    if not tail or source is None:
        return None
    where = "the pending graph" if source == GRAPH else "earlier runs of its key"
    return f"critical path: {tail:.3g} s of work waits for its result ({where})"


