"""Tails learned from a run's graph and kept across runs (learning.critical_path), on real SQLite."""

import gc
import json
import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.learning.critical_path import (ALPHA, APP_PREFIX, GRAPH, LEARNED, CriticalPathStore, Learned, _Node,
                                                     RunGraph, Tails, describe)


def _chain(graph: RunGraph, walls=(0.1, 2.0, 3.0), ok=(True, True, True)) -> None:
    """prepare (1) -> analyse (2) -> report (3), and an independent simulate (4)."""
    for task_id, (key, app), parents in [(1, ("m.prepare()", "prepare"), ()), (2, ("m.analyse(num)", "analyse"), (1,)),
                                         (3, ("m.report(num)", "report"), (2,))]:
        graph.launched(task_id, key, app, parents)
    graph.launched(4, "m.simulate(n<16)", "simulate", ())
    for task_id, wall, good in zip((1, 2, 3), walls, ok):
        graph.ended(task_id, wall, good)
    graph.ended(4, 9.0, True)


def test_a_run_teaches_each_key_the_chain_below_its_tasks():
    graph = RunGraph()
    _chain(graph)
    learned = graph.learned()
    assert learned["m.prepare()"].tail == pytest.approx(5.0)
    assert learned["m.prepare()"].children == ("m.analyse(num)",)
    assert learned["m.analyse(num)"].tail == pytest.approx(3.0)
    assert learned["m.report(num)"].tail == 0.0
    assert learned["m.simulate(n<16)"].tail == 0.0 and learned["m.simulate(n<16)"].runtime == 9.0
    assert learned[APP_PREFIX + "analyse"].runtime == pytest.approx(2.0)


def test_a_failed_task_teaches_its_key_nothing_and_a_retry_counts_once():
    graph = RunGraph()
    _chain(graph, ok=(False, True, True))
    assert "m.prepare()" not in graph.learned()  # its children never ran: its tail would read 0
    graph = RunGraph()
    _chain(graph)
    graph.launched(2, "m.analyse(num)", "analyse", (1,))  # a retry of task 2: the latest try counts
    graph.ended(2, 4.0, True)
    assert graph.learned()["m.prepare()"].tail == pytest.approx(7.0)
    assert graph.learned()["m.analyse(num)"].tasks == 1


def test_a_memoized_parent_is_not_a_node_but_its_children_learn():
    graph = RunGraph()
    graph.launched(5, "m.analyse(num)", "analyse", (1,))  # task 1 came from Parsl's cache: never launched here
    graph.launched(6, "m.report(num)", "report", (5,))
    graph.ended(5, 2.0, True)
    graph.ended(6, 1.0, True)
    learned = graph.learned()
    assert "m.prepare()" not in learned and learned["m.analyse(num)"].tail == 1.0


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 10), st.lists(st.integers(0, 30), max_size=3)), min_size=1, max_size=30))
def test_learned_tails_are_never_negative_and_bounded_by_the_work_below(nodes):
    graph = RunGraph()
    for task_id, (wall, parents) in enumerate(nodes):
        graph.launched(task_id, f"k{task_id % 3}", "app", [p for p in parents if p < task_id])
        graph.ended(task_id, wall, True)
    total = sum(wall for wall, _ in nodes)
    for learned in graph.learned().values():
        assert 0.0 <= learned.tail <= total + 1e-9


def test_the_store_folds_each_run_in_and_survives_a_hand_edited_row(tmp_path):
    path = tmp_path / "profiles.db"
    store = CriticalPathStore(path)
    store.record({"k": Learned(4.0, 1.0, ("c",), 2)})
    store.record({"k": Learned(8.0, 3.0, ("d",), 1)})
    row = store.get(["k"])["k"]
    assert row.tail == pytest.approx(ALPHA * 8.0 + (1 - ALPHA) * 4.0) and row.runs == 2 and row.tasks == 3
    assert row.children == ("d", "c")
    store.close()
    with sqlite3.connect(path) as connection:
        connection.execute("INSERT INTO key_tails (key, tail, runtime, children, tasks, runs, updated) "
                           "VALUES ('bad', 'x', 1, 'not json', 1, 1, 0)")
    store = CriticalPathStore(path)
    assert "bad" not in store.get(["bad", "k"]) and "k" in store.rows()
    store.close()


def test_an_unusable_file_warns_once_and_keeps_the_run_in_memory(tmp_path, caplog):
    path = tmp_path / "profiles.db"
    path.write_bytes(b"this is not a database" * 100)
    store = CriticalPathStore(path)
    assert store.problem is not None
    store.record({"k": Learned(1.0, 1.0)})
    assert store.get(["k"])["k"].tail == 1.0
    assert sum("critical paths cannot be kept" in r.message for r in caplog.records) == 1


