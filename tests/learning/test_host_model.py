"""This host's contention fit: co-runs from finished tasks, kept per host in the store's file (learning.host_model)."""

import json
import logging
import random
import sqlite3

import pytest

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.simulate import SimTask, simulate
from scalpel_executor.core.domains import Topology
from scalpel_executor.core.interference import Terms
from scalpel_executor.learning import host_model
from scalpel_executor.learning.host_model import (HostInterference, HostModelStore, TaskSpan, host_id, model_report,
                                                  observe_run)

MiB = 2**20
SIZES = {"lookup16": 16, "lookup32": 32, "lookup48": 48, "gather8": 8}


def run_spans(truth, llc, seed, tasks=16):
    """A run simulated under ``truth`` on two cores, as the executor's spans: each key's solo
    time is 1 s, and the first task of each key runs alone first, so the run knows its solo time."""
    rng = random.Random(seed)
    keys = sorted(SIZES)
    solo = [SimTask(key, 1.0, SIZES[key] * MiB) for key in keys]
    batch = [SimTask(key, 1.0, SIZES[key] * MiB) for key in (rng.choice(keys) for _ in range(tasks))]
    spans, offset = [], 0.0
    for group, cores in ((solo, [0]), (batch, [0, 1])):
        records = simulate(group, [cores], llc, "fifo", model=truth).records
        spans += [TaskSpan(r.name, 0, offset + r.start, offset + r.end, r.end - r.start, r.footprint) for r in records]
        offset += max(r.end for r in records) + 1.0
    return spans


def test_a_host_is_its_name_and_its_llc_domains():
    assert host_id(Topology.from_spec("1x2:480MiB"), "node7") == "node7 1x2:480.0 MiB"
    assert host_id(Topology.from_spec("2x4"), "node7") == "node7 2x4:unknown"


def test_a_run_splits_into_solo_times_and_co_runs():
    spans = [TaskSpan("a", 0, 0.0, 1.0, 1.0, 8 * MiB),          # alone
             TaskSpan("a", 0, 2.0, 3.5, 1.5, 8 * MiB),          # beside b for 1 s
             TaskSpan("b", 0, 2.5, 3.5, 1.0, 4 * MiB),
             TaskSpan("c", 0, 2.0, 2.01, 0.01, 1 * MiB),        # too short to tell anything
             TaskSpan("d", 0, 5.0, 6.0, None, 1 * MiB, ok=False),  # failed: a co-runner, not an observation
             TaskSpan("e", 0, 5.0, 6.0, 1.0, 2 * MiB),
             TaskSpan("f", 1, 5.0, 6.0, 1.0, 2 * MiB)]          # another domain: alone
    coruns, solos = observe_run(spans)
    assert solos == {"a": [1.0], "f": [1.0]}
    assert [(c.key, c.wall) for c in coruns] == [("a", 1.5), ("b", 1.0), ("e", 1.0)]
    assert [others for _, others in coruns[0].segments] == [(1 * MiB,), (), (4 * MiB,)]
    assert [seconds for seconds, _ in coruns[0].segments] == pytest.approx([0.01, 0.49, 1.0])
    assert coruns[2].segments == ((1.0, (1 * MiB,)),)
    assert coruns[0].corunner_keys == (("c",), (), ("b",)) and coruns[2].corunner_keys == (("d",),)


def test_the_fit_is_kept_per_host_and_grows_across_runs(tmp_path):
    truth, llc = ContentionModel(0.1, 0.9), 480 * MiB  # a VM whose sysfs states 10x what its cores share
    path = tmp_path / "profiles.sqlite"
    store = HostModelStore(path)
    first = store.learn("vm 1x2:480MiB", llc, run_spans(truth, llc, 1))
    store.close()
    assert first is not None and first.observations > 0

    store = HostModelStore(path)  # the next run
    assert store.fitted("vm 1x2:480MiB") == first
    assert store.fitted("other 1x2:480MiB") is None
    second = store.learn("vm 1x2:480MiB", llc, run_spans(truth, llc, 2))
    assert second.observations > first.observations
    assert store.fitted("vm 1x2:480MiB") == second
    store.close()
    # The default (ρ 0.5 of 480 MiB) calls two 32 MiB tasks free; the fit finds what they cost here.
    two = model_report(ContentionModel(), "default", "vm", llc, second, [32 * MiB, 32 * MiB])["two_largest"]
    assert two["slowdown"] == pytest.approx(truth.slowdowns([32 * MiB] * 2, [0.9] * 2, llc)[0], rel=0.03)
    assert two["summary"] == f"on this host, two 32.0 MiB tasks together cost {two['slowdown']:.2f}x " \
                             f"(fitted from {second.observations} co-runs)"


