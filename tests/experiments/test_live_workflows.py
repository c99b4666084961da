"""A live workflow's figures from its tasks' stamps: co-run seconds and their floor, the rounds a
task is timed to, the runs' interleaving, a run's record and line. Stamps are made by hand."""

import json
from types import SimpleNamespace

import pytest

from scalpel_executor.experiments.live_workflows import (calibrated_rounds, corun_floor_seconds, corun_seconds,
                                                         finish, kind_medians, makespan_ratios, run_line, run_order,
                                                         run_record)


def task(name, t0, t1):
    return {"name": name, "t0": t0, "t1": t1, "cpu": 0}


# Two cores: stream-0 and stream-1 overlap 1 s, stream-2 runs beside score-0 only; collect at the end.
RUN = [task("stream-0", 0.0, 2.0), task("stream-1", 1.0, 3.0), task("score-0", 3.0, 5.0),
       task("stream-2", 3.0, 4.5), task("collect", 5.0, 5.5)]


def test_corun_seconds_sums_the_pairwise_overlaps_of_the_named_families_only():
    assert corun_seconds(RUN, {"stream"}) == pytest.approx(1.0)
    assert corun_seconds(RUN, {"stream", "score"}) == pytest.approx(2.5)  # + stream-2 beside score-0
    assert corun_seconds(RUN, {"score"}) == 0.0
    # Three at once count every pair: 3 pairs of 1 s.
    assert corun_seconds([task(f"stream-{i}", 0.0, 1.0) for i in range(3)], {"stream"}) == pytest.approx(3.0)


def test_the_floor_pairs_the_large_seconds_the_others_cannot_accompany_on_two_cores():
    # streams 5.5 s, the others 2.5 s: (5.5 - 2.5) / 2
    assert corun_floor_seconds(RUN, {"stream"}, 2) == pytest.approx(1.5)
    assert corun_floor_seconds(RUN, {"score"}, 2) == 0.0  # enough others to accompany every score
    assert corun_floor_seconds(RUN, {"stream"}, 4) is None


def test_calibrated_rounds_draw_a_line_through_a_setup_and_a_time_per_round():
    def seconds_of(rounds):  # 0.3 s of setup, then 2 ms a round
        return 0.3 + 0.002 * rounds

    assert calibrated_rounds(seconds_of, 1.5) == 600
    assert calibrated_rounds(lambda rounds: 0.1 + 0.1 * rounds, 1.5) == 14
    assert calibrated_rounds(seconds_of, 0.1) == 2  # shorter than the setup: the fewest rounds


def test_htex_runs_first_in_even_repetitions_and_last_in_odd_ones():
    assert run_order(["htex"], ["first", "learned"], 0) == ["htex", "first", "learned"]
    assert run_order(["htex"], ["first", "learned"], 1) == ["first", "learned", "htex"]


def test_a_run_record_keeps_the_figures_and_the_scalpel_report_fields():
    report = {"admission": {"fits": 4}, "sources": {"footprint": {"measured": 4}},
              "tasks": [{"task_id": i, "profile_key": f"key-{i % 2}", "admission": "fits", "extra": 1}
                        for i in range(4)],
              "contention_model": {"interference": {"planned_with": "footprint", "reason": "few co-runs"}}}
    record = run_record(RUN, report, 2, {"stream"}, "stream")
    assert record["makespan"] == pytest.approx(5.5)
    assert record["stream_corun_seconds"] == pytest.approx(1.0)
    assert record["corun_floor_seconds"] == pytest.approx(1.5)
    assert record["profile_keys"] == 2 and "extra" not in record["report_tasks"][0]
    assert record["contention_model"]["interference"]["planned_with"] == "footprint"
    line = run_line("first", record, "stream", "streams together")
    assert "makespan   5.50 s" in line and "streams together  1.00 s (floor 1.50 s)" in line and "admission" in line
    htex = run_record(RUN, None, 2, {"stream"}, "stream")
    assert "admission" not in htex and "admission" not in run_line("htex", htex, "stream", "streams together")


def test_makespan_ratios_are_htex_over_each_kind_with_an_interval():
    runs = [{"kind": kind, "makespan": seconds} for kind, seconds in
            [("htex", 10.0), ("first", 8.0), ("learned", 5.0), ("htex", 10.0), ("first", 8.0), ("learned", 5.0)]]
    ratios = makespan_ratios(runs, ("first", "learned"))
    assert ratios["htex_over_scalpel_first"] == {"ratio": 1.25, "low": 1.25, "high": 1.25}
    assert ratios["htex_over_scalpel_learned"]["ratio"] == 2.0


def test_medians_per_kind_and_the_record_written_where_out_says(tmp_path, capsys):
    runs = [{"kind": "htex", "makespan": 3.0, "floor": None}, {"kind": "htex", "makespan": 5.0, "floor": None},
            {"kind": "first", "makespan": 2.0, "floor": 0.5}]
    assert kind_medians(runs, ("htex", "first"), "makespan") == {"htex": 4.0, "first": 2.0}
    assert kind_medians(runs, ("htex", "first"), "floor") == {"htex": None, "first": 0.5}
    args = SimpleNamespace(out=str(tmp_path / "record"), repeats=1)
    finish(args, {"repeats": 1}, [], runs, "mix.json")
    assert json.loads(capsys.readouterr().out) == {"repeats": 1}
    written = json.loads((tmp_path / "record" / "mix.json").read_text())
    assert written["args"] == {"out": args.out, "repeats": 1} and written["runs"] == runs