class _Graph:
    """A pending graph as runtime.driver.graph shows it: children per task, the tail of the visible chain."""

    def __init__(self, children, seconds):
        self._children, self._seconds = children, seconds

    def children(self, task_id):
        return self._children.get(task_id, [])

    def tail(self, task_id, estimate, frontier):
        return self._seconds if not self._children.get(task_id) else estimate("analyse") + frontier("analyse")


class _Sighting:
    def __init__(self, task_id, graph, parents=()):
        self.task_id, self.graph, self.parents, self.func_name = task_id, graph, parents, "prepare"


def test_the_graph_wins_over_a_stale_learned_tail_and_the_learned_one_fills_in_without_a_graph():
    store = CriticalPathStore(None)
    store.record({"m.prepare()": Learned(100.0, 0.1)})  # learned when the workflow had a longer chain
    tails = Tails(store, default_runtime=1.0)
    seen = _Sighting(1, _Graph({1: [(2, "analyse")]}, 3.0))
    assert tails.tail(seen, "m.prepare()", "prepare") == (1.0, 1.0, GRAPH)  # the default run time, no frontier
    assert tails.tail(None, "m.prepare()", "prepare") == (100.0, 100.0, LEARNED)  # no graph: earlier runs'
    assert tails.tail(_Sighting(7, _Graph({}, 0.0)), "m.prepare()", "prepare") == (100.0, 100.0, LEARNED)
    assert tails.tail(None, "m.unknown()", "unknown") == (0.0, 0.0, None)
    assert dict(tails.sources) == {GRAPH: 1, LEARNED: 2}


def test_each_tail_is_learned_and_told_twice_as_the_tasks_ran_and_at_their_widest(tmp_path):
    graph = RunGraph()
    for task_id, (key, app), parents in [(1, ("m.prepare()", "prepare"), ()), (2, ("m.analyse(num)", "analyse"), (1,)),
                                         (3, ("m.report(num)", "report"), (2,))]:
        graph.launched(task_id, key, app, parents)
    graph.ended(1, 0.1, True)
    graph.ended(2, 4.0, True, wide=1.0)  # malleable: on two cores it would have taken 1 s at its widest
    graph.ended(3, 3.0, True)  # not malleable: the same
    assert graph.mean_wall("analyse") == 4.0 and graph.mean_wall("analyse", wide=True) == 1.0
    learned = graph.learned()
    assert learned["m.prepare()"].tail == pytest.approx(7.0)  # as they ran: what orders its tasks
    assert learned["m.prepare()"].widest == pytest.approx((4.0, 0.1))  # what the width rule weighs
    assert learned[APP_PREFIX + "analyse"].widest[1] == 1.0 and learned[APP_PREFIX + "analyse"].runtime == 4.0
    # kept across runs, folded by ALPHA as the tail is
    store = CriticalPathStore(tmp_path / "p.sqlite")
    store.record(learned)
    store.record({"m.prepare()": Learned(5.0, 0.1, wide_tail=2.0, wide_runtime=0.1)})
    row = store.get(["m.prepare()"])["m.prepare()"]
    assert row.tail == pytest.approx(ALPHA * 5.0 + (1 - ALPHA) * 7.0)
    assert row.widest[0] == pytest.approx(ALPHA * 2.0 + (1 - ALPHA) * 4.0)
    # a later run tells a task of that key both, from the graph by its apps' run times at each, or learned
    tails = Tails(store, default_runtime=1.0)
    seen = _Sighting(10, _Graph({10: [(11, "analyse")]}, 0.0))
    assert tails.tail(seen, "m.prepare()", "prepare") == (7.0, 4.0, GRAPH)  # analyse, then its frontier
    assert tails.tail(None, "m.prepare()", "prepare") == (row.tail, row.widest[0], LEARNED)
    store.close()


def test_a_store_from_before_the_tails_at_the_widest_reads_them_as_its_tails(tmp_path):
    path = tmp_path / "profiles.db"
    with sqlite3.connect(path) as connection:  # the table as versions before wrote it
        connection.execute("CREATE TABLE key_tails (key TEXT PRIMARY KEY, tail REAL NOT NULL, runtime REAL NOT NULL, "
                           "children TEXT NOT NULL, tasks INTEGER NOT NULL, runs INTEGER NOT NULL, "
                           "updated REAL NOT NULL)")
        connection.execute("INSERT INTO key_tails VALUES ('k', 6.0, 2.0, '[]', 3, 1, 0)")
    store = CriticalPathStore(path)
    row = store.get(["k"])["k"]
    assert (row.tail, row.runtime, row.wide_tail, row.widest) == (6.0, 2.0, None, (6.0, 2.0))
    store.record({"k": Learned(4.0, 2.0, wide_tail=2.0, wide_runtime=1.0)})
    row = store.get(["k"])["k"]
    assert row.widest == pytest.approx((ALPHA * 2.0 + (1 - ALPHA) * 6.0, ALPHA * 1.0 + (1 - ALPHA) * 2.0))
    store.close()


