"""``scalpel topology``: this machine's LLC domains, or a described one; empty descriptions refused."""

import json

import pytest


def test_topology_json_describes_this_machine(scalpel):
    code, out, _ = scalpel("topology", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["total_cores"] >= 1 and doc["domains"]


def test_topology_spec(scalpel):
    code, out, _ = scalpel("topology", "--spec", "2x4:12MiB")
    assert code == 0 and "12.0 MiB" in out


def test_malformed_spec_is_a_clear_error(scalpel):
    code, _, err = scalpel("topology", "--spec", "2x")
    assert code == 2 and "2x" in err


@pytest.mark.parametrize("option, value", [("--cpus", ""), ("--cpus", "   "), ("--cpus", ";"), ("--cpus", " ; ; "),
                                           ("--spec", ""), ("--spec", "  ")])
def test_an_empty_cpus_or_spec_is_an_error_that_says_how_to_write_it(scalpel, option, value):
    code, out, err = scalpel("topology", option, value)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    example = '--cpus "0-3;4-7"' if option == "--cpus" else '--spec "2x4:12MiB"'
    assert f"{option} " in err and repr(value) in err and example in err, err


def test_a_cpus_list_still_builds_the_domains_it_names(scalpel):
    code, out, _ = scalpel("topology", "--cpus", "0;", "--llc", "8MiB", "--json")
    assert code == 0 and [d["cpus"] for d in json.loads(out)["domains"]] == [[0]]
