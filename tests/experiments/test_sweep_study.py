"""benchmarks/sweep_study.py: a sweep's tasks keyed per kernel, each alone, or each with its
kernel as its family; the record holds every contender, and the shared keying is the width
study's own rule run."""

import json

import pytest

from scalpel_executor.core.simulate import SimTask
from scalpel_executor.experiments import sweep_study, width_study

TINY = ["--seeds", "0", "--workloads", "batch-0.5", "--machines", "paper"]


def test_a_record_holds_every_contender_and_its_shared_keying_is_the_width_studys_rule(tmp_path, capsys):
    out = tmp_path / "sweep.json"
    assert sweep_study.main([*TINY, "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    (row,) = record["rows"]
    assert set(row["makespans"]) == set(sweep_study.CONTENDERS)
    (study,) = width_study.run_instance("batch-0.5", 0, ["paper"])
    for run in sweep_study.RUNS:
        assert row["makespans"][f"shared/{run}"] == pytest.approx(study["makespans"][f"scalpel/{run}"])
    for fixed in width_study.FIXED:
        assert row["makespans"][fixed] == pytest.approx(study["makespans"][fixed])
    assert set(record["summary"]["learned"]["behind_hindsight"]) == set(sweep_study.KEYING)
    assert sweep_study.main(["--report", str(out)]) == 0
    assert "A sweep, learned run" in capsys.readouterr().out


def test_each_task_of_a_sweep_is_a_key_of_its_own_and_its_family_is_its_kernel():
    tasks = [SimTask("a", 1.0, key="kernel0"), SimTask("b", 1.0, key="kernel0"), SimTask("c", 1.0, key="kernel1")]
    alone, family = sweep_study.swept(tasks, "alone", "x"), sweep_study.swept(tasks, "family", "x")
    assert len({t.key for t in alone}) == 3 and all(t.family is None for t in alone)
    assert [t.family for t in family] == ["kernel0", "kernel0", "kernel1"] and [t.key for t in family] == [t.key for t in alone]
    assert sweep_study.swept(tasks, "shared", "x") == tasks
    with pytest.raises(ValueError, match="unknown keying 'each'"):
        sweep_study.swept(tasks, "each", "x")


def test_a_bad_seed_is_named(tmp_path, capsys):
    with pytest.raises(SystemExit) as ended:
        sweep_study.main(["--seeds", "1,x", "--out", str(tmp_path / "x.json")])
    assert ended.value.code == 2 and "--seeds must be integers separated by commas, got '1,x'" in capsys.readouterr().err
