"""The node check and the width harness of benchmarks/throughput.py: their pieces at tiny sizes.

What is checked is that every piece runs and says what it should (a sample's fields, the record's,
the tables' rows), never a figure: figures come from real runs on real nodes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading

import pytest

from scalpel_executor.core.domains import Topology
from scalpel_executor.experiments import interleaved, node_check
from scalpel_executor.experiments.interleaved import (
    STAGES,
    Contender,
    run_sample,
    scalpel_topology,
    stage_lines,
    stage_seconds,
    stage_summary,
    thread_medians,
    width_contenders,
    width_lines,
    width_summary,
)
from scalpel_executor.experiments.node_check import (
    FORMAT,
    SOLO_STORE,
    NodeCheckPlan,
    default_plan,
    default_widths,
    estimate_bench_seconds,
    load_record,
    markdown_lines,
    run_node_check,
)


def _sample(throughput: float, manager: float | None = 300.0, threads=(("MainThread", 400.0),)) -> dict:
    return {"throughput": throughput, "round_trip_median": 0.002, "round_trip_p90": 0.003, "start_seconds": 1.0,
            "driver_cpu_per_task_us": 900.0, "manager_cpu_per_task_us": manager,
            "interchange_cpu_per_task_us": None, "workers_cpu_per_task_us": None,
            "driver_threads": [{"name": name, "tid": 1, "cpu_per_task_us": us} for name, us in threads],
            "manager_threads": []}


SAMPLES = {"htex": [_sample(500.0), _sample(520.0)],
           "scalpel": [_sample(600.0, threads=(("scalpel-submit-12345", 50.0),)),
                       _sample(640.0, threads=(("scalpel-submit-23456", 70.0),))],
           "threads": [_sample(1000.0, None), _sample(1200.0, None)]}


def test_the_widths_are_4_and_16_capped_at_the_cores():
    assert default_widths(64) == (4, 16)
    assert default_widths(2) == (2,)
    assert default_plan(2, quick=True).widths == (2,)
    with pytest.raises(ValueError, match="widths must be positive"):
        NodeCheckPlan(widths=())


def test_a_width_has_three_contenders_and_a_wider_node_is_emulated():
    cores = interleaved.machine_cores()
    contenders = width_contenders(len(cores) + 3, stages=True)
    assert list(contenders) == ["htex", "scalpel", "threads"]
    assert contenders["scalpel"].options["topology"] == f"1x{len(cores) + 3}"
    assert contenders["scalpel"].stages and not contenders["htex"].stages
    assert contenders["htex"].options == {"max_workers_per_node": len(cores) + 3, "cpu_affinity": "none"}
    assert contenders["threads"].options == {"max_threads": len(cores) + 3}
    assert scalpel_topology(len(cores)) is None
    assert scalpel_topology(1) == [[cores[0]]]
    pinned = width_contenders(4, pin_driver=True)
    assert list(pinned) == ["htex", "scalpel", "threads", "scalpel-pin", "scalpel-unpinned"]
    assert pinned["scalpel-pin"].executor == "scalpel"
    assert pinned["scalpel-pin"].options == {**pinned["scalpel"].options, "pin_driver": "auto"}
    assert pinned["scalpel-unpinned"].options == {**pinned["scalpel"].options, "pin_driver": None}


def test_a_width_summary_has_medians_ranges_ratios_and_threads():
    summary = width_summary(SAMPLES)
    scalpel = summary["contenders"]["scalpel"]
    assert scalpel["figures"]["throughput"] == {"median": 620.0, "min": 600.0, "max": 640.0}
    assert "manager_cpu_per_task_us" not in summary["contenders"]["threads"]["figures"]
    assert summary["ratios"]["scalpel/htex"]["throughput"] == pytest.approx(620 / 510)
    assert summary["ratios"]["scalpel/threads"]["throughput"] == pytest.approx(620 / 1100)
    assert "scalpel-pin/htex" not in summary["ratios"]  # no such samples
    pinned = width_summary({**SAMPLES, "scalpel-pin": [dict(sample, throughput=1020.0)
                                                       for sample in SAMPLES["scalpel"]]})
    assert pinned["ratios"]["scalpel-pin/htex"]["throughput"] == pytest.approx(1020 / 510)
    assert pinned["ratios"]["scalpel/htex"] == summary["ratios"]["scalpel/htex"]
    # a pid in a thread's name differs per sample: the samples' threads are one thread
    assert thread_medians(SAMPLES["scalpel"], "driver") == [{"name": "scalpel-submit-N", "cpu_per_task_us": 60.0}]
    lines = width_lines(4, summary, markdown=True)
    assert any(line.startswith("| scalpel") and "620 (600–640)" in line for line in lines)
    assert any(line.startswith("scalpel/threads: throughput 0.56x") for line in lines)


def test_stages_follow_a_task_from_the_app_call_to_its_future():
    stamp = {"called": 10.0, "submitted": 10.001, "started": 10.004, "wall": 0.0002, "finished": 10.0052,
             "done": 10.0055}
    seconds = stage_seconds(stamp)
    assert seconds["launch"] == pytest.approx(0.001)
    assert seconds["to_worker"] == pytest.approx(0.003)
    assert seconds["handoff_and_return"] == pytest.approx(0.001)
    assert seconds["to_future"] == pytest.approx(0.0003)
    assert seconds["total"] == pytest.approx(0.0055)
    assert stage_seconds({**stamp, "wall": None}).keys() == {"launch", "to_worker", "to_future", "total"}
    summary = stage_summary([stamp, {**stamp, "done": 10.0065}])
    assert summary["to_future"]["tasks"] == 2 and summary["to_future"]["median"] == pytest.approx(0.0008)
    lines = stage_lines({"burst": summary, "lone": summary})
    assert [line.split()[0] for line in lines[2:]] == [name for name, *_ in STAGES]


def test_the_thread_pool_contender_gives_a_sample_with_its_driver_threads(tmp_path):
    sample = run_sample(width_contenders(2)["threads"], 20, 5, str(tmp_path), timeout=300)
    assert sample["throughput"] > 0 and sample["round_trip_p90"] >= sample["round_trip_median"] > 0
    assert sample["manager_cpu_per_task_us"] is None and sample["interchange_cpu_per_task_us"] is None
    # Threads are listed only where their CPU time moved: the kernel counts it in 10 ms ticks, and
    # 25 no-op tasks may leave any one thread's count where it was. Which names they get is below.
    assert all(thread["cpu_per_task_us"] > 0 and thread["name"] for thread in sample["driver_threads"])


def test_threads_are_named_as_python_names_them_in_this_process():
    names = interleaved.thread_names(os.getpid())
    assert names[threading.main_thread().native_id] == "MainThread"
    rows = interleaved.per_thread({1: 0.5, 2: 0.1}, {1: 0.7, 2: 0.1, 3: 0.01}, {1: "reader"}, 10)
    assert [(row["name"], row["tid"]) for row in rows] == [("reader", 1), (interleaved.UNNAMED, 3)]
    assert rows[0]["cpu_per_task_us"] == pytest.approx(20_000)


def test_an_emulated_node_gives_a_sample_with_the_manager_and_every_task_stamped(tmp_path):
    workers = len(interleaved.machine_cores()) + 1
    contender = Contender("scalpel", {"topology": f"1x{workers}"}, measure_cpu=True, workers=workers, stages=True)
    sample = run_sample(contender, 20, 5, str(tmp_path), timeout=300)
    assert sample["manager_cpu_per_task_us"] is not None and sample["workers_cpu_per_task_us"] is not None
    assert len(sample["stages"]["burst"]) == 20 and len(sample["stages"]["lone"]) == 5
    assert all(stamp["called"] <= stamp["submitted"] <= stamp["started"] <= stamp["finished"] <= stamp["done"]
               for phase in sample["stages"].values() for stamp in phase)
    assert isinstance(sample["queue"], list)


def test_the_record_and_the_markdown_of_a_check(tmp_path, monkeypatch):
    threads_only = lambda width, pin_driver=False: {"threads": Contender("threads", {"max_threads": width},  # noqa: E731
                                                                       measure_cpu=True)}
    monkeypatch.setattr(node_check, "width_contenders", threads_only)
    bench_calls = []

    solo_stores = []

    def fake_bench(plan, *, out, printer, solo_store):
        bench_calls.append(plan)
        solo_stores.append(solo_store)
        return {"summary": [{"mix": "contention", "peer": "htex-block", "runs": 1, "failed": 0, "errors": [],
                             "makespans": [2.0], "median": 2.0, "vs_reference": 1.0, "ci_low": 1.0, "ci_high": 1.0}],
                "files": {"json": str(out / "bench.json")}}

    monkeypatch.setattr(node_check, "run_bench", fake_bench)
    streams_calls = []

    def fake_streams(plan, printer):
        streams_calls.append(plan)
        return {"mix": {"streams": 2, "scores": 2, "stream_mib": 128}, "crowd": {
                    "cpus": 2, "stream_alone": 1.0, "slowdown": {"streams_together": 2.5, "score_among_streams": 1.1}},
                "runs": [{"kind": "htex", "makespan": 3.0, "stream_corun_seconds": 1.5},
                         {"kind": "first", "error": "RuntimeError: gone"},
                         {"kind": "learned", "makespan": 2.5, "stream_corun_seconds": 0.25, "contention_model": {
                             "interference": {"planned_with": "per-key interference"}}}]}

    monkeypatch.setattr(node_check, "streams_check", fake_streams)
    plan = NodeCheckPlan(widths=(1, 2), budget=30.0, tasks=10, pings=3, max_rounds=1, scale="quick")
    record = run_node_check(plan, tmp_path, printer=lambda line: None)
    assert streams_calls == [plan]
    assert bench_calls[0].mixes == ("contention", "suite-2x") and bench_calls[0].repeats >= 1
    assert bench_calls[0].peers == ("htex-block", "scalpel:longest_first", "scalpel:scalpel")
    assert solo_stores == [tmp_path / SOLO_STORE]  # its own, in the output folder: never the user's store
    written = load_record(tmp_path / "node-check.json")
    assert written["format"] == FORMAT == record["format"]
    assert {"cpu_model", "cores", "llc_domains", "python", "parsl"} <= written["machine"].keys()
    assert written["throughput"]["rounds"] == 1 and set(written["throughput"]["widths"]) == {"1", "2"}
    assert written["bench"]["summary"][0]["peer"] == "htex-block"
    markdown = (tmp_path / "node-check.md").read_text()
    assert markdown == "\n".join(markdown_lines(written)) + "\n"
    assert "Parsl" in markdown and "| threads" in markdown and "| contention" in markdown
    assert "2 streams of 128 MiB" in markdown and "together **2.50x**" in markdown
    assert "| learned | 2.50 | 0.25 | per-key interference |" in markdown and "| first | failed | | |" in markdown
    record = run_node_check(dataclasses.replace(plan, streams=False), tmp_path / "without", printer=lambda line: None)
    assert "streams" not in record and len(streams_calls) == 1

    def broken_streams(plan, printer):
        raise ValueError("no numpy here")

    monkeypatch.setattr(node_check, "streams_check", broken_streams)
    record = run_node_check(plan, tmp_path / "broken", printer=lambda line: None)
    assert record["streams"] == {"error": "ValueError: no numpy here"} and len(bench_calls) == 3  # the bench still ran
    assert "Failed: ValueError: no numpy here" in (tmp_path / "broken" / "node-check.md").read_text()
    assert any(line.startswith("1 workers") for line in markdown.splitlines())


def test_a_record_of_another_kind_is_refused(tmp_path):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"format": "scalpel-bench/1"}))
    with pytest.raises(ValueError, match="not a node check record"):
        load_record(path)


def test_the_bench_estimate_grows_with_the_cores_and_the_peers():
    plan = default_plan(4)
    setup, per_repeat = estimate_bench_seconds(plan, 32 * 2**20, 4, 2.0)
    assert setup > 0 and per_repeat > 0
    fewer = estimate_bench_seconds(NodeCheckPlan(widths=(4,), peers=("htex-block",)), 32 * 2**20, 4, 2.0)[1]
    assert fewer < per_repeat


def test_a_failed_sample_is_counted_and_left_out_of_the_figures():
    summary = width_summary({**SAMPLES, "scalpel": [*SAMPLES["scalpel"], {"error": "TimeoutError"}]})
    assert summary["contenders"]["scalpel"]["samples"] == 2 and summary["contenders"]["scalpel"]["failed"] == 1
    assert summary["contenders"]["scalpel"]["figures"]["throughput"]["median"] == 620.0
    assert any("2 (1 failed)" in line for line in width_lines(4, summary))


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="a crowd of streams needs two cores")
def test_the_streams_check_runs_htex_and_scalpels_runs_on_a_temporary_store(tmp_path, monkeypatch):
    # the real stage, tiny: a stream and a score per core, 0.1 s each; its own store, never the user's
    monkeypatch.setenv("SCALPEL_PROFILE_STORE", str(tmp_path / "users-store.sqlite"))
    monkeypatch.setattr(node_check, "detect_topology", lambda: Topology.from_cpu_lists(
        [sorted(os.sched_getaffinity(0))[:2]], llc_size=32 * 2**20))
    plan = NodeCheckPlan(widths=(2,), streams_mib=2, stream_seconds=0.1, streams_train=0)
    lines = []
    result = node_check.streams_check(plan, lines.append)
    assert result["mix"]["streams"] == result["mix"]["scores"] == 2 and result["mix"]["stream_mib"] == 2
    assert result["crowd"]["cpus"] == 2 and result["crowd"]["slowdown"]["streams_together"] > 0
    assert [run["kind"] for run in result["runs"]] == ["htex", "first", "learned"]
    assert all("error" not in run and len(run["tasks"]) == 5 for run in result["runs"])  # 2 + 2 and the reduce
    assert set(result["summary"]) == {"htex", "first", "learned"} and sum(result["learned_planned_with"].values()) == 1
    assert any(line.startswith("streams: 2 streams of 2 MiB") for line in lines)
    assert not (tmp_path / "users-store.sqlite").exists()


def test_the_demo_is_timed_as_a_whole_process_on_a_store_of_its_own(tmp_path, monkeypatch):
    # A stand-in for `scalpel demo`: it checks where its profile store points, writes the demo's
    # record with its own figures, prints its table and exits.
    script = ("import json, os, sys, time; from pathlib import Path; out = Path(sys.argv[1]); "
              "store = os.environ['SCALPEL_PROFILE_STORE']; assert store == str(out / 'profiles.sqlite'), store; "
              "time.sleep(0.2); (out / 'scalpel-demo.json').write_text(json.dumps({'seconds': "
              "{'estimated': 200.0, 'took': 190.0}})); print('\\n'.join(f'line {i}' for i in range(60)))")
    demo = node_check.demo_check(tmp_path / "demo", printer=lambda line: None,
                                 command=[sys.executable, "-c", script, str(tmp_path / "demo")])
    assert demo["returncode"] == 0 and demo["wall_seconds"] >= 0.2
    assert (demo["estimated_seconds"], demo["took_seconds"]) == (200.0, 190.0)
    assert demo["tail"] == [f"line {i}" for i in range(60 - node_check.DEMO_TAIL_LINES, 60)]
    failed = node_check.demo_check(tmp_path / "failed", printer=lambda line: None,
                                   command=[sys.executable, "-c", "import sys; print('no parsl'); sys.exit(3)"])
    assert failed["returncode"] == 3 and failed["estimated_seconds"] is None and failed["tail"] == ["no parsl"]
    # In the check: after the streams, before the bench, and in the Markdown with its verdict.
    monkeypatch.setattr(node_check, "throughput_rounds", lambda plan, share, printer: {"rounds": 0, "widths": {}})
    monkeypatch.setattr(node_check, "demo_check", lambda folder, printer: dict(demo, wall_seconds=250.0))
    monkeypatch.setattr(node_check, "run_bench", lambda plan, *, out, printer, solo_store: {"summary": [], "files": {}})
    plan = NodeCheckPlan(widths=(1,), budget=30.0, scale="quick", streams=False, demo=True)
    record = run_node_check(plan, tmp_path / "check", printer=lambda line: None)
    assert record["demo"]["wall_seconds"] == 250.0 and "bench" in record
    markdown = (tmp_path / "check" / "node-check.md").read_text()
    assert (f"The whole process took **250 s**; its own estimate 200 s on {record['machine']['cores']} cores (the "
            f"goal on a 16-core node: 240 s).") in markdown
    assert "line 59" in markdown
    failed_markdown = "\n".join(markdown_lines(dict(record, demo=failed)))
    assert "Failed (exit 3) after" in failed_markdown