def test_the_report_note_names_the_source():
    assert describe(0.0, None) is None
    assert "pending graph" in describe(3.0, GRAPH) and "earlier runs" in describe(3.0, LEARNED)


def test_profile_show_says_a_keys_learned_tail(tmp_path, capsys):
    from scalpel_executor.cli import main
    store = str(tmp_path / "p.sqlite")
    assert main(["profile", "import", "polybench-xeon-e5620", "--prefix", "pb/", "--store", store]) == 0
    assert main(["profile", "show", "pb/adi", "--store", store]) == 0
    assert "none learned" in capsys.readouterr().out
    tails = CriticalPathStore(store)
    tails.record({"pb/adi": Learned(12.5, 41.0, ("pb/2mm",), 3)})
    tails.close()
    assert main(["profile", "show", "pb/adi", "--store", store]) == 0
    assert "12.5 s of work waited" in capsys.readouterr().out
    assert main(["profile", "show", "pb/adi", "--store", store, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["critical_path"]["children"] == ["pb/2mm"]


def test_the_run_mean_wall_counts_succeeded_tasks_of_the_app_and_keeps_no_list_of_them():
    graph = RunGraph()
    for task_id in range(10_000):
        graph.launched(task_id, "k", "a" if task_id % 2 else "b", ())
        graph.ended(task_id, float(task_id % 7), ok=task_id % 5 != 0)
    graph.ended(10_001, 99.0, ok=True)  # never launched: not counted
    walls_a = [float(i % 7) for i in range(10_000) if i % 2 and i % 5]
    assert graph.mean_wall("a") == pytest.approx(sum(walls_a) / len(walls_a))
    assert graph.mean_wall("nosuch") is None
    # a running total per app, not the run's wall times: asked once per child at every submit
    assert all(len(kept) == 3 for kept in graph._walls.values())


def test_a_long_runs_graph_forgets_its_oldest_ended_tasks_and_keeps_those_still_running():
    graph = RunGraph(kept=100)
    graph.launched(0, "slow", "slow", ())  # never ends in this run
    for task_id in range(1, 1_001):
        graph.launched(task_id, "k", "a", (task_id - 1,))
        graph.ended(task_id, 1.0, True)
        assert len(graph) <= 125  # 1.25 x kept once tasks have ended
    assert graph.forgotten == 1_001 - len(graph) > 800
    assert _Node(*graph._nodes[0]).wall is None  # not ended: kept however old
    assert max(graph._nodes) == 1_000  # the latest are the ones kept
    learned = graph.learned()  # from the latest tasks: their chains below them
    assert learned["k"].runtime == 1.0 and learned["k"].tail > 0
    # the run's mean wall time counts every task, forgotten ones too
    assert graph.mean_wall("a") == 1.0


def test_a_run_graphs_nodes_leave_the_garbage_collectors_care():
    """Strings and numbers only: after a pass or two (its parents' tuple first) the collector no longer
    walks a node, running or ended (a node per task in flight otherwise joins every collection and
    hastens the full ones)."""
    graph = RunGraph()
    graph.launched(1, "k", "a", [])
    graph.launched(2, "k", "a", iter([1]))
    graph.ended(1, 0.5, True)
    gc.collect()
    gc.collect()
    assert not any(gc.is_tracked(node) for node in graph._nodes.values())
    assert _Node(*graph._nodes[1]) == _Node("k", "a", (), 0.5, True, 0.5)
    assert _Node(*graph._nodes[2]) == _Node("k", "a", (1,), None, False)


def test_a_run_graph_that_would_hold_too_few_tasks_is_refused():
    with pytest.raises(ValueError, match="kept=3"):
        RunGraph(kept=3)


def test_a_graph_of_tasks_that_never_end_does_not_scan_at_every_launch():
    graph = RunGraph(kept=40)
    scans = []
    forget = graph._forget
    graph._forget = lambda count: (scans.append(len(graph)), forget(count))
    for task_id in range(400):
        graph.launched(task_id, "k", "a", ())
    assert len(graph) == 400  # nothing ended: nothing forgotten
    assert len(scans) <= 400 // 10 + 1  # one look per quarter of kept launches, not one per launch
