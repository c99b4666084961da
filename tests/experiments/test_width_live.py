"""The live width benchmark's summary: paired ratios per repetition, and the floor no widths can beat."""

import pytest

from scalpel_executor.experiments.width_live import FLOOR, floor_of, order, report_lines, summarise


def _run(repeat, contender, process, makespan, busy=None, cores=2, checksum=1.5):
    run = {"repeat": repeat, "contender": contender, "process_seconds": process, "makespan": makespan,
           "checksum": checksum, "widths": {}}
    return run | ({"busy_core_seconds": busy, "cores": cores} if busy is not None else {})


def test_the_floor_is_fixed_1s_process_with_its_makespan_replaced_by_its_core_seconds_over_the_cores():
    # 10 s process, 4 s makespan of which 6 core-seconds busy on 2 cores: every core busy would end in 3 s
    floor = floor_of(_run(0, "fixed-1", 10.0, 4.0, busy=6.0))
    assert floor["makespan"] == pytest.approx(3.0) and floor["process_seconds"] == pytest.approx(9.0)
    assert floor_of(_run(0, "fixed-1", 10.0, 4.0)) is None  # a record from before the core-seconds were counted


def test_the_summary_pairs_each_repetition_and_reports_the_floor_against_fixed_1():
    runs = [_run(0, "fixed-1", 10.0, 4.0, busy=6.0), _run(0, "first", 9.5, 3.5, busy=6.5),
            _run(1, "fixed-1", 12.0, 5.0, busy=9.0), _run(1, "first", 12.0, 4.6, busy=9.1)]
    summary = summarise(runs)
    assert summary["ratios"][f"{FLOOR}/fixed-1 process_seconds"]["median"] == pytest.approx((9.0 / 10 + 11.5 / 12) / 2,
                                                                                            abs=1e-4)
    assert summary["ratios"]["first/fixed-1 process_seconds"] == {"median": pytest.approx(0.975), "min": 0.95,
                                                                   "max": 1.0, "n": 2}
    assert summary["contenders"][FLOOR]["makespan"]["max"] == pytest.approx(4.5)
    assert summary["checksums_agree"]
    assert any(line.startswith(f"| {FLOOR} / fixed-1 | 0.929") for line in report_lines(summary))


def test_a_record_without_core_seconds_has_no_floor():
    summary = summarise([_run(0, "fixed-1", 10.0, 4.0), _run(0, "first", 9.0, 3.0, checksum=2.0)])
    assert FLOOR not in summary["contenders"] and f"{FLOOR}/fixed-1 process_seconds" not in summary["ratios"]
    assert not summary["checksums_agree"]


def test_htex_has_its_whole_process_compared_and_no_makespan():
    runs = [_run(0, "htex", 11.0, None), _run(0, "first", 9.9, 3.5, busy=6.5), _run(0, "learned", 8.8, 3.0, busy=6.0)]
    summary = summarise(runs)
    assert summary["contenders"]["htex"] == {"process_seconds": {"median": 11.0, "min": 11.0, "max": 11.0, "n": 1}}
    assert summary["ratios"]["first/htex process_seconds"]["median"] == pytest.approx(0.9)
    assert summary["ratios"]["learned/htex process_seconds"]["median"] == pytest.approx(0.8)
    assert "first/htex makespan" not in summary["ratios"]
    assert "| htex | 11.00 [11.00, 11.00] | - |" in report_lines(summary)


def test_every_repetition_runs_every_contender_once_learned_after_first_htex_first_and_last_in_turn():
    for repeat in range(8):
        names = order(repeat)
        assert sorted(names) == sorted(["fixed-1", "fixed-2", "first", "learned", "htex"])
        assert names.index("first") < names.index("learned")
        assert names.index("htex") == (0 if repeat % 2 == 0 else 4)