def test_runs_that_cost_nothing_tell_the_fit_so(tmp_path):
    llc = 32 * MiB  # lookups of 26-31 MiB ran two at a time at their solo speed on a "32 MiB" host
    spans = []
    for i in range(12):
        spans += [TaskSpan("lookup", 0, 3.0 * i, 3.0 * i + 2.3, 2.3, 28 * MiB),
                  TaskSpan("lookup", 1, 3.0 * i, 3.0 * i + 2.3, 2.3, 28 * MiB)]
    spans.append(TaskSpan("lookup", 0, 100.0, 102.3, 2.3, 28 * MiB))
    spans = [TaskSpan(s.key, 0, s.start, s.end, s.wall, s.footprint) for s in spans]  # one domain
    fit = HostModelStore(None).learn("h 1x2:32MiB", llc, spans)
    assert fit.observations == 24
    assert ContentionModel().slowdowns([28 * MiB] * 2, [1.0] * 2, llc)[0] > 1.2  # the default avoids the pair
    assert host_model.pair_cost(fit.model, 28 * MiB, 28 * MiB, llc) < 1.02  # the fit stops avoiding it
    assert fit.beats_default  # and the executor plans with it


def noisy_workflow_spans(truth, llc, seed, scatter, pairs=16):
    """:func:`busy_workflow_spans`, each wall time scattered by exp(N(0, ``scatter``)) as on a loaded host."""
    rng = random.Random(seed)
    spans = busy_workflow_spans(truth, llc, seed, pairs)
    return [TaskSpan(s.key, s.domain, s.start, s.end, s.wall * rng.lognormvariate(0, scatter), s.footprint)
            for s in spans]


def test_a_fit_that_noise_could_have_given_is_not_planned_with():
    llc = 56 * MiB
    for seed in range(3):
        # Co-runs timed as the default predicts, scattered 15% as on the loaded VM: the fit
        # lands anywhere, and the default explains them as well.
        fit = HostModelStore(None).learn("h", llc, noisy_workflow_spans(ContentionModel(), llc, seed, 0.15, pairs=20))
        assert fit.observations >= host_model.MIN_OBSERVATIONS and not fit.beats_default, fit
        # A host that really differs (co-runs that cost half what the default says) tells it through the same scatter
        costly = HostModelStore(None).learn("h", llc, noisy_workflow_spans(ContentionModel(0.5, 0.3), llc, seed, 0.02,
                                                                           pairs=20))
        assert costly.beats_default, costly
    report = model_report(ContentionModel(), "default", "h", llc, fit, [40 * MiB, 40 * MiB])
    assert report["fitted"]["beats_default"] is False and report["fitted"]["default_rms_error"] > 0
    assert "the default model explains about as well" in report["two_largest"]["summary"]


def test_a_fit_stored_before_its_default_error_was_kept_is_not_planned_with(tmp_path):
    path = tmp_path / "profiles.sqlite"
    with sqlite3.connect(path) as old:  # the table as a store of 0.2.0 wrote it
        old.execute("CREATE TABLE host_fits (host TEXT PRIMARY KEY, llc REAL NOT NULL, capacity_fraction REAL NOT NULL, "
                    "sensitivity REAL NOT NULL, observations INTEGER NOT NULL, rms_error REAL NOT NULL, "
                    "updated REAL NOT NULL)")
        old.execute("INSERT INTO host_fits VALUES ('h', ?, 0.05, 0.8, 32, 0.14, 0)", (56.0 * MiB,))
    old.close()
    store = HostModelStore(path)
    fit = store.fitted("h")
    assert fit.model == ContentionModel(0.05, 0.8) and fit.default_error is None and not fit.beats_default
    refit = store.learn("h", 56 * MiB, busy_workflow_spans(ContentionModel(0.5, 0.6), 56 * MiB, 1, pairs=24))
    assert store.fitted("h") == refit and refit.default_error is not None
    store.close()


