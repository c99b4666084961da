"""benchmarks/width_study.py's record: every contender per instance, and ``--reuse`` copying only
the contenders no width rule reaches."""

import json

import pytest

from scalpel_executor.experiments import width_study

TINY = ["--seeds", "0", "--workloads", "batch-0.5", "--machines", "paper"]


def test_a_record_holds_every_contender_and_reuse_copies_only_what_the_rule_does_not_reach(tmp_path, capsys):
    first = tmp_path / "first.json"
    assert width_study.main([*TINY, "--out", str(first)]) == 0
    record = json.loads(first.read_text())
    (row,) = record["rows"]
    assert set(row["makespans"]) == set(width_study.CONTENDERS) and "copied" not in row
    # an earlier record whose untouched contenders were different: those are copied, the rule's simulated again
    for label in width_study.CONTENDERS:
        row["makespans"][label] += 1000.0
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps(record))
    again = tmp_path / "again.json"
    assert width_study.main([*TINY, "--reuse", str(earlier), "--out", str(again)]) == 0
    (reused,) = json.loads(again.read_text())["rows"]
    assert reused["copied"] == sorted(set(width_study.UNTOUCHED) & set(width_study.CONTENDERS))
    fresh = json.loads(first.read_text())["rows"][0]["makespans"]
    for label in width_study.CONTENDERS:
        expected = fresh[label] + 1000.0 if label in width_study.UNTOUCHED else fresh[label]
        assert reused["makespans"][label] == pytest.approx(expected)
    assert "batch-0.5" in capsys.readouterr().out


def test_a_bad_workload_is_named(tmp_path):
    with pytest.raises(SystemExit) as ended:
        width_study.main(["--workloads", "nosuch", "--out", str(tmp_path / "x.json")])
    assert ended.value.code == 2


