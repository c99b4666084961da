"""``scalpel simulate``: every policy against fifo on a profile's batches; bad choices named."""

import json


def test_simulate_reports_every_policy_against_fifo(scalpel):
    code, out, _ = scalpel("simulate", "--tasks", "8,16", "--repeats", "2", "--json")
    doc = json.loads(out)
    assert code == 0
    assert {(r["tasks"], r["policy"]) for r in doc["rows"]} >= {(16, "scalpel"), (16, "fifo"), (8, "di")}
    assert all(r["mean_makespan"] >= r["mean_lower_bound"] * 0.999 for r in doc["rows"])


def test_simulate_prints_one_aligned_row_per_task_count_and_policy(scalpel):
    code, out, _ = scalpel("simulate", "--tasks", "8", "--repeats", "1", "--policies", "scalpel")
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["tasks", "policy"])
    rows = lines[header + 2:]
    assert code == 0 and [row.split()[1] for row in rows] == ["scalpel", "fifo"]  # fifo added as the reference
    assert len({len(line) for line in lines[header:]}) == 1  # one width: the columns line up


def test_simulate_unknown_policy(scalpel):
    code, out, err = scalpel("simulate", "--policies", "lpt")
    assert code == 2 and out == ""
    assert err == ("scalpel: unknown policy 'lpt' in --policies; choose from scalpel, longer_first, grouping+fifo, "
                   "fifo, random, di\n")


def test_simulate_unknown_profile(scalpel):
    code, _, err = scalpel("simulate", "--profile", "nope")
    assert code == 2 and "polybench-xeon-e5620" in err


def test_simulate_bad_task_counts_are_named(scalpel):
    code, _, err = scalpel("simulate", "--tasks", "8,x")
    assert code == 2 and "--tasks takes task counts like 8,16,23, got '8,x'" in err
