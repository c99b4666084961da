"""The task graph an executor reads through the memoizer: parents, pending children, chain lengths.

Most tests run real Parsl with a thread-pool executor that takes its sightings the way ours will;
the scale and race tests drive a PendingGraph over a DFK built in code (a table and a counter).
"""

import logging
import threading
from types import SimpleNamespace

import parsl
import pytest
from parsl import join_app, python_app
from parsl.config import Config
from parsl.data_provider.files import File
from parsl.dataflow.futures import AppFuture
from parsl.dataflow.memoization import BasicMemoizer
from parsl.executors.threads import ThreadPoolExecutor

from scalpel_executor.runtime.driver import graph as graph_module
from scalpel_executor.runtime.driver.graph import (
    MEMOS_KEPT,
    PARSL_CHECKED,
    GraphMemoizer,
    PendingGraph,
    Sighting,
    install,
    take_sighting,
)
from tests.runtime.helpers import GENEROUS, wait_until

LABEL = "graphs"
LOGGER = "scalpel_executor.runtime.driver.graph"


class SightingExecutor(ThreadPoolExecutor):
    """A thread pool that takes each task's sighting in submit, as ScalpelExecutor does."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.sightings: list[Sighting | None] = []

    def submit(self, func, resource_specification, *args, **kwargs):
        self.sightings.append(take_sighting(self.label, args))
        return super().submit(func, resource_specification, *args, **kwargs)

    def sighting_of(self, future) -> Sighting:
        found = [s for s in self.sightings if s is not None and s.task_id == future.tid]
        assert len(found) == 1, (future.tid, self.sightings)
        return found[0]


@pytest.fixture
def workflow(tmp_path):
    """``workflow(memoizer=...)`` loads a DFK with one SightingExecutor; cleaned up after the test."""
    loaded = []

    def load(memoizer=None, monitoring=None):
        executor = SightingExecutor(label=LABEL, max_threads=4)
        dfk = parsl.load(Config(executors=[executor], memoizer=memoizer, monitoring=monitoring,
                                run_dir=str(tmp_path / "runinfo")))
        loaded.append(dfk)
        return executor, dfk

    yield load
    for dfk in loaded:
        if not dfk.cleanup_called:  # a test may have cleaned up to see the memoizer closed
            dfk.cleanup()
    parsl.clear()


@python_app(executors=[LABEL])
def gated(gate, value=0):
    assert gate.wait(GENEROUS)
    return value


@python_app(executors=[LABEL])
def step(x):
    return x + 1


@python_app(executors=[LABEL])
def left(x):
    return x + 1


@python_app(executors=[LABEL])
def right(x):
    return x + 10


@python_app(executors=[LABEL])
def sink(*xs, inputs=()):
    return sum(xs) + sum(inputs)


@python_app(executors=[LABEL], cache=True)
def cached(x):
    return x * 2


@python_app(executors=[LABEL])
def write(outputs=()):
    with open(outputs[0].filepath, "w") as f:
        f.write("7")
    return 0


@python_app(executors=[LABEL])
def read(inputs=()):
    with open(inputs[0].filepath) as f:
        return int(f.read())


ESTIMATES = {"gated": 100.0, "step": 1.0, "left": 2.0, "right": 5.0, "sink": 1.0}


def estimate(name):
    return ESTIMATES[name]


def no_frontier(name):
    return 0.0


# --- parents ----------------------------------------------------------------------------------

def test_parents_of_a_chain(workflow):
    executor, _ = workflow(GraphMemoizer())
    first = step(0)
    second = step(first)
    third = step(second)
    assert third.result(GENEROUS) == 3
    assert executor.sighting_of(first).parents == ()
    assert executor.sighting_of(second).parents == (first.tid,)
    sighting = executor.sighting_of(third)
    assert sighting.parents == (second.tid,)
    assert (sighting.func_name, sighting.executor) == ("step", LABEL)


def test_parents_of_a_fan_in_through_args_inputs_and_files(workflow, tmp_path):
    executor, _ = workflow(GraphMemoizer())
    roots = [step(i) for i in range(3)]
    written = write(outputs=[File(str(tmp_path / "seven.txt"))])
    from_file = read(inputs=[written.outputs[0]])  # a DataFuture: its producer is the parent
    total = sink(roots[0], roots[1], inputs=[roots[2], roots[1]])
    assert total.result(GENEROUS) == 1 + 2 + 3 + 2
    assert from_file.result(GENEROUS) == 7
    assert executor.sighting_of(total).parents == (roots[0].tid, roots[1].tid, roots[2].tid)
    assert executor.sighting_of(from_file).parents == (written.tid,)


def test_sightings_are_taken_when_monitoring_wraps_the_function(workflow, tmp_path):
    from parsl.monitoring import MonitoringHub

    hub = MonitoringHub(logging_endpoint="sqlite:///" + str(tmp_path / "monitoring.db"),
                        resource_monitoring_interval=0)
    executor, dfk = workflow(GraphMemoizer(), monitoring=hub)
    assert dfk.monitoring.resource_monitoring_enabled  # launch_task wraps the function, adds kwargs
    first = step(0)
    second = step(first)
    assert second.result(GENEROUS) == 2
    assert executor.sighting_of(second).parents == (first.tid,)


# --- children and tails -----------------------------------------------------------------------

def test_children_and_tail_of_a_diamond(workflow):
    executor, _ = workflow(GraphMemoizer())
    gate = threading.Event()
    top = gated(gate)
    a, b = left(top), right(top)
    bottom = sink(a, b)
    try:
        assert wait_until(lambda: any(s and s.task_id == top.tid for s in executor.sightings))
        graph = executor.sighting_of(top).graph
        assert sorted(graph.children(top.tid)) == [(a.tid, "left"), (b.tid, "right")]
        assert graph.children(a.tid) == graph.children(b.tid) == [(bottom.tid, "sink")]
        assert graph.tail(top.tid, estimate, no_frontier) == 5.0 + 1.0  # through the longer arm
        assert graph.tail(a.tid, estimate, no_frontier) == 1.0
        assert graph.tail(bottom.tid, estimate, no_frontier) == 0.0  # no visible child: the caller decides
        learned = {"sink": 10.0}
        assert graph.tail(top.tid, estimate, lambda name: learned.get(name, 0.0)) == 5.0 + 1.0 + 10.0
    finally:
        gate.set()
    assert bottom.result(GENEROUS) == 1 + 10
    assert graph.children(top.tid) == [] and graph.children(a.tid) == []  # finished tasks are forgotten


def test_children_and_tail_of_a_chain(workflow):
    executor, _ = workflow(GraphMemoizer())
    gate = threading.Event()
    head = gated(gate)
    chain = [head]
    for _ in range(5):
        chain.append(step(chain[-1]))
    try:
        assert wait_until(lambda: any(s and s.task_id == head.tid for s in executor.sightings))
        graph = executor.sighting_of(head).graph
        assert graph.children(head.tid) == [(chain[1].tid, "step")]
        assert graph.tail(head.tid, estimate, no_frontier) == 5.0
        assert graph.tail(chain[3].tid, estimate, no_frontier) == 2.0
        assert graph.tail(chain[-1].tid, estimate, lambda name: 7.0) == 0.0
        assert graph.tail(chain[-2].tid, estimate, lambda name: 7.0) == 1.0 + 7.0
    finally:
        gate.set()
    assert chain[-1].result(GENEROUS) == 5
    taken = [s for s in executor.sightings if s is not None]
    # every task's sighting, each taken by its own submit
    assert [s.task_id for s in taken] == [f.tid for f in chain]


def test_a_chain_submitted_later_is_seen_by_the_next_call(workflow):
    executor, _ = workflow(GraphMemoizer())
    gate = threading.Event()
    head = gated(gate)
    try:
        assert wait_until(lambda: any(s and s.task_id == head.tid for s in executor.sightings))
        graph = executor.sighting_of(head).graph
        assert graph.tail(head.tid, estimate, no_frontier) == 0.0
        generation = graph.generation
        after = step(step(head))
        assert graph.tail(head.tid, estimate, no_frontier) == 2.0
        assert graph.generation > generation
    finally:
        gate.set()
    assert after.result(GENEROUS) == 2


# --- the memoizer's contract ------------------------------------------------------------------

def test_a_memoized_hit_is_recorded_and_leaves_no_sighting(workflow):
    memoizer = GraphMemoizer()
    executor, _ = workflow(memoizer)
    first = cached(21)
    assert first.result(GENEROUS) == 42
    again = cached(21)
    assert again.result(GENEROUS) == 42
    assert again.tid in memoizer.memo_hits and first.tid not in memoizer.memo_hits
    assert [s.task_id for s in executor.sightings if s is not None] == [first.tid]
    assert take_sighting(LABEL, (21,)) is None


class CountingMemoizer(BasicMemoizer):
    """A user's own memoizer: counts what the DFK asked of it."""

    def __init__(self):
        super().__init__()
        self.asked = 0
        self.told = 0
        self.started = self.closed = False

    def start(self, *, run_dir, config_run_dir):
        self.started = True
        super().start(run_dir=run_dir, config_run_dir=config_run_dir)

    def check_memo(self, task):
        self.asked += 1
        return super().check_memo(task)

    def update_memo_result(self, task, r):
        self.told += 1
        super().update_memo_result(task, r)

    def close(self):
        self.closed = True
        super().close()


