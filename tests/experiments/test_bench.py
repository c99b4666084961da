"""``scalpel bench`` and ``scalpel calibrate``: statistics, oracle, plans, and a smoke run end to end.

The smoke run checks that the harness works (every peer ran, pyperf reads what it wrote, the
calibration predicts its mixes), not that any figure is reached: figures come from real runs.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core.simulate import ContentionModel, SimTask, simulate
from scalpel_executor.experiments.bench.mixes import Mix, MixRun
from scalpel_executor.experiments.bench.oracle import oracle_order, oracle_search
from scalpel_executor.experiments.bench.report import summary_table
from scalpel_executor.experiments.bench.run import run_mix
from scalpel_executor.experiments.bench.stats import bootstrap_ratio, summarise
from scalpel_executor.experiments.plans import BENCH, DEMO, SCALES, with_given
from scalpel_executor.workloads import kernels
from scalpel_executor.workloads.kernels import KernelCase, size_for_footprint

MiB = 2**20


@given(st.lists(st.floats(0.1, 100), min_size=1, max_size=9), st.floats(0.2, 5))
@settings(max_examples=60, deadline=None)
def test_a_constant_speedup_has_a_degenerate_interval(reference, factor):
    other = [x / factor for x in reference]
    ratio, low, high = bootstrap_ratio(reference, other, resamples=200)
    assert ratio == pytest.approx(factor)
    assert low == pytest.approx(factor) and high == pytest.approx(factor)


@given(st.lists(st.tuples(st.floats(0.5, 2), st.floats(0.5, 2)), min_size=2, max_size=8))
@settings(max_examples=60, deadline=None)
def test_the_interval_brackets_the_resampled_ratios_and_swaps_to_its_reciprocal(pairs):
    reference, other = [a for a, _ in pairs], [b for _, b in pairs]
    ratio, low, high = bootstrap_ratio(reference, other, resamples=300, seed=1)
    back, back_low, back_high = bootstrap_ratio(other, reference, resamples=300, seed=1)
    assert low <= high
    assert back == pytest.approx(1 / ratio)
    assert back_low == pytest.approx(1 / high) and back_high == pytest.approx(1 / low)


def test_bootstrap_refuses_unpaired_samples():
    with pytest.raises(ValueError, match="paired"):
        bootstrap_ratio([1.0, 2.0], [1.0])


def _case(kernel: str, footprint: float, steps: int) -> KernelCase:
    return KernelCase(kernel, size_for_footprint(kernel, footprint), steps)


@given(st.lists(st.tuples(st.booleans(), st.floats(0.5, 2.0)), min_size=2, max_size=6))
@settings(max_examples=40, deadline=None)
def test_the_oracle_order_is_never_worse_than_fifo_or_lpt_in_the_model(draws):
    llc = 56 * MiB
    cases = [_case("spmv", 34 * MiB if big else 1.8 * MiB, k + 1) for k, (big, _) in enumerate(draws)]
    seconds = [s for _, s in draws]
    best = oracle_order(cases, seconds, 2, llc)
    assert sorted(c.name for c in best) == sorted(c.name for c in cases)  # a reordering, nothing lost

    def makespan(order, policy):
        tasks = [SimTask(c.name, seconds[cases.index(c)], c.footprint_bytes) for c in order]
        return simulate(tasks, [[0, 1]], llc, policy).makespan

    for policy in ("fifo", "longest_first"):
        assert makespan(best, "fifo") <= makespan(cases, policy) + 1e-9


def test_the_oracle_pairs_large_with_small_when_large_pairs_thrash():
    llc = 56 * MiB
    cases = [_case("spmv", 34 * MiB, 10 + k) for k in range(2)] + [_case("spmv", 1.8 * MiB, 20 + k) for k in range(2)]
    best = oracle_order(cases, [1.0] * 4, 2, llc)
    # fifo hands the first two cases to the two cores: one large, one small
    assert sorted(c.footprint_bytes > llc / 2 for c in best[:2]) == [False, True]


def test_the_oracle_says_whether_it_proved_its_order_or_only_searched():
    llc = 56 * MiB
    small = [_case("spmv", (34 if k % 3 == 0 else 1.8) * MiB, k + 1) for k in range(8)]
    proven = oracle_search(small, [1.0 + (k % 4) / 4 for k in range(8)], 2, llc)
    assert proven.search.proven and proven.search.method == "branch and bound (proven optimal)"
    assert proven.search.makespan >= proven.search.lower_bound * (1 - 1e-9)
    large = [_case("spmv", (34 if k % 3 == 0 else 1.8) * MiB, k + 1) for k in range(20)]
    seconds = [1.0 + (k % 4) / 4 for k in range(20)]
    searched = oracle_search(large, seconds, 2, llc, local_evals=100)
    assert not searched.search.proven and searched.search.method == "local search (best found)"
    assert sorted(c.name for c in searched.cases) == sorted(c.name for c in large)
    lpt = sorted(range(20), key=lambda i: -seconds[i])
    tasks = [SimTask(large[i].name, seconds[i], large[i].footprint_bytes) for i in lpt]
    assert searched.search.makespan <= simulate(tasks, [[0, 1]], llc, "fifo").makespan * (1 + 1e-9)
    with pytest.raises(ValueError, match="3 cases but 2 run times"):
        oracle_search(small[:3], [1.0, 1.0], 2, llc)


def _runs(peer: str, mix: str, makespans: list[float]) -> list[MixRun]:
    return [MixRun(peer, mix, r, m) for r, m in enumerate(makespans)]


def test_summary_gives_ratios_bounds_and_the_share_of_the_oracle_gap():
    cases = (_case("spmv", 1 * MiB, 1), _case("spmv", 1 * MiB, 2))
    mix = Mix("contention", "kernels", cases, cases)
    solo = {cases[0].name: [1.0, 1.0, 1.0], cases[1].name: [3.0, 3.0, 3.0]}
    runs = (_runs("htex-block", "contention", [5.0, 5.0, 5.0]) + _runs("oracle", "contention", [4.0, 4.0, 4.0])
            + _runs("scalpel:scalpel", "contention", [4.5, 4.5, 4.5])
            + [MixRun("threads", "contention", 0, None, error="RuntimeError: boom")])
    rows = {row["peer"]: row for row in summarise(runs, [mix], solo, cores=2, resamples=100)}
    assert rows["scalpel:scalpel"]["vs_reference"] == pytest.approx(5.0 / 4.5)
    assert rows["scalpel:scalpel"]["lower_bound"] == pytest.approx(3.0)  # longest task beats 4 s / 2 cores
    assert rows["scalpel:scalpel"]["over_lower_bound"] == pytest.approx(1.5)
    assert rows["scalpel:scalpel"]["gap_captured"] == pytest.approx(0.5)
    assert rows["oracle"]["gap_captured"] == pytest.approx(1.0)
    assert rows["threads"]["runs"] == 0 and rows["threads"]["errors"] == ["RuntimeError: boom"]
    assert "median" not in rows["threads"]
    lines = summary_table(list(rows.values()))
    assert any("failed: RuntimeError: boom" in line for line in lines)


def test_p99_latency_is_the_99th_percentile_of_every_round_trip():
    mix = Mix("noop-latency", "latency", count=100)
    runs = [MixRun("threads", "noop-latency", 0, 1.0, latencies=[i / 1000 for i in range(1, 101)])]
    row = summarise(runs, [mix], {}, cores=2, resamples=10)[0]
    assert row["p99_latency_ms"] == pytest.approx(99.01)  # interpolated between 99 ms and 100 ms
    one = summarise([MixRun("threads", "noop-latency", 0, 1.0, latencies=[0.002])], [mix], {}, cores=2)[0]
    assert one["p99_latency_ms"] == pytest.approx(2.0)


def test_plans_name_what_is_wrong():
    with pytest.raises(ValueError, match="unknown mix 'suite-3x'"):
        with_given(BENCH, mixes=("suite-3x",))
    with pytest.raises(ValueError, match="noop-tasks must be a whole number >= 1, got 0"):
        with_given(BENCH, noop_tasks=0)
    with pytest.raises(ValueError, match="unknown peer 'htex'"):
        with_given(BENCH, peers=("htex",))
    with pytest.raises(ValueError, match="unknown policy 'fastest'"):
        with_given(DEMO, policies=("fastest",))
    assert with_given(BENCH, repeats=None, seed=3) == with_given(BENCH, seed=3)  # None: not given
    assert set(SCALES) == set(kernels.SCALES)


def test_calibrate_on_a_json_array_is_one_line_and_no_traceback(tmp_path):
    corun = tmp_path / "corun.json"
    corun.write_text("[1, 2]")
    done = subprocess.run([sys.executable, "-m", "scalpel_executor.cli", "calibrate", str(corun)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr == f"scalpel: {corun} is not a co-run document: expected a JSON object {{...}}, got an array\n"


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    done = subprocess.run([sys.executable, "-m", "scalpel_executor.cli", "bench", "--smoke", "--llc", "8MiB",
                           "--out", str(out)], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "SCALPEL_PROFILE_STORE": str(out / "kept" / "profiles.sqlite")})
    assert done.returncode == 0, done.stderr[-3000:]
    return out, done


def test_the_smoke_run_runs_every_peer_on_every_mix_and_pyperf_reads_it(smoke):
    import pyperf

    out, done = smoke
    record = json.loads((out / "bench.json").read_text())
    mixes = [m["name"] for m in record["mixes"]]
    assert mixes == ["contention", "suite-2x", "light", "workflow", "noop-throughput", "noop-latency"]
    peers = {row["peer"] for row in record["summary"]}
    assert peers == {"htex-block", "threads", "processpool", "scalpel:scalpel", "oracle"}
    for row in record["summary"]:
        assert row["failed"] == 0, row
        assert row["runs"] == 2 and all(m > 0 for m in row["makespans"])
    contention = [row for row in record["summary"] if row["mix"] == "contention"]
    assert {row["peer"] for row in contention} == peers  # the oracle runs the contention mix only
    assert all(row["peer"] != "oracle" for row in record["summary"] if row["mix"] != "contention")
    assert {row["peer"] for row in record["summary"] if row["mix"] == "workflow"} == peers - {"oracle", "processpool"}
    kernel_rows = [r for r in record["summary"] if r["mix"] in ("contention", "suite-2x", "light")]
    assert all(r["lower_bound"] > 0 and "ci_low" in r for r in kernel_rows)
    assert all(len(times) == 1 for times in record["solo"].values())  # one solo pass for both repetitions
    solo_reports = list((out / "runinfo").glob("*/scalpel-solo-report.json"))
    assert len(solo_reports) == 1
    ran = [t for t in json.loads(solo_reports[0].read_text())["tasks"] if ".timed_kernel(" in t["profile_key"]]
    assert len(ran) == record["solo_pass"]["measured"] == record["solo_pass"]["cases"] <= len(record["solo"])
    assert record["solo_pass"]["reused"] == 0
    latency = next(r for r in record["summary"] if r["mix"] == "noop-latency" and r["peer"] == "htex-block")
    assert latency["median_latency_ms"] > 0
    suites = {p: pyperf.BenchmarkSuite.load(path) for p, path in record["files"]["pyperf"].items()}
    assert set(suites) == peers
    assert sorted(suites["htex-block"].get_benchmark_names()) == sorted(mixes)
    assert "workflow" not in suites["processpool"].get_benchmark_names()  # futures as arguments need Parsl
    assert suites["scalpel:scalpel"].get_benchmark("contention").get_nrun() == 2
    compared = subprocess.run([sys.executable, "-m", "pyperf", "compare_to", record["files"]["pyperf"]["htex-block"],
                               record["files"]["pyperf"]["scalpel:scalpel"], "--table"],
                              capture_output=True, text=True, timeout=120)
    assert compared.returncode == 0, compared.stderr
    assert (out / "bench.png").stat().st_size > 10_000
    assert "vs htex-block" in done.stdout and "pyperf compare_to" in done.stdout
    report = subprocess.run([sys.executable, "-m", "scalpel_executor.cli", "bench", "--report", str(out / "bench.json"),
                             "--markdown"], capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    lines = report.stdout.splitlines()
    table = lines[:lines.index("")]
    assert [cell.strip() for cell in table[0].split("|")[1:3]] == ["mix", "peer"]
    assert len(table) == 2 + len(record["summary"]) and all(line.startswith("|") for line in table)
    # after the table, one verdict per mix compared and one on the runs other work disturbed
    assert lines[len(table) + 1:] == record["verdicts"]
    assert len(record["verdicts"]) == len(mixes) + 1
    assert all(v.startswith(f"{mix}, on this machine ({record['machine']['words']}): ")
               for v, mix in zip(record["verdicts"], mixes))
    assert all(run["other_work_per_core"] is None or run["other_work_per_core"] >= 0 for run in record["runs"])
    assert record["verdicts"][0] in done.stdout


def test_the_workflow_mix_runs_its_dag_in_order_under_every_parsl_peer(smoke):
    out, _ = smoke
    record = json.loads((out / "bench.json").read_text())
    mix = next(m for m in record["mixes"] if m["name"] == "workflow")
    members = 2 * record["machine"]["cores"]
    assert mix["kind"] == "workflow" and mix["tasks"] == 3 * members + members + 1  # steps, bash steps, reduce
    footprints = [c["footprint"] for c in mix["cases"]]
    llc_share = record["machine"]["llc"] / record["machine"]["cores"]
    assert all(small < llc_share < large for small, large in zip(footprints[0::3], footprints[1::3]))
    runs = [r for r in record["runs"] if r["mix"] == "workflow"]
    assert {r["peer"] for r in runs} == {"htex-block", "threads", "scalpel:scalpel"} and all(r["makespan"] for r in runs)
    for run in runs:
        steps = run["tasks"]
        assert [t["case"] for t in steps] == [c["case"] for c in mix["cases"]]
        for member in range(members):  # each step started after the one whose result it took had ended
            first, middle, last = steps[3 * member:3 * member + 3]
            assert first["end"] <= middle["start"] and middle["end"] <= last["start"]
    for peer in ("htex-block", "threads", "scalpel-scalpel"):  # the bash step's files, read by the reduce
        assert len(list((out / "workflow" / peer).glob("member-*.txt"))) == members


def test_calibrate_fits_a_corun_document_and_predicts_the_smoke_mixes(smoke, tmp_path):
    out, _ = smoke
    sizes = [1 * MiB, 4 * MiB, 6 * MiB]
    truth = ContentionModel(0.8, 0.6)
    document = {"llc_bytes": 8 * MiB, "cases": [{"label": f"spmv@{s}", "footprint_bytes": s} for s in sizes],
                "slowdown": [[truth.slowdowns([a, b], [0.6, 0.6], 8 * MiB)[0] for b in sizes] for a in sizes]}
    corun = tmp_path / "corun.json"
    corun.write_text(json.dumps(document))
    done = subprocess.run([sys.executable, "-m", "scalpel_executor.cli", "calibrate", str(corun), "--bench",
                           str(out / "bench.json"), "--out", str(tmp_path / "cal.json"), "--plot",
                           str(tmp_path / "cal.png")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "cal.json").read_text())
    assert record["rms_error"] < 0.01
    held = record["held_out"]
    assert held["predictions"] >= 6  # contention, suite-2x, light under three fifo-like peers and Scalpel
    assert all(row["predicted"] > 0 and math.isfinite(row["error"]) for row in held["rows"])
    assert "held-out mixes" in done.stdout
    simulated = subprocess.run([sys.executable, "-m", "scalpel_executor.cli", "simulate", "--tasks", "8",
                                "--repeats", "2", "--model", str(tmp_path / "cal.json"), "--json"],
                               capture_output=True, text=True, timeout=300)
    assert simulated.returncode == 0, simulated.stderr
    assert json.loads(simulated.stdout)["model"] == {"capacity_fraction": record["capacity_fraction"],
                                                     "sensitivity": record["sensitivity"]}


class _FailingSubmitter:
    """A started peer whose every task fails, as a crashed worker pool would."""

    def app(self, function):
        from concurrent.futures import Future

        def submit(*args):
            future = Future()
            future.set_exception(RuntimeError(f"worker lost running {function.__name__}"))
            return future

        return submit


def test_a_failing_mix_is_recorded_with_its_error_and_the_bench_goes_on(tmp_path):
    mix = Mix("light", "kernels", (_case("spmv", 1 * MiB, 1),))
    run = run_mix(_FailingSubmitter(), "threads", mix, 0, tmp_path, timeout=5)
    assert run.makespan is None and run.error == "RuntimeError: worker lost running timed_kernel"
    noop = run_mix(_FailingSubmitter(), "threads", Mix("noop-latency", "latency", count=3), 0, tmp_path, 5)
    assert noop.error.startswith("RuntimeError") and noop.makespan is None


def test_the_montage_mix_without_montagepy_is_one_clear_line(monkeypatch, capsys, tmp_path):
    from scalpel_executor.cli import main

    for name in ("MontagePy", "MontagePy.main"):
        monkeypatch.setitem(sys.modules, name, None)  # None in sys.modules: importing it fails
    assert main(["bench", "--mixes", "montage", "--out", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert "--mixes montage" in error and "MontagePy" in error and "pip install" in error
    assert not (tmp_path / "bench.json").exists()  # refused before anything ran


def test_the_mixed_cores_mix_interleaves_two_core_blas_kernels_with_one_core_ones():
    from scalpel_executor.experiments.bench.mixes import BLAS_KERNELS, mixed_core_cases

    cases, widths = mixed_core_cases(32 * 2**20, 2, "quick", seed=1)
    assert len(cases) == len(widths) == 6 and widths == (2, 1, 2, 1, 1, 1)
    assert all((case.kernel in BLAS_KERNELS) == (width == 2) for case, width in zip(cases, widths))
    assert mixed_core_cases(32 * 2**20, 1, "quick", seed=1)[1] == (1, 1, 1)  # one core: nothing wider