def test_the_store_keeps_the_latest_co_runs_of_a_host(tmp_path, monkeypatch):
    monkeypatch.setattr(host_model, "MAX_CORUNS", 5)
    store = HostModelStore(tmp_path / "profiles.sqlite")
    truth, llc = ContentionModel(), 64 * MiB
    for seed in range(3):
        store.learn("h", llc, run_spans(truth, llc, seed))
    coruns, solo = store.history("h")
    assert len(coruns) == 5 and store.fitted("h").observations == 5
    assert set(solo) == set(SIZES)


def test_a_store_that_cannot_be_written_never_fails_a_run(tmp_path, caplog):
    bad = tmp_path / "profiles.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    with caplog.at_level(logging.WARNING, logger="scalpel_executor"):
        store = HostModelStore(bad)
    assert store.problem and "cannot be kept" in caplog.text
    fit = store.learn("h", 64 * MiB, run_spans(ContentionModel(), 64 * MiB, 0))
    assert fit is not None and store.fitted("h") == fit  # in memory for the rest of the run


def test_rows_that_are_not_co_runs_are_skipped(tmp_path):
    path = tmp_path / "profiles.sqlite"
    HostModelStore(path).close()
    with sqlite3.connect(path) as connection:
        connection.executemany("INSERT INTO host_coruns (host, at, key, footprint, wall, segments) "
                               "VALUES (?, ?, ?, ?, ?, ?)", [
            ("h", 1.0, "a", 1.0, 1.0, "not json"), ("h", 2.0, "a", 1.0, 1.0, "[[1, [-5]]]"),
            ("h", 3.0, "a", 1.0, 1.0, '{"x": 1}'), ("h", 4.0, "a", 1.0, 1.5, "[[1.5, [1048576]]]")])
    coruns, _ = HostModelStore(path).history("h")
    assert [c.wall for c in coruns] == [1.5]


def test_the_report_names_the_model_and_where_it_came_from():
    report = model_report(ContentionModel(0.3, 2.0), "given", "h 1x2:56MiB", 56 * MiB, None, [8 * MiB, 30 * MiB, 1.0])
    assert report["source"] == "given" and report["fitted"] is None
    assert report["planned_with"] == {"capacity_fraction": 0.3, "sensitivity": 2.0}
    assert report["two_largest"]["summary"].startswith("on this host, tasks of 30.0 MiB and 8.0 MiB together cost ")
    assert report["two_largest"]["summary"].endswith("(the given model)")
    assert model_report(ContentionModel(), "default", "h", None, None, [1.0, 2.0])["two_largest"] is None


def busy_workflow_spans(truth, llc, seed, pairs=12):
    """A workflow that keeps both cores busy: every 28 MiB lookup (2 s alone) runs beside another
    lookup or beside a 1 MiB fft (0.5 s alone); no lookup ever runs alone, and every fft runs
    its whole life beside a lookup."""
    rng = random.Random(seed)
    spans, offset = [], 0.0
    for _ in range(pairs):
        partner = rng.choice([SimTask("lookup", 2.0, 28 * MiB), SimTask("fft", 0.5, 1 * MiB)])
        records = simulate([SimTask("lookup", 2.0, 28 * MiB), partner], [[0, 1]], llc, "fifo", model=truth).records
        spans += [TaskSpan(r.name, 0, offset + r.start, offset + r.end, r.end - r.start, r.footprint) for r in records]
        offset += max(r.end for r in records)  # the next pair starts as this one ends: the cores never idle
    return spans


def test_a_key_never_seen_alone_still_teaches_the_fit(tmp_path):
    truth, llc = ContentionModel(0.5, 0.6), 32 * MiB
    path, host = tmp_path / "profiles.sqlite", "h 1x2:32MiB"
    lookups = 0
    for seed in (1, 2, 3):  # three runs of the workflow
        spans = busy_workflow_spans(truth, llc, seed)
        coruns, solos = observe_run(spans)
        assert "lookup" not in solos and "fft" not in solos
        lookups += sum(c.key == "lookup" for c in coruns)
        store = HostModelStore(path)
        fit = store.learn(host, llc, spans)
        store.close()
        # The lookups' co-runs count beyond one (for their solo time); the ffts' none: each ran its
        # whole life beside a lookup, which tells its solo time and nothing of ρ, σ.
        assert fit is not None and fit.observations == lookups - 1
    assert fit.observations >= host_model.MIN_OBSERVATIONS
    assert HostModelStore(path).fitted(host) == fit
    two = host_model.pair_cost(fit.model, 28 * MiB, 28 * MiB, llc)
    assert two == pytest.approx(truth.slowdowns([28 * MiB] * 2, [0.6] * 2, llc)[0], rel=0.02)