def test_the_users_memoizer_is_wrapped_not_replaced(workflow):
    users = CountingMemoizer()
    memoizer = GraphMemoizer(users)
    _, dfk = workflow(memoizer)
    assert dfk.memoizer is memoizer and users.started
    assert cached(1).result(GENEROUS) == 2
    assert cached(1).result(GENEROUS) == 2
    assert step(step(0)).result(GENEROUS) == 2
    assert (users.asked, users.told) == (4, 4)
    assert len(memoizer.memo_hits) == 1
    assert memoizer.asked == 4  # anything else is read from the user's memoizer
    memoizer.checkpoint()  # BasicMemoizer's manual checkpoint, through the wrapper
    assert GraphMemoizer.wrap(memoizer) is memoizer
    assert isinstance(GraphMemoizer.wrap(users), GraphMemoizer) and GraphMemoizer.wrap(users).inner is users
    dfk.cleanup()
    assert users.closed


@join_app
def joined(x):
    return step(x)


def test_a_join_apps_sighting_is_not_taken_by_another_executor(workflow):
    executor, _ = workflow(GraphMemoizer())
    outer = joined(step(0))
    assert outer.result(GENEROUS) == 2
    taken = [s for s in executor.sightings if s is not None]
    assert all(s.executor == LABEL for s in taken)
    assert "joined" not in {s.func_name for s in taken}
    assert [s.func_name for s in taken] == ["step", "step"]