def test_known_adds_the_rule_told_the_true_speed_ups_and_reports_it(tmp_path, capsys):
    """``--known N``: a contender whose rule starts from every key's true serial fraction as N
    readings; with many, on a batch of kernels that crowd ``paper``'s 12 MiB caches, it is no
    later than the first run, which must learn them."""
    out = tmp_path / "known.json"
    assert width_study.main([*TINY, "--known", "50", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["known"] == 50 and "scalpel/known" in record["contenders"]
    (row,) = record["rows"]
    assert row["makespans"]["scalpel/known"] <= row["makespans"]["scalpel/first"] * (1 + 1e-9)
    assert set(record["summary"]) == {"first", "learned", "known"}
    assert "told the true speed-ups" in capsys.readouterr().out
    with pytest.raises(SystemExit) as ended:
        width_study.main([*TINY, "--known", "-1", "--out", str(tmp_path / "x.json")])
    assert ended.value.code == 2


def test_unknown_runtimes_adds_a_first_run_told_no_run_time_read_against_fixed_widths_told_none(tmp_path, capsys):
    """``--unknown-runtimes``: a first run whose run times are the executor's guess until a task of
    the key ends, and the fixed widths under the same guesses, against which its summary reads."""
    out = tmp_path / "unknown.json"
    assert width_study.main([*TINY, "--unknown-runtimes", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    (row,) = record["rows"]
    unknown = {f"{f}/unknown" for f in width_study.FIXED} | {"scalpel/unknown"}
    assert unknown <= set(row["makespans"]) and unknown <= set(record["contenders"]) and record["unknown_runtimes"]
    spans = row["makespans"]
    best = min(spans[f"{f}/unknown"] for f in width_study.FIXED)
    assert record["summary"]["unknown"]["hindsight"] == pytest.approx(best / spans["scalpel/unknown"])
    assert record["summary"]["first"]["hindsight"] == pytest.approx(
        min(spans[f] for f in width_study.FIXED) / spans["scalpel/first"])
    assert "run times learned in the run" in capsys.readouterr().out


def test_a_learned_run_is_told_its_chains_as_estimated_and_at_the_widest_by_what_it_knows():
    """The study tells each task both tails, as the executor does: ``tail`` on the estimates (it
    orders the tasks) and ``wide_tail`` with the malleable tasks at their widest at the fits the
    rule knows (what the width rule weighs); a first run, knowing nothing, only the first."""
    from scalpel_executor.core.simulate import SimTask
    from scalpel_executor.core.widths import Widths, amdahl
    tasks = [SimTask("a", 1.0, key="a", max_cores=4), SimTask("b", 8.0, parents=(0,), key="b", max_cores=4),
             SimTask("c", 2.0, parents=(1,), key="c")]
    first = width_study._with_tails(tasks)
    assert [t.tail for t in first] == [10.0, 2.0, 0.0] and all(t.wide_tail is None for t in first)
    rule = Widths("scalpel")
    rule.model.seed("b", 0.25, 50)
    learned = width_study._with_tails(tasks, rule, 4)
    assert [t.tail for t in learned] == [10.0, 2.0, 0.0]
    assert learned[0].wide_tail == pytest.approx(8.0 * amdahl(rule.model.serial_fraction("b"), 4) + 2.0)
    assert width_study._with_tails(tasks[:1], rule, 4) == tasks[:1]  # no chains: nothing told


def test_explain_shows_each_keys_fit_and_widths_per_condition_matching_the_record(tmp_path, capsys):
    """``--explain`` simulates what a record's row holds, key by key: its makespans are the row's."""
    out_file = tmp_path / "one.json"
    assert width_study.main([*TINY, "--known", "50", "--out", str(out_file)]) == 0
    (row,) = json.loads(out_file.read_text())["rows"]
    capsys.readouterr()
    assert width_study.main(["--explain", "batch-0.5/paper/0"]) == 0
    out = capsys.readouterr().out
    tasks = width_study.workload_tasks("batch-0.5", 0, 8, 4)
    for key in {t.key for t in tasks}:
        assert out.count(f"{key}: ") == 3 and out.count(f"\n{key} ") == 1, out  # its table row, then each condition
    for label, condition in (("scalpel/first", "first run"), ("scalpel/learned", "learned"),
                             ("scalpel/known", "told the true speed-ups (--known)")):
        assert f"{condition}: makespan {row['makespans'][label]:.1f} s" in out
    with pytest.raises(SystemExit):
        width_study.main(["--explain", "montage/nowhere/1"])
    assert "--explain expects WORKLOAD/MACHINE/SEED" in capsys.readouterr().err


def test_history_adds_the_rule_after_each_number_of_earlier_runs_each_learning_from_the_last(tmp_path, capsys):
    """``--history K``: ``scalpel/after-k`` for k = 2..K, the rule run on the instance from what
    k earlier draws of it left, one after another; the learned condition (k = 1) is unchanged by
    it, and after-2 is the rule that ran draws 1 and 2 before the instance."""
    from scalpel_executor.core.widths import Widths
    plain, out = tmp_path / "plain.json", tmp_path / "history.json"
    assert width_study.main([*TINY, "--out", str(plain)]) == 0
    assert width_study.main([*TINY, "--history", "3", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    (row,), (before,) = record["rows"], json.loads(plain.read_text())["rows"]
    assert record["history"] == 3 and {"scalpel/after-2", "scalpel/after-3"} <= set(record["contenders"])
    assert row["makespans"]["scalpel/learned"] == before["makespans"]["scalpel/learned"]
    assert list(record["summary"]) == ["first", "learned", "after-2", "after-3"]
    run, tasks, _, domain = width_study._instance("batch-0.5", 0, "paper")
    rule = Widths("scalpel")
    for draw in (1, 2):
        run(width_study._earlier("batch-0.5", 0, "paper", draw), rule)
    assert rule.model.readings("kernel0") + rule.model.readings("kernel1") > 0  # it learned something
    assert row["makespans"]["scalpel/after-2"] == run(width_study._with_tails(tasks, rule, domain), rule).makespan
    assert "learned over 3 earlier runs (--history)" in capsys.readouterr().out
    for bad in ("1", "-2"):
        with pytest.raises(SystemExit) as ended:
            width_study.main([*TINY, "--history", bad, "--out", str(tmp_path / "x.json")])
        assert ended.value.code == 2
        assert "--history must be 0 (not run) or 2 or more earlier runs" in capsys.readouterr().err