def test_co_runs_that_tell_only_their_solo_time_are_no_fit():
    spans = [TaskSpan("fft", 0, 2.0 * i, 2.0 * i + 1.0, 1.0, 1 * MiB) for i in range(5)]
    spans += [TaskSpan("lookup", 0, 2.0 * i, 2.0 * i + 1.0, 1.3, 28 * MiB) for i in range(5)]
    assert HostModelStore(None).learn("h", 32 * MiB, spans) is None


def test_a_busy_host_is_named_with_its_load():
    assert host_model.busy_reason([0.4, 2.9], 2) is None  # two busy workers and a little more
    reason = host_model.busy_reason([1.0, 4.3], 2)
    assert reason.startswith("the host was busy with other work (load average 4.3 on 2 cores, more than 1.5 per core)")
    assert host_model.busy_reason([], 2) is None  # no load average on this platform: learn


def test_a_busy_host_is_judged_by_other_work_where_cpu_time_is_known():
    # The workflow's own threads drove the load average to 13 on 2 cores; others used a tenth of a core.
    assert host_model.busy_reason([13.1, 9.0], 2, others=0.05) is None
    reason = host_model.busy_reason([1.0], 2, others=0.9)
    assert reason.startswith("the host was busy with other work (processes outside the executor used 1.8 of its 2 "
                             "cores on average, more than 0.5 per core)"), reason


def test_recording_a_run_stores_its_co_runs_and_leaves_the_fit_stale_until_a_refit(tmp_path):
    truth, llc, host = ContentionModel(0.5, 0.6), 64 * MiB, "h 1x2:64MiB"
    store = HostModelStore(tmp_path / "profiles.sqlite")
    assert not store.stale(host)  # nothing stored: nothing to refit
    added = store.record(host, run_spans(truth, llc, 1))
    assert added == len(store.history(host)[0]) > 0
    assert store.stale(host) and store.fitted(host) is None  # stored, not fitted: shutdown's share
    fit = store.refit(host, llc)
    assert fit is not None and store.fitted(host) == fit and not store.stale(host)
    store.record(host, run_spans(truth, llc, 2))
    assert store.stale(host) and store.fitted(host) == fit  # the next run plans with the stored fit
    assert store.refit(host, llc).observations > fit.observations
    store.close()


def test_a_refit_that_finds_nothing_to_fit_is_not_started_again(tmp_path):
    store = HostModelStore(tmp_path / "profiles.sqlite")
    store.record("h", [TaskSpan("a", 0, 0.0, 1.0, 1.0, 8 * MiB)])  # a solo time, no co-run
    assert store.stale("h")
    assert store.refit("h", 64 * MiB) is None and not store.stale("h")
    store.close()


def test_the_detached_refit_fits_what_was_stored(tmp_path):
    import time

    truth, llc, host = ContentionModel(0.5, 0.6), 64 * MiB, "h 1x2:64MiB"
    path = tmp_path / "profiles.sqlite"
    store = HostModelStore(path)
    store.record(host, run_spans(truth, llc, 1))
    expected = HostModelStore(None).learn(host, llc, run_spans(truth, llc, 1))
    host_model.spawn_refit(path, host, llc, tmp_path / "refit.log")
    deadline = time.monotonic() + 60
    while store.stale(host) and time.monotonic() < deadline:
        time.sleep(0.1)
    fit, stored = store.fitted(host), store.interference(host)
    store.close()
    assert stored is not None and stored.reason.startswith("footprint-only: ")  # its choice too (a few co-runs)
    assert fit is not None and fit.observations == expected.observations, (tmp_path / "refit.log").read_text() \
        if (tmp_path / "refit.log").exists() else "no log"
    assert fit.model.capacity_fraction == pytest.approx(expected.model.capacity_fraction)
    assert not (tmp_path / "refit.log").exists()  # nothing to say: no file


