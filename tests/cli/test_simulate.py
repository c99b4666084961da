"""``scalpel simulate``: every policy against fifo on a profile's batches; preset machines and their overrides;
bad choices named."""

import json

import pytest

from scalpel_executor.core.machines import MACHINES


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


@pytest.mark.parametrize("option, value, error", [
    ("--policies", "lpt", "scalpel: unknown policy 'lpt' in --policies; choose from scalpel, scalpel-paper, "
                          "scalpel-lpt, longest_first, grouping+fifo, fifo, random, di\n"),
    ("--machine", "epic", "scalpel: unknown machine 'epic' in --machine; choose from paper, wide, epyc, xeon16 "
                          "or give a spec like 8x8:32MiB\n"),
])
def test_simulate_names_an_unknown_choice_and_the_choices(scalpel, option, value, error):
    code, out, err = scalpel("simulate", option, value)
    assert (code, out, err) == (2, "", error)


@pytest.mark.parametrize("option, value, named", [
    ("--profile", "nope", "polybench-xeon-e5620"),
    ("--tasks", "8,x", "--tasks takes task counts like 8,16,23, got '8,x'"),
])
def test_simulate_names_a_bad_value(scalpel, option, value, named):
    code, _, err = scalpel("simulate", option, value)
    assert code == 2 and named in err


@pytest.mark.parametrize("name", list(MACHINES))
def test_simulate_accepts_each_preset_machine_and_uses_its_topology_and_model(scalpel, name):
    preset = MACHINES[name]
    code, out, _ = scalpel("simulate", "--machine", name, "--tasks", "8", "--repeats", "1", "--policies", "scalpel",
                           "--json")
    doc = json.loads(out)
    assert code == 0
    assert (doc["preset"], doc["machine"], doc["llc_size"]) == (name, preset.spec, preset.topology().llc_size)
    assert doc["model"] == {"capacity_fraction": preset.model.capacity_fraction,
                            "sensitivity": preset.model.sensitivity}


def test_simulate_preset_prints_the_usual_table(scalpel):
    code, out, _ = scalpel("simulate", "--machine", "xeon16", "--tasks", "16", "--repeats", "1",
                           "--policies", "scalpel")
    lines = out.splitlines()
    assert code == 0
    assert "machine xeon16 = 1x16:300MiB (1 domains, 16 cores, LLC 300.0 MiB each)" in lines[0]
    assert "rho=0.6395, sigma=1.2538" in lines[1]
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["tasks", "policy"])
    assert [row.split()[1] for row in lines[header + 2:]] == ["scalpel", "fifo"]


def test_simulate_machine_still_takes_a_spec(scalpel):
    code, out, _ = scalpel("simulate", "--machine", "3x2:8MiB", "--tasks", "6", "--repeats", "1", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["preset"] is None and doc["machine"] == "3x2:8MiB"
    assert doc["model"] == {"capacity_fraction": 0.5, "sensitivity": 1.0}


def test_simulate_explicit_options_override_the_preset(scalpel, tmp_path):
    code, out, _ = scalpel("simulate", "--machine", "xeon16", "--spec", "2x8:150MiB", "--llc", "100MiB",
                           "--sensitivity", "3", "--tasks", "8", "--repeats", "1", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["machine"] == "2x8:150MiB" and doc["llc_size"] == 100 * 2 ** 20
    assert doc["model"] == {"capacity_fraction": 0.6395, "sensitivity": 3.0}  # rho still the preset's

    calibration = tmp_path / "model.json"
    calibration.write_text(json.dumps({"capacity_fraction": 0.25, "sensitivity": 0.5}))
    code, out, _ = scalpel("simulate", "--machine", "xeon16", "--model", str(calibration), "--capacity-fraction",
                           "0.75", "--tasks", "8", "--repeats", "1", "--json")
    assert code == 0 and json.loads(out)["model"] == {"capacity_fraction": 0.75, "sensitivity": 0.5}


def test_simulate_help_lists_every_preset_with_its_description(scalpel, capsys):
    with pytest.raises(SystemExit):
        scalpel("simulate", "--help")
    text = " ".join(capsys.readouterr().out.split())
    for machine in MACHINES.values():
        assert f"{machine.name} {machine.description}" in text


def test_simulate_books_a_profiles_cores_memory_and_gpus_against_the_node(scalpel, tmp_path):
    profile = tmp_path / "wide.json"
    profile.write_text(json.dumps({
        "format": "scalpel-profile/1", "name": "wide", "machine": {"spec": "1x2:32MiB"},
        "tasks": [{"name": "solve", "runtime": 4, "footprint": "20MiB", "cores": 2},
                  {"name": "big", "runtime": 2, "memory": 15 * 1024}]}))
    code, out, _ = scalpel("simulate", "--profile", str(profile), "--policies", "fifo", "--json")
    assert code == 0 and json.loads(out)["rows"][0]["mean_makespan"] == pytest.approx(6.0)  # the 2-core task alone
    code, out, _ = scalpel("simulate", "--profile", str(profile), "--policies", "fifo", "--json",
                           "--memory", "10GiB")
    assert code == 2 and "asks for 15.0 GiB of memory; this node's budget is 10.0 GiB" in _
    profile.write_text(json.dumps({"format": "scalpel-profile/1", "name": "bad", "machine": {"spec": "1x2:32MiB"},
                                   "tasks": [{"name": "x", "runtime": 1, "cores": 0}]}))
    code, _, err = scalpel("simulate", "--profile", str(profile))
    assert code == 2 and "cores must be a whole number >= 1, got 0" in err