def test_a_sighting_is_taken_only_by_its_executor_and_its_call():
    memoizer = GraphMemoizer()
    first, second = object(), object()
    dfk = SimpleNamespace(tasks={}, task_count=0)
    record = {"id": 9, "func_name": "inner", "executor": "_parsl_internal", "depends": [], "dfk": dfk,
              "args": [first, second], "memoize": False}
    assert memoizer.check_memo(record) is None
    assert take_sighting(LABEL, (first, second)) is None  # another executor's task
    assert take_sighting("_parsl_internal", (first, object())) is None  # another call
    assert take_sighting("_parsl_internal", (first,)) is None
    sighting = take_sighting("_parsl_internal", (first, second))
    assert (sighting.task_id, sighting.func_name, sighting.parents) == (9, "inner", ())
    assert take_sighting("_parsl_internal", (first, second)) is None  # taken once


def test_a_sighting_is_left_on_its_own_thread():
    memoizer = GraphMemoizer()
    args = [object()]
    record = {"id": 1, "func_name": "f", "executor": LABEL, "depends": [],
              "dfk": SimpleNamespace(tasks={}, task_count=0), "args": args, "memoize": False}
    memoizer.check_memo(record)
    elsewhere = []
    thread = threading.Thread(target=lambda: elsewhere.append(take_sighting(LABEL, tuple(args))))
    thread.start()
    thread.join()
    assert elsewhere == [None]
    assert take_sighting(LABEL, tuple(args)).task_id == 1