def test_co_runner_keys_are_stored_beside_their_segments(tmp_path):
    spans = [TaskSpan("stream", 0, 0.0, 2.0, 2.0, 1 * MiB),
             TaskSpan("lookup", 0, 0.0, 1.0, 1.0, 8 * MiB),
             TaskSpan("fft", 0, 1.0, 2.0, 1.0, 4 * MiB)]
    path = tmp_path / "profiles.sqlite"
    store = HostModelStore(path)
    store.record("h", spans)
    store.close()
    coruns, _ = HostModelStore(path).history("h")
    assert [(c.key, c.corunner_keys) for c in coruns] == [("stream", (("lookup",), ("fft",))),
                                                          ("lookup", (("stream",),)), ("fft", (("stream",),))]
    assert coruns[0].segments == ((1.0, (8 * MiB,)), (1.0, (4 * MiB,)))


def test_co_runner_keys_that_do_not_match_their_segments_read_as_unknown(tmp_path):
    path = tmp_path / "profiles.sqlite"
    HostModelStore(path).close()
    with sqlite3.connect(path) as connection:
        connection.executemany("INSERT INTO host_coruns VALUES (?, ?, ?, ?, ?, ?, ?)", [
            ("h", 1.0, "a", 1.0, 1.5, "[[1.5, [1048576]]]", '[["b", "c"]]'),  # two keys for one co-runner
            ("h", 2.0, "a", 1.0, 1.5, "[[1.5, [1048576]]]", "not json"),
            ("h", 3.0, "a", 1.0, 1.5, "[[1.5, [1048576]]]", "[[7]]"),
            ("h", 4.0, "a", 1.0, 1.5, "[[1.5, [1048576]]]", '[["b"]]')])
    coruns, _ = HostModelStore(path).history("h")
    assert [c.corunner_keys for c in coruns] == [None, None, None, (("b",),)]


def test_a_store_written_before_co_runner_keys_opens_and_refits(tmp_path):
    path, llc, host = tmp_path / "profiles.sqlite", 64 * MiB, "h 1x2:64MiB"
    old_rows = observe_run(run_spans(ContentionModel(0.5, 0.6), llc, 1))
    with sqlite3.connect(path) as old:  # the tables as a store before co-runner keys wrote them
        old.execute("CREATE TABLE host_coruns (host TEXT NOT NULL, at REAL NOT NULL, key TEXT NOT NULL, "
                    "footprint REAL NOT NULL, wall REAL NOT NULL, segments TEXT NOT NULL)")
        old.execute("CREATE TABLE host_solo (host TEXT NOT NULL, key TEXT NOT NULL, runs INTEGER NOT NULL, "
                    "mean REAL NOT NULL, updated REAL NOT NULL, PRIMARY KEY (host, key))")
        old.executemany("INSERT INTO host_coruns VALUES (?, ?, ?, ?, ?, ?)",
                        [(host, 1.0, c.key, c.footprint, c.wall, json.dumps([[s, list(o)] for s, o in c.segments]))
                         for c in old_rows[0]])
        old.executemany("INSERT INTO host_solo VALUES (?, ?, ?, ?, 1.0)",
                        [(host, key, len(walls), sum(walls) / len(walls)) for key, walls in old_rows[1].items()])
    old.close()
    store = HostModelStore(path)
    coruns, _ = store.history(host)
    assert len(coruns) == len(old_rows[0]) and all(c.corunner_keys is None for c in coruns)
    assert store.stale(host)
    fit = store.refit(host, llc)
    assert fit is not None and store.fitted(host) == fit
    store.record(host, run_spans(ContentionModel(0.5, 0.6), llc, 2))  # new rows beside the old ones
    coruns, _ = store.history(host)
    assert coruns[0].corunner_keys is None and coruns[-1].corunner_keys is not None
    assert store.refit(host, llc).observations > fit.observations
    assert store.interference(host) is not None  # the refit chose on old and new rows together
    store.close()


#: Keys of a workflow on a 4-core domain of a 64 MiB LLC (footprints in MiB): "stream" streams
#: through memory with a 1 MiB reused set, so its footprint says it is harmless.
PLANTED = {"stream": 1, "lookup": 16, "fft": 4, "gemm": 24}


