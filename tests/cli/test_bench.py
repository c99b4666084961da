"""``scalpel bench`` options: peers and mixes named, the plan a command line makes."""

import pytest

from scalpel_executor.cli.bench import _peers
from scalpel_executor.experiments.plans import SCALPEL_POLICIES


def test_peers_name_what_is_wrong():
    assert _peers("scalpel:*,htex-block") == [*(f"scalpel:{p}" for p in SCALPEL_POLICIES), "htex-block"]
    with pytest.raises(ValueError, match="unknown peer 'htex-blok' in --peers"):
        _peers("htex-blok")
    with pytest.raises(ValueError, match="'random' is not benchmarked"):
        _peers("scalpel:random")


def test_an_unknown_mix_is_refused_before_anything_runs(scalpel, tmp_path):
    code, _, err = scalpel("bench", "--mixes", "suite-3x", "--out", str(tmp_path / "out"))
    assert code == 2 and "unknown mix 'suite-3x' in --mixes" in err
    assert not (tmp_path / "out").exists()


def _record(tmp_path, runs):
    import json

    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"format": "scalpel-bench/1", "summary": [], "runs": runs}))
    return str(path)


def test_paired_against_pairs_repetitions_and_skips_what_failed():
    from scalpel_executor.experiments.bench.stats import paired_against

    runs = [{"mix": "m", "peer": "a", "repeat": r, "makespan": t} for r, t in enumerate([2.0, 2.2, 1.8, 9.0])]
    runs += [{"mix": "m", "peer": "b", "repeat": r, "makespan": t} for r, t in enumerate([1.0, 1.1, 0.9])]
    runs.append({"mix": "m", "peer": "b", "repeat": 3, "makespan": None, "error": "WorkerDied"})
    (row,) = paired_against(runs, "a", resamples=500)
    assert (row["peer"], row["runs"]) == ("b", 3)  # repetition 3 failed for b: a's 9.0 is left out
    assert row["ratio"] == 2.0 and row["ci_low"] == 2.0 and row["ci_high"] == 2.0
    assert row["per_repeat"] == [2.0, 2.0, 2.0]
    with pytest.raises(ValueError, match="no finished run of peer 'c'.*the record has: a, b"):
        paired_against(runs, "c")


def test_report_against_a_peer_prints_the_paired_table_and_names_mistakes(scalpel, tmp_path):
    runs = [{"mix": "suite-4x", "peer": p, "repeat": r, "makespan": t * (1.1 if p == "lf" else 1.0)}
            for p in ("lf", "scalpel:scalpel") for r, t in enumerate([5.0, 5.2, 4.9])]
    path = _record(tmp_path, runs)
    code, out, err = scalpel("bench", "--report", path, "--against", "lf")
    assert code == 0, err
    header, _, row = out.splitlines()[:3]
    assert "lf / peer" in header and "95% CI" in header
    assert row.split()[:4] == ["suite-4x", "scalpel:scalpel", "3", "1.100x"]
    code, _, err = scalpel("bench", "--report", path, "--against", "htex-block")
    assert code == 2 and "no finished run of peer 'htex-block'" in err and path in err
    code, _, err = scalpel("bench", "--against", "lf")
    assert code == 2 and "--against compares the peers of an earlier run" in err


def test_fresh_solo_reaches_the_benchmark_and_the_demo(scalpel, tmp_path, monkeypatch):
    from scalpel_executor.experiments import demo
    from scalpel_executor.experiments.bench import run

    given = []

    def fake(plan, **options):
        given.append(options["fresh_solo"])
        raise ValueError("stopped before anything ran")

    monkeypatch.setattr(run, "run_bench", fake)
    monkeypatch.setattr(demo, "run_demo", fake)
    for argv in (["bench"], ["bench", "--fresh-solo"], ["demo"], ["demo", "--fresh-solo"]):
        code, _, err = scalpel(*argv, "--out", str(tmp_path / "out"))
        assert code == 2 and "stopped before anything ran" in err
    assert given == [False, True, False, True]