def test_a_failing_graph_leaves_results_right_and_warns_once(workflow, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("graph broke")

    monkeypatch.setattr(graph_module, "parent_ids", broken)
    monkeypatch.setattr(PendingGraph, "forget", broken)
    memoizer = GraphMemoizer()
    executor, _ = workflow(memoizer)
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        chain = step(step(step(0)))
        assert chain.result(GENEROUS) == 3
        assert cached(5).result(GENEROUS) == 10
        assert cached(5).result(GENEROUS) == 10
    warnings = [r for r in caplog.records if r.name == LOGGER and r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "graph broke" in warnings[0].getMessage()
    assert executor.sightings and all(s is None for s in executor.sightings)
    assert len(memoizer.memo_hits) == 1


# --- install ----------------------------------------------------------------------------------

def test_install_wraps_a_loaded_dfks_memoizer_once(workflow):
    executor, dfk = workflow()
    original = dfk.memoizer
    assert not isinstance(original, GraphMemoizer)
    assert install(dfk)
    assert isinstance(dfk.memoizer, GraphMemoizer) and dfk.memoizer.inner is original
    wrapped = dfk.memoizer
    assert install(dfk) and dfk.memoizer is wrapped
    done = step(step(1))
    assert done.result(GENEROUS) == 3
    assert [s.task_id for s in executor.sightings if s is not None] == [done.tid - 1, done.tid]


def test_install_declines_what_it_does_not_recognise(caplog):
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert install(object()) is False
        assert install(SimpleNamespace(memoizer=BasicMemoizer(), tasks={})) is False
        assert install(SimpleNamespace(memoizer=object(), tasks={}, task_count=0)) is False
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert len(lines) == 3
    assert "'memoizer'" in lines[0] and "'task_count'" in lines[1] and "'check_memo'" in lines[2]


def test_parsl_version_was_checked():
    """A Parsl upgrade fails here: re-read launch_task, submit, wipe_task and the memoizer protocol."""
    assert parsl.__version__ in PARSL_CHECKED


# --- scale, holes and cycles, on a DFK built in code -------------------------------------------

class TableDFK:
    """What the graph reads of a DFK: the table of task records and the id counter."""

    def __init__(self):
        self.tasks = {}
        self.task_count = 0
        self.futures = {}

    def reserve(self) -> int:
        """``submit``'s first step: an id, with no record in the table yet."""
        self.task_count += 1
        return self.task_count - 1

    def insert(self, task_id, name, parents=()):
        record = {"id": task_id, "func_name": name, "dfk": self,
                  "depends": [self.futures[p] for p in parents]}
        self.futures[task_id] = AppFuture(record)
        self.tasks[task_id] = record
        return task_id

    def submit(self, name, parents=()):
        return self.insert(self.reserve(), name, parents)


N = 10_000


def test_a_deep_chain_costs_linear_work_and_no_recursion():
    dfk = TableDFK()
    graph = PendingGraph(dfk)
    chain = [dfk.submit("step")]
    for _ in range(N - 1):
        chain.append(dfk.submit("step", [chain[-1]]))
    tails = []
    for task_id in chain:  # each task launched after its parent finished, as the DFK does
        tails.append(graph.tail(task_id, estimate, no_frontier))
        graph.children(task_id)
        graph.forget(task_id)
        del dfk.tasks[task_id]
    assert tails[0] == N - 1 and tails[N // 2] == N - 1 - N // 2 and tails[-1] == 0.0
    assert graph.steps < 10 * N, graph.steps


def test_a_wide_fan_in_costs_linear_work():
    dfk = TableDFK()
    graph = PendingGraph(dfk)
    roots = [dfk.submit("step") for _ in range(N)]
    dfk.submit("sink", roots)
    for task_id in roots:
        assert graph.tail(task_id, estimate, lambda name: 3.0) == 1.0 + 3.0
        graph.forget(task_id)
        del dfk.tasks[task_id]
    assert graph.steps < 10 * N, graph.steps


def test_a_fan_in_launched_while_roots_are_still_submitted_costs_linear_work():
    dfk = TableDFK()
    graph = PendingGraph(dfk)
    roots = []
    for _ in range(N):
        roots.append(dfk.submit("step"))
        assert graph.tail(roots[-1], estimate, no_frontier) == 0.0
    dfk.submit("sink", roots)
    assert graph.tail(roots[0], estimate, no_frontier) == 1.0
    assert graph.steps < 10 * N, graph.steps


def test_a_record_inserted_after_its_id_was_counted_is_found():
    dfk = TableDFK()
    graph = PendingGraph(dfk)
    parent = dfk.submit("gated")
    child = dfk.reserve()  # submit is half way: counted, not in the table
    assert graph.children(parent) == []
    dfk.insert(child, "step", [parent])
    assert graph.children(parent) == [(child, "step")]
    assert graph.tail(parent, estimate, no_frontier) == 1.0


def test_ids_finished_before_they_were_indexed_are_not_looked_for_again():
    dfk = TableDFK()
    graph = PendingGraph(dfk)
    finished = [dfk.submit("step") for _ in range(50)]
    for task_id in finished:  # finished and wiped between two calls
        graph.forget(task_id)
        del dfk.tasks[task_id]
    graph.children(0)
    wiped_unseen = dfk.submit("step")
    graph.children(0)
    graph.forget(wiped_unseen)
    del dfk.tasks[wiped_unseen]
    before = graph.steps
    for _ in range(100):
        graph.children(0)
    assert graph.steps == before


def test_ids_never_inserted_are_looked_for_a_bounded_number_of_times():
    dfk = TableDFK()
    graph = PendingGraph(dfk)
    for _ in range(5 * graph_module.HOLES_KEPT):
        dfk.reserve()  # submits that raised after counting
    graph.children(0)
    before = graph.steps
    graph.children(0)
    assert graph.steps - before <= graph_module.HOLES_KEPT


def test_a_cycle_ends_with_a_warning(caplog):
    dfk = TableDFK()
    graph = PendingGraph(dfk)
    a, b = dfk.reserve(), dfk.reserve()
    graph.children(a)  # both ids counted, neither record there yet: either may be the other's parent
    dfk.futures[a] = AppFuture({"id": a, "dfk": dfk})
    dfk.futures[b] = AppFuture({"id": b, "dfk": dfk})
    dfk.insert(a, "left", [b])
    dfk.insert(b, "right", [a])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert graph.tail(a, estimate, no_frontier) == 5.0 + 2.0
    assert graph.cycles == 1
    assert len([r for r in caplog.records if r.name == LOGGER]) == 1


def test_each_pair_of_estimators_keeps_its_memo_until_too_many_or_invalidate():
    dfk = TableDFK()
    graph = PendingGraph(dfk)
    head = dfk.submit("gated")
    dfk.submit("step", [head])
    assert graph.tail(head, estimate, no_frontier) == 1.0
    generation = graph.generation
    assert graph.tail(head, estimate, no_frontier) == 1.0 and graph.generation == generation
    wide = dict(ESTIMATES, step=4.0)
    for _ in range(3):  # the executor's two tails, as tasks ran and at the widest, asked in turn
        assert graph.tail(head, wide.__getitem__, no_frontier) == 4.0
        assert graph.tail(head, estimate, no_frontier) == 1.0
    assert graph.generation == generation
    others = [dict(ESTIMATES, step=float(n)) for n in range(5, 5 + MEMOS_KEPT)]
    assert [graph.tail(head, other.__getitem__, no_frontier) for other in others] == [o["step"] for o in others]
    assert graph.generation > generation  # more pairs than kept: the memos start again
    generation = graph.generation
    graph.invalidate()
    assert graph.generation > generation


def test_concurrent_readers_and_writers_agree():
    dfk = TableDFK()
    graph = PendingGraph(dfk)
    head = dfk.submit("gated")
    errors = []

    def read():
        try:
            for _ in range(2_000):
                graph.tail(head, estimate, no_frontier)
                graph.children(head)
        except Exception as error:  # noqa: BLE001 - any of them fails the test below
            errors.append(error)

    readers = [threading.Thread(target=read) for _ in range(4)]
    for reader in readers:
        reader.start()
    last = head
    for _ in range(1_000):
        last = dfk.submit("step", [last])
    for reader in readers:
        reader.join()
    assert not errors
    assert graph.tail(head, estimate, no_frontier) == 1_000.0



def test_the_edge_log_names_each_parent_once_per_new_child_from_where_a_reader_left_off():
    """``fathered_since``: what a reader that keeps tasks told no chain reads at each submit, the
    parents that gained a child since its last call, so a fan-in over N roots costs it O(N) in all."""
    from scalpel_executor.runtime.driver import graph as graph_module
    dfk = TableDFK()
    graph = PendingGraph(dfk)
    roots = [dfk.submit("step") for _ in range(3)]
    assert graph.fathered_since(0) == ([], 0)
    sink = dfk.submit("sink", roots)
    parents, at = graph.fathered_since(0)
    assert parents == roots and at == 3
    dfk.submit("step", [sink])
    dfk.submit("step")  # no parent: no edge
    assert graph.fathered_since(at) == ([sink], 4)
    assert graph.fathered_since(4) == ([], 4)
    many = [dfk.submit("step") for _ in range(graph_module.FATHERED_KEPT)]
    dfk.submit("sink", many)
    parents, end = graph.fathered_since(4)  # a reader far behind gets the newest kept
    assert end == 4 + graph_module.FATHERED_KEPT and parents == many[-len(parents):]
    assert graph_module.FATHERED_KEPT // 2 <= len(parents) <= graph_module.FATHERED_KEPT