def planted_spans(pressure, seed, rounds=60, scatter=0.05, llc=64 * MiB, cores=4):
    """A host's runs simulated under the default footprint model plus per-key ``pressure`` (truth):
    each key of :data:`PLANTED` alone once (its solo time, 1 s), then ``rounds`` batches of
    ``cores`` keys drawn at random, each wall time scattered by exp(N(0, ``scatter``))."""
    rng = random.Random(seed)
    keys = sorted(PLANTED)

    def task(key):
        return SimTask(key, 1.0, PLANTED[key] * MiB, interference=(0.0, pressure[key]) if key in pressure else None)

    groups = [([task(key)], [0]) for key in keys]
    groups += [([task(rng.choice(keys)) for _ in range(cores)], list(range(cores))) for _ in range(rounds)]
    spans, offset = [], 0.0
    for group, cpus in groups:
        records = simulate(group, [cpus], llc, "fifo", model=ContentionModel()).records
        spans += [TaskSpan(r.name, 0, offset + r.start, offset + r.end, (r.end - r.start) * rng.lognormvariate(0, scatter),
                           r.footprint) for r in records]
        offset += max(r.end for r in records) + 1.0
    return spans


def test_a_refit_learns_the_pressure_of_a_streaming_key_and_stores_the_choice(tmp_path):
    path, llc = tmp_path / "profiles.sqlite", 64 * MiB
    store = HostModelStore(path)
    store.record("h", planted_spans({"stream": 0.5}, 0))
    assert store.interference("h") is None  # stored, not refitted
    fit = store.refit("h", llc)
    store.close()
    stored = HostModelStore(path).interference("h")  # what the next run reads
    assert stored.per_key and stored.reason.startswith("per-key model (refitted on all 240 co-runs): ")
    assert stored.footprint_model == (fit.model if fit.planned(llc) else ContentionModel()) and stored.llc == llc
    assert set(stored.terms) == set(PLANTED)
    assert stored.terms["stream"][1] == pytest.approx(0.5, abs=0.1)
    assert all(abs(terms.pressure) < 0.1 for key, terms in stored.terms.items() if key != "stream")


def test_a_refit_stores_each_key_s_solo_time_and_a_store_written_before_them_reads_none(tmp_path):
    path, llc = tmp_path / "profiles.sqlite", 64 * MiB
    store = HostModelStore(path)
    store.record("h", planted_spans({"stream": 0.5}, 0))
    store.refit("h", llc)
    store.close()
    stored = HostModelStore(path).interference("h")
    assert stored.per_key and set(stored.solo) == set(PLANTED)  # each key ran alone once, for 1 s
    assert all(seconds == pytest.approx(1.0, rel=0.2) for seconds in stored.solo.values())
    told = HostInterference(True, "told", ContentionModel(), float(llc), {"a": Terms(0.1, 0.2, 0.3), "b": Terms(0, 0)},
                            {"a": 2.5})
    store = HostModelStore(path)
    store.tell("h", told)
    assert store.interference("h") == told  # "b" has terms and no solo time: it keeps its estimate
    store.close()
    old = tmp_path / "old.sqlite"
    with sqlite3.connect(old) as connection:  # the table as a store before solo times wrote it
        connection.execute("CREATE TABLE host_interference (host TEXT NOT NULL, key TEXT NOT NULL, sensitivity REAL "
                           "NOT NULL, pressure REAL NOT NULL, updated REAL NOT NULL, bandwidth REAL NOT NULL DEFAULT 0, "
                           "PRIMARY KEY (host, key))")
        connection.execute("INSERT INTO host_interference VALUES ('h', 'a', 0.1, 0.2, 1.0, 0.3)")
        connection.execute("CREATE TABLE host_interference_choice (host TEXT PRIMARY KEY, model TEXT NOT NULL, reason "
                           "TEXT NOT NULL, capacity_fraction REAL NOT NULL, sensitivity REAL NOT NULL, llc REAL NOT "
                           "NULL, updated REAL NOT NULL)")
        connection.execute("INSERT INTO host_interference_choice VALUES ('h', 'per-key', 'old', 0.5, 1.0, ?, 1.0)", (llc,))
    connection.close()
    store = HostModelStore(old)
    read = store.interference("h")
    assert read.terms == {"a": Terms(0.1, 0.2, 0.3)} and read.solo == {}
    store.tell("h", told)  # and it takes them from then on
    assert store.interference("h").solo == {"a": 2.5}
    store.close()


