"""A malleable task on the live side: its width and why ride in its outcome's stats."""

import pytest

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
    assert "widest" not in placed  # given no domain sizes
    start.task.payload.domain = 0
    assert _placement(start.task, [4])["widest"] == 4 and _placement(start.task, [2])["widest"] == 4  # never below
    fixed = Task(2, cores=2, payload=Job(b"call"))
    assert "width" not in _placement(fixed) and "width_reason" not in _placement(fixed)


def test_a_real_run_keeps_a_malleable_keys_reading_and_the_next_run_starts_from_it(tmp_path):
    """A lone malleable task of a key never run is explored, its run time the prior's guess, but
    its wider run is not read against the guess and nothing lands in the profile store (a
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
            assert task["width"] == 2 and task["width_reason"] in (EXPLORING, PLANNED_EXPLORATION)
            assert kept is None
        elif run == 1:
            assert task["width"] == 2 and task["width_reason"] in (EXPLORING, PLANNED_EXPLORATION)
            assert kept is not None and kept.readings == 1 and 0 <= kept.serial_fraction <= 1
    # one reading is not yet sure (widths.SURE_AFTER): the third run explores again, or, where that
    # reading already says two cores pay (seen on a busy host), starts wide for the tail; either
    # way at two cores, and its reading joins the one it started from
    assert rows[2][0]["width"] == 2 and rows[2][0]["width_reason"] in (EXPLORING, PLANNED_EXPLORATION, TAIL)
    assert kept is not None and kept.readings == 2


def test_a_malleable_tasks_chain_counts_it_at_its_widest_by_its_keys_speed_up(tmp_path):
    """A chain at the widest (what the width rule weighs) counts a malleable task at its widest
    width by its key's speed-up (the width rule widens it where its end decides the work's): the
    run time at the widest this run stores for a malleable app is its tasks' wall times taken to
    two cores by Amdahl's law, and its run time as they ran (what orders tasks) their mean wall
    time; a fixed app's are both its wall time. Six analyses on two cores, none with a chain after
    it: many wait, so some run on one core."""
    import parsl
    from parsl.app.app import python_app

    from scalpel_executor import scalpel_config
    from scalpel_executor.core.widths import amdahl
    from scalpel_executor.learning.critical_path import APP_PREFIX, CriticalPathStore
    from scalpel_executor.learning.store import Observation, ProfileStore

    @python_app
    def prepare():
        return 1

    @python_app
    def analyse(x, seed, parsl_resource_specification=None):
        import time
        end = time.monotonic() + 0.3
        while time.monotonic() < end:
            pass
        return {"seed": seed, "value": x + seed}

    path = tmp_path / "profiles.sqlite"
    with ProfileStore(path) as store:  # an earlier run read the key's serial fraction as 0.3, 8 times
        store.record([Observation("analyse", "analyse", runtime=0.3, serial=0.3)] * 8)
    dfk = parsl.load(scalpel_config(run_dir=str(tmp_path / "run"), profiles=str(path), topology="1x2:32MiB"))
    try:
        x = prepare()
        spec = {"max_cores": 2, "profile_key": "analyse"}
        results = [analyse(x, seed, parsl_resource_specification=spec) for seed in range(6)]
        assert [result.result()["value"] for result in results] == [1, 2, 3, 4, 5, 6]
        report = dfk.executors["scalpel"].run_report()
    finally:
        dfk.cleanup()
        parsl.clear()
    rows = [row for row in report["tasks"] if row["profile_key"] == "analyse"]
    assert len(rows) == 6
    assert any(row["width"] == 1 for row in rows), f"six waiting on two cores, yet none ran on one: {rows}"
    learned = CriticalPathStore(path).rows(APP_PREFIX)
    stored = learned[APP_PREFIX + "analyse"].widest[1]

    def counted(serial):  # the mean wall time, a task on one core taken to two by ``serial``
        return sum(row["measured_runtime"] * (amdahl(serial, 2) if row["width"] == 1 else 1.0)
                   for row in rows) / len(rows)

    # the key's fit starts at the store's 0.32 and rises as the busy loop's readings at two cores
    # (about 1) join it, to 0.61 at most with six: its wall times counted between those
    assert counted(0.3) * 0.99 < stored < counted(0.62) * 1.01 < counted(1.0)
    assert learned[APP_PREFIX + "analyse"].runtime == pytest.approx(counted(1.0), rel=0.01)  # as they ran
    (prepared,) = [row for row in report["tasks"] if ".prepare(" in row["profile_key"]]
    assert learned[APP_PREFIX + "prepare"].widest[1] == learned[APP_PREFIX + "prepare"].runtime == pytest.approx(
        prepared["measured_runtime"], rel=0.01)


def test_a_max_cores_above_the_widest_domain_is_capped_there_said_once_and_the_task_runs(tmp_path, caplog, capfd):
    """A workflow written for a node (``max_cores=64``) runs on a smaller one: its malleable tasks
    start on at most the widest domain's cores, as a provider's node caps them, with one warning per
    ``max_cores`` (one of more cores than a domain is said to keep them), on the terminal as well
    as in the log, where a notebook's user reads it; ``max_cores`` below
    ``cores`` is still refused, and so is a task of more cores than the node, with no word of a cap."""
    import logging

    import parsl
    from parsl.app.app import python_app
    from parsl.config import Config

    from scalpel_executor import ScalpelExecutor
    from scalpel_executor.learning.hints import InvalidHint
    from scalpel_executor.runtime.logs import SUMMARY_LOGGER
    from scalpel_executor.runtime.node.fit import ResourcesUnavailable

    @python_app
    def square(x, parsl_resource_specification=None):
        return {"x": x, "square": x * x}

    executor = ScalpelExecutor(label="scalpel", topology="2x2:32MiB", profiles=str(tmp_path / "p.sqlite"))
    dfk = parsl.load(Config(executors=[executor], run_dir=str(tmp_path / "runinfo"), strategy="none"))
    try:
        with caplog.at_level(logging.WARNING, logger=SUMMARY_LOGGER):
            futures = [square(x, parsl_resource_specification={"max_cores": 64}) for x in range(4)]
            assert [f.result()["square"] for f in futures] == [0, 1, 4, 9]
            with pytest.raises(ResourcesUnavailable, match="asks for 8 cores; this node has 4"):
                square(6, parsl_resource_specification={"cores": 8, "max_cores": 16}).result()
            assert square(7, parsl_resource_specification={"cores": 3, "max_cores": 8}).result()["square"] == 49
        capped = [r.getMessage() for r in caplog.records if r.name == SUMMARY_LOGGER and "max_cores" in r.getMessage()]
        assert capped == ["malleable tasks of up to 64 cores (max_cores) start on at most 2 here: a malleable task "
                          "runs on cores of one LLC domain, and this node's widest has 2",
                          "malleable tasks of up to 8 cores (max_cores) start on their 3 (cores) here: a malleable "
                          "task widens only within one LLC domain, and this node's widest has 2"]
        terminal = capfd.readouterr().err
        assert all(terminal.count(message) == 1 for message in capped), terminal[-2000:]
        widths = [task["width"] for task in executor.run_report()["tasks"] if task.get("width")]
        assert sorted(widths)[-1] == 3 and all(1 <= width <= 2 for width in sorted(widths)[:-1]), widths
        with pytest.raises(InvalidHint, match=r"'max_cores': must be at least 'cores' \(2\), got 1"):
            square(5, parsl_resource_specification={"cores": 2, "max_cores": 1}).result()
    finally:
        dfk.cleanup()
        parsl.clear()


@pytest.mark.parametrize("named", [False, True])
def test_a_new_value_of_a_swept_app_borrows_the_speed_up_measured_for_another(tmp_path, named):
    """A store holds three readings (s = 0.05) for ``relax`` at one damping value; a run of another
    value, a key never seen, reaches the node manager's scheduler with its family's readings, and,
    alone on two cores, starts on both for its own end, sure of its speed-up: not to explore it.
    Under a named key (``profile_key``) there is no family: the same call explores."""
    import parsl
    from parsl.app.app import python_app

    from scalpel_executor import scalpel_config
    from scalpel_executor.learning.keys import app_name, profile_keys
    from scalpel_executor.learning.store import Observation, ProfileStore

    @python_app
    def relax(n, alpha, parsl_resource_specification=None):
        import time
        end = time.monotonic() + 0.2
        while time.monotonic() < end:
            pass
        return {"alpha": alpha, "value": n * alpha}

    measured = profile_keys(relax.func, (64, 0.5)).shape
    path = tmp_path / "profiles.sqlite"
    with ProfileStore(path) as store:
        store.record([Observation("mine" if named else measured, app_name(relax.func), runtime=0.2, serial=0.05)] * 3)
    dfk = parsl.load(scalpel_config(run_dir=str(tmp_path / "run"), profiles=str(path), topology="1x2:32MiB"))
    try:
        spec = {"max_cores": 2, **({"profile_key": "other"} if named else {})}
        assert relax(64, 3.0, parsl_resource_specification=spec).result() == {"alpha": 3.0, "value": 192.0}
        [row] = dfk.executors["scalpel"].run_report()["tasks"]
    finally:
        dfk.cleanup()
        parsl.clear()
    assert row["profile_key"] != measured and row["width"] == 2
    if named:
        assert row["width_reason"] in (EXPLORING, PLANNED_EXPLORATION)
    else:
        assert row["width_reason"] not in (EXPLORING, PLANNED_EXPLORATION, NO_SPEEDUP), row