def test_a_refit_on_noise_stores_footprint_only_and_why(tmp_path):
    path = tmp_path / "profiles.sqlite"
    store = HostModelStore(path)
    store.record("h", planted_spans({"stream": 0.5}, 0))
    store.refit("h", 64 * MiB)
    assert store.interference("h").per_key
    store.close()
    with sqlite3.connect(path) as connection:  # the host's co-runs now say nothing beyond footprints
        connection.execute("DELETE FROM host_coruns")
    store = HostModelStore(path)
    store.record("h", planted_spans({}, 0, scatter=0.15))
    store.refit("h", 64 * MiB)
    kept = store.interference("h")
    store.close()
    # The last refit chose per-key residuals: they stay, refitted on these co-runs (which teach
    # none), as footprint-only did not predict them better beyond chance.
    assert kept.per_key and kept.reason.startswith("per-key model kept (refitted on all 240 co-runs), as the last "
                                                   "refit chose it: ")
    assert all(abs(terms.pressure) < 0.2 and abs(terms.sensitivity) < 0.2 for terms in kept.terms.values())  # stream's 0.5 is gone
    with sqlite3.connect(path) as connection:  # a host no refit has chosen for
        connection.execute("DELETE FROM host_interference_choice")
    store = HostModelStore(path)
    store.refit("h", 64 * MiB)
    stored = store.interference("h")
    store.close()
    assert not stored.per_key and stored.terms == {}
    assert stored.reason.startswith("footprint-only: fitted on the older 168 co-runs") and "too few" in stored.reason
    with sqlite3.connect(path) as connection:  # the earlier per-key terms are gone
        assert connection.execute("SELECT COUNT(*) FROM host_interference").fetchone() == (0,)


def test_a_refit_on_few_co_runs_stores_footprint_only_and_says_so(tmp_path):
    store = HostModelStore(tmp_path / "profiles.sqlite")
    store.record("h", planted_spans({"stream": 0.5}, 0, rounds=4))
    store.refit("h", 64 * MiB)
    stored = store.interference("h")
    assert not stored.per_key and stored.terms == {}
    assert stored.reason == "footprint-only: 16 co-runs with known keys, too few to test a per-key model on (it needs 30)"
    store.refit("other", None)  # an LLC size unknown: nothing to be relative to, nothing stored
    assert store.interference("other") is None
    store.close()


def test_a_refit_that_cannot_open_its_lock_file_refits_and_says_so_in_its_log(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "profiles.sqlite"
    HostModelStore(path).close()
    (tmp_path / "profiles.sqlite.refit.lock").mkdir()  # a path no file can be opened at
    log = tmp_path / "refit.log"
    run = subprocess.run([sys.executable, "-m", "scalpel_executor.learning.host_model", "refit", str(path), "host", "0",
                          "--log", str(log)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "cannot open the refit lock file" in log.read_text() and "refitting without it" in log.read_text()


def test_a_refit_of_keys_only_ever_beside_their_own_kind_stores_exploration_terms(tmp_path):
    # Two cores always busy, each kind paired with its own kind only: no key was ever alone, so
    # the hold-out cannot tell any pair, and the next run is told to pair unlike keys instead.
    spans, start = [], 0.0
    for _ in range(3):
        for kind, wall in (("stream", 2.2), ("compute", 1.0), ("sensitive", 1.0)):
            for _ in range(3):
                spans += [TaskSpan(kind, 0, start, start + wall, wall, MiB), TaskSpan(kind, 0, start, start + wall, wall,
                                                                                      MiB)]
                start += wall
    store = HostModelStore(tmp_path / "profiles.sqlite")
    store.record("h", spans)
    store.refit("h", 64 * MiB)
    stored = store.interference("h")
    assert stored.per_key and stored.reason.startswith("exploring: 3 keys never seen alone")
    assert "footprint-only: " in stored.reason  # the hold-out's own sentence, in brackets
    assert {k: t.bandwidth for k, t in stored.terms.items()} == {"compute": 0.5, "sensitive": 0.0, "stream": 0.5}
    # A run that still paired each kind with its own only (it could not do otherwise): no second
    # exploration in a row; the hold-out's verdict stands.
    store.record("h", [TaskSpan(s.key, s.domain, s.start + start, s.end + start, s.wall, s.footprint) for s in spans])
    store.refit("h", 64 * MiB)
    again = store.interference("h")
    store.close()
    assert not again.per_key and again.reason.startswith("footprint-only: ") and not again.terms
