"""Behaviour of scalpel_executor.core.domains: sysfs detection on fake trees, specs, CPU lists."""

from __future__ import annotations

import json
import logging
import os
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core.domains import Domain, Topology, format_cpu_list, parse_cpu_list
from scalpel_executor.host.sysfs import detect_topology, resolve_topology

try:
    from sysfs_trees import amd_4ccx, build_tree, this_machine, two_packages_no_cache, xeon_e5620_2s
except ImportError:
    # Under --import-mode=importlib (see pyproject.toml) pytest does not put tests/ on sys.path.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from sysfs_trees import amd_4ccx, build_tree, this_machine, two_packages_no_cache, xeon_e5620_2s

MiB = 1024 * 1024
ALL = range(1024)  # "every CPU is allowed" for fake machines bigger than this one


# The big trees are built once per module: thousands of small files cost real time, and
# tests only read them (tests that alter a tree build their own).
@pytest.fixture(scope="module")
def xeon_root(tmp_path_factory):
    return xeon_e5620_2s(tmp_path_factory.mktemp("xeon"))


@pytest.fixture(scope="module")
def amd_smt_root(tmp_path_factory):
    return amd_4ccx(tmp_path_factory.mktemp("amd_smt"), smt=True)


def cpus_of(topology: Topology) -> list[tuple[int, ...]]:
    return [domain.cpus for domain in topology.domains]


# --------------------------------------------------------------------------------------------
# detect() on fake sysfs trees
# --------------------------------------------------------------------------------------------


def test_one_socket_two_cpus_like_this_machine(tmp_path):
    topo = detect_topology(this_machine(tmp_path), allowed_cpus={0, 1})
    assert cpus_of(topo) == [(0, 1)]
    assert topo.source == "sysfs:L3"
    assert topo.llc_size == 32 * MiB
    assert topo.domains[0].llc_size == 32 * MiB
    assert topo.domains[0].index == 0


def test_xeon_e5620_without_smt_keeps_one_thread_per_core(xeon_root):
    topo = detect_topology(xeon_root, allowed_cpus=ALL)
    assert cpus_of(topo) == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert topo.source == "sysfs:L3"
    assert [d.llc_size for d in topo.domains] == [12 * MiB, 12 * MiB]
    assert topo.processors == 2
    assert topo.cores_per_domain == (4, 4)
    assert topo.total_cores == 8
    assert topo.is_uniform()


def test_xeon_e5620_with_smt_keeps_every_thread(xeon_root):
    topo = detect_topology(xeon_root, allowed_cpus=ALL, smt=True)
    assert cpus_of(topo) == [(0, 1, 2, 3, 8, 9, 10, 11), (4, 5, 6, 7, 12, 13, 14, 15)]
    assert topo.cores_per_domain == (8, 8)
    # Slot order is domain by domain, not CPU-number order.
    assert topo.cpus == (0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15)


def test_siblings_come_from_thread_siblings_list_on_older_kernels(tmp_path):
    root = build_tree(tmp_path, 4, llc_groups=[range(4)], siblings=[[0, 2], [1, 3]],
                      core_cpus_list=False)
    assert not (root / "devices/system/cpu/cpu0/topology/core_cpus_list").exists()
    assert cpus_of(detect_topology(root, allowed_cpus=ALL)) == [(0, 1)]


@pytest.mark.parametrize("smt", [False, True])
def test_amd_four_ccx_with_smt_siblings(amd_smt_root, smt):
    # 4 CCX x 8 cores with 2 threads each; thread N+32 is the sibling of N.
    topo = detect_topology(amd_smt_root, allowed_cpus=ALL, smt=smt)
    assert topo.source == "sysfs:L3"
    assert topo.llc_size == 32 * MiB
    for i, domain in enumerate(topo.domains):
        cores = list(range(8 * i, 8 * i + 8))
        expected = cores + [cpu + 32 for cpu in cores] if smt else cores
        assert domain.cpus == tuple(expected)
        assert domain.llc_size == 32 * MiB
    assert topo.cores_per_domain == ((16,) * 4 if smt else (8,) * 4)


def test_cpuset_restriction_gives_unequal_domains(xeon_root):
    topo = detect_topology(xeon_root, allowed_cpus={0, 1, 2, 5})
    assert cpus_of(topo) == [(0, 1, 2), (5,)]
    assert topo.cores_per_domain == (3, 1)
    assert not topo.is_uniform()
    assert [d.index for d in topo.domains] == [0, 1]


def test_domains_emptied_by_the_cpuset_are_dropped_and_renumbered(xeon_root):
    topo = detect_topology(xeon_root, allowed_cpus={4, 5})
    assert cpus_of(topo) == [(4, 5)]
    assert topo.domains[0].index == 0
    assert topo.llc_size == 12 * MiB


def test_lowest_allowed_sibling_stands_for_its_core(xeon_root):
    # CPU 0 is excluded but its sibling 8 is allowed: the core is kept, as CPU 8.
    topo = detect_topology(xeon_root, allowed_cpus={8, 9, 1, 12})
    assert cpus_of(topo) == [(1, 8), (12,)]


def test_both_siblings_allowed_counts_one_core_unless_smt(xeon_root):
    root = xeon_root
    assert cpus_of(detect_topology(root, allowed_cpus={0, 8})) == [(0,)]
    assert cpus_of(detect_topology(root, allowed_cpus={0, 8}, smt=True)) == [(0, 8)]


def test_allowed_cpus_accepts_a_cpu_list_string(xeon_root):
    topo = detect_topology(xeon_root, allowed_cpus="0-2,5")
    assert cpus_of(topo) == [(0, 1, 2), (5,)]


def test_default_allowed_cpus_is_the_affinity_mask(xeon_root, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {1, 2, 6}, raising=False)
    topo = detect_topology(xeon_root)
    assert cpus_of(topo) == [(1, 2), (6,)]


def test_offline_cpu_is_skipped(tmp_path):
    root = build_tree(tmp_path, 6, llc_groups=[range(3), range(3, 6)], offline={2})
    topo = detect_topology(root, allowed_cpus=ALL)
    assert cpus_of(topo) == [(0, 1), (3, 4, 5)]


def test_offline_first_thread_hands_its_core_to_the_sibling(tmp_path):
    root = build_tree(tmp_path, 4, llc_groups=[range(4)], siblings=[[0, 2], [1, 3]], offline={0})
    assert cpus_of(detect_topology(root, allowed_cpus=ALL)) == [(1, 2)]


def test_no_cache_directories_fall_back_to_packages(tmp_path):
    topo = detect_topology(two_packages_no_cache(tmp_path), allowed_cpus=ALL)
    assert topo.source == "sysfs:package"
    assert cpus_of(topo) == [(0, 1), (2, 3)]
    assert topo.llc_size is None
    assert all(d.llc_size is None for d in topo.domains)


@pytest.mark.parametrize("make_root", [lambda p: p, lambda p: p / "missing"])
def test_no_cpu_tree_falls_back_to_one_domain_of_allowed_cpus(tmp_path, make_root):
    topo = detect_topology(make_root(tmp_path), allowed_cpus={0, 1, 2, 5})
    assert topo.source == "psutil"
    assert cpus_of(topo) == [(0, 1, 2, 5)]
    assert topo.llc_size is None


def test_psutil_fallback_defaults_to_the_affinity_mask(tmp_path):
    topo = detect_topology(tmp_path)
    assert set(topo.cpus) == set(os.sched_getaffinity(0))
    assert topo.processors == 1


def test_llc_is_the_highest_level_present(tmp_path):
    root = build_tree(tmp_path, 4, llc_groups=[[0, 1], [2, 3]], llc_level=2, llc_size="1024K")
    topo = detect_topology(root, allowed_cpus=ALL)
    assert topo.source == "sysfs:L2"
    assert cpus_of(topo) == [(0, 1), (2, 3)]
    assert topo.llc_size == 1 * MiB
    assert "L2 1.0 MiB" in topo.describe()


def test_instruction_caches_never_decide_the_llc(tmp_path):
    root = build_tree(tmp_path, 2, llc_groups=[[0], [1]], llc_level=2, llc_size="512K")
    # A (fictional) shared level-3 instruction cache must be ignored.
    for cpu in (0, 1):
        index = root / f"devices/system/cpu/cpu{cpu}/cache/index9"
        index.mkdir()
        for name, text in [("level", "3"), ("type", "Instruction"), ("shared_cpu_list", "0-1"),
                           ("size", "8192K")]:
            (index / name).write_text(text + "\n")
    topo = detect_topology(root, allowed_cpus=ALL)
    assert topo.source == "sysfs:L2"
    assert cpus_of(topo) == [(0,), (1,)]


def test_shared_cpu_map_is_used_when_the_list_is_missing(tmp_path):
    root = build_tree(tmp_path, 8, llc_groups=[range(4), range(4, 8)], private_caches=False)
    for path in root.glob("devices/system/cpu/cpu*/cache/index*/shared_cpu_list"):
        shared = parse_cpu_list(path.read_text())
        path.with_name("shared_cpu_map").write_text(f"00000000,{sum(1 << c for c in shared):08x}\n")
        path.unlink()
    topo = detect_topology(root, allowed_cpus=ALL)
    assert cpus_of(topo) == [(0, 1, 2, 3), (4, 5, 6, 7)]


def test_unreadable_llc_size_becomes_unknown_with_a_warning(tmp_path, caplog):
    root = this_machine(tmp_path)
    for cpu in (0, 1):
        (root / f"devices/system/cpu/cpu{cpu}/cache/index3/size").write_text("lots\n")
    with caplog.at_level(logging.WARNING, logger="scalpel_executor.core.domains"):
        topo = detect_topology(root, allowed_cpus=ALL)
    assert cpus_of(topo) == [(0, 1)]
    assert topo.llc_size is None
    assert "lots" in caplog.text


def test_nothing_allowed_names_found_and_allowed_cpus(xeon_root):
    with pytest.raises(ValueError) as info:
        detect_topology(xeon_root, allowed_cpus={100, 101})
    message = str(info.value)
    assert "0-15" in message and "100-101" in message and "taskset" in message


def test_detect_on_this_machine():
    allowed = os.sched_getaffinity(0)
    topo = detect_topology()
    assert topo.processors >= 1
    assert set(topo.cpus) <= allowed
    assert all(domain.cores >= 1 for domain in topo.domains)
    json.dumps(topo.to_dict())


# --------------------------------------------------------------------------------------------
# from_spec
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, cores, llc",
    [
        ("2x4:12MiB", (4, 4), 12 * MiB),
        ("2x4", (4, 4), None),
        ("8x8:32MiB", (8,) * 8, 32 * MiB),
        ("4+2:16MiB", (4, 2), 16 * MiB),
        (" 2 X 4 : 12 MiB ", (4, 4), 12 * MiB),
        ("2x4:12288K", (4, 4), 12 * MiB),
        ("2x4+2", (4, 4, 2), None),
        ("4", (4,), None),
    ],
)
def test_spec_builds_consecutively_numbered_domains(spec, cores, llc):
    topo = Topology.from_spec(spec)
    assert topo.source == "spec"
    assert topo.cores_per_domain == cores
    assert topo.cpus == tuple(range(sum(cores)))
    assert all(d.llc_size == llc for d in topo.domains)
    assert topo.llc_size == llc


def test_spec_cpus_are_not_limited_to_this_machine():
    topo = Topology.from_spec("8x8:32MiB")
    assert topo.domains[7].cpus == tuple(range(56, 64))


@pytest.mark.parametrize(
    "spec",
    ["", "   ", "2x", "x4", "0x4", "2x0", "2x4:lots", "-1x4", "2x4:", "2x4:0", "2x4+", "+4",
     "2*4", ":12MiB", "2x4x4", "2.5x4", "100000x100000"],
)
def test_malformed_spec_is_rejected_with_the_accepted_form(spec):
    with pytest.raises(ValueError) as info:
        Topology.from_spec(spec)
    message = str(info.value)
    assert repr(spec) in message
    assert "2x4:12MiB" in message


@settings(max_examples=50)  # keeps the file well under 2 s
@given(st.lists(st.integers(min_value=1, max_value=16), min_size=1, max_size=12))
def test_spec_of_any_core_counts_round_trips(cores):
    topo = Topology.from_spec("+".join(map(str, cores)) + ":1MiB")
    assert list(topo.cores_per_domain) == cores
    assert topo.cpus == tuple(range(sum(cores)))
    assert [topo.domain_of(cpu).index for cpu in topo.cpus] == [
        i for i, n in enumerate(cores) for _ in range(n)
    ]


# --------------------------------------------------------------------------------------------
# from_cpu_lists
# --------------------------------------------------------------------------------------------


def test_cpu_lists_with_size_string():
    topo = Topology.from_cpu_lists([[0, 1], [2, 3]], llc_size="12MiB", allowed_cpus=range(4))
    assert topo.source == "cpu-lists"
    assert cpus_of(topo) == [(0, 1), (2, 3)]
    assert topo.llc_size == 12 * MiB


def test_cpu_lists_size_in_bytes_or_unknown():
    assert Topology.from_cpu_lists([[0]], llc_size=4096, allowed_cpus={0}).llc_size == 4096
    assert Topology.from_cpu_lists([[0]], allowed_cpus={0}).llc_size is None


def test_cpu_lists_are_sorted_and_numbered_by_lowest_cpu():
    topo = Topology.from_cpu_lists([[5, 4], "0-1"], allowed_cpus=range(8))
    assert cpus_of(topo) == [(0, 1), (4, 5)]
    assert [d.index for d in topo.domains] == [0, 1]


def test_cpu_lists_default_to_the_affinity_mask():
    allowed = sorted(os.sched_getaffinity(0))
    topo = Topology.from_cpu_lists([[cpu] for cpu in allowed])
    assert topo.cpus == tuple(allowed)


@pytest.mark.parametrize(
    "cpu_lists, expected",
    [
        ([], ["empty"]),
        ([[0], []], ["domain 1", "empty"]),
        ([[0, 1], [1, 2]], ["CPU 1", "domain 0", "domain 1"]),
        ([[0, 0]], ["CPU 0", "twice"]),
        ([[-1]], ["-1"]),
        ([[1.5]], ["1.5"]),
        ([["3"]], ["'3'"]),
        ([[True]], ["True"]),
        ([[0], [7]], ["CPU 7", "domain 1", "allowed: 0-3", "taskset"]),
        ("0-3", ["'0-3'", "from_spec"]),
        ([["0-x"]], ["'0-x'"]),
    ],
)
def test_bad_cpu_lists_name_the_bad_value(cpu_lists, expected):
    with pytest.raises(ValueError) as info:
        Topology.from_cpu_lists(cpu_lists, allowed_cpus=range(4))
    for fragment in expected:
        assert fragment in str(info.value)


@pytest.mark.parametrize("llc_size", ["lots", -1, 0])
def test_bad_llc_size_is_rejected(llc_size):
    with pytest.raises(ValueError, match=repr(llc_size)):
        Topology.from_cpu_lists([[0]], llc_size=llc_size, allowed_cpus={0})


# --------------------------------------------------------------------------------------------
# resolve
# --------------------------------------------------------------------------------------------


def test_resolve_none_detects(xeon_root):
    topo = resolve_topology(None, sysfs_root=xeon_root, allowed_cpus=ALL, smt=True)
    assert topo.source == "sysfs:L3"
    assert topo.cores_per_domain == (8, 8)


def test_resolve_passes_topologies_specs_and_cpu_lists():
    spec = Topology.from_spec("2x4")
    assert resolve_topology(spec) is spec
    assert resolve_topology("4+2:16MiB").cores_per_domain == (4, 2)
    topo = resolve_topology([[0], [1]], allowed_cpus={0, 1})
    assert topo.source == "cpu-lists" and cpus_of(topo) == [(0,), (1,)]
    with pytest.raises(ValueError, match="CPU 7"):
        resolve_topology([[7]], allowed_cpus={0, 1})


@pytest.mark.parametrize("bad", [42, 2.5, {"a": 1}])
def test_resolve_rejects_other_types(bad):
    with pytest.raises(TypeError, match=type(bad).__name__):
        resolve_topology(bad)


# --------------------------------------------------------------------------------------------
# CPU list text
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, cpus",
    [
        ("0-3,8,10-11", [0, 1, 2, 3, 8, 10, 11]),
        ("5\n", [5]),
        (" 0-1 ", [0, 1]),
        ("3, 1", [1, 3]),
        ("0-2,1", [0, 1, 2]),
        ("", []),
        ("\n", []),
    ],
)
def test_parse_cpu_list(text, cpus):
    assert parse_cpu_list(text) == cpus


@pytest.mark.parametrize("text", ["a", "1-", "-1", "3-1", "1,,2", "0-3,x", "1 2", "0-99999999", "1.5"])
def test_malformed_cpu_list_names_the_text(text):
    with pytest.raises(ValueError) as info:
        parse_cpu_list(text)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize(
    "cpus, text",
    [([0, 1, 2, 3, 8], "0-3,8"), ([11, 10, 8], "8,10-11"), ([], ""), ([4], "4"), ([2, 2, 3], "2-3")],
)
def test_format_cpu_list(cpus, text):
    assert format_cpu_list(cpus) == text


def test_format_cpu_list_rejects_negative_cpus():
    with pytest.raises(ValueError, match="-2"):
        format_cpu_list([1, -2])


@settings(max_examples=60)
@given(st.sets(st.integers(min_value=0, max_value=300)))
def test_cpu_list_text_round_trips(cpus):
    text = format_cpu_list(cpus)
    assert parse_cpu_list(text) == sorted(cpus)
    assert format_cpu_list(parse_cpu_list(text)) == text
    # Compact, like the kernel: items ascend with gaps, so none could merge into a range.
    bounds = [[int(n) for n in item.split("-")] for item in text.split(",")] if text else []
    for previous, item in zip(bounds, bounds[1:]):
        assert item[0] > previous[-1] + 1
    assert all(len(b) == 1 or b[0] < b[1] for b in bounds)


# --------------------------------------------------------------------------------------------
# The Topology object
# --------------------------------------------------------------------------------------------


def test_to_dict_is_json_ready(xeon_root):
    topo = detect_topology(xeon_root, allowed_cpus={0, 1, 2, 5})
    data = json.loads(json.dumps(topo.to_dict()))
    assert data == {
        "source": "sysfs:L3",
        "processors": 2,
        "total_cores": 4,
        "domains": [
            {"index": 0, "cpus": [0, 1, 2], "llc_size": 12 * MiB, "llc_size_human": "12.0 MiB"},
            {"index": 1, "cpus": [5], "llc_size": 12 * MiB, "llc_size_human": "12.0 MiB"},
        ],
    }
    unknown = json.loads(json.dumps(Topology.from_spec("2x2").to_dict()))
    assert unknown["domains"][0]["llc_size"] is None
    assert unknown["domains"][0]["llc_size_human"] is None


def test_describe(xeon_root):
    text = detect_topology(xeon_root, allowed_cpus=ALL).describe()
    lines = text.splitlines()
    assert lines[0] == "2 LLC domains (sysfs:L3), 8 cores"
    assert lines[1] == "  domain 0: 4 cores, CPUs 0-3, L3 12.0 MiB"
    assert lines[2] == "  domain 1: 4 cores, CPUs 4-7, L3 12.0 MiB"
    assert "LLC size unknown" in Topology.from_spec("1").describe()
    assert Topology.from_spec("1").describe().startswith("1 LLC domain (spec), 1 core\n")


def test_domain_of():
    topo = Topology.from_spec("2x4:12MiB")
    assert topo.domain_of(0) is topo.domains[0]
    assert topo.domain_of(7) is topo.domains[1]
    for bad in (8, -1, "a"):
        with pytest.raises(KeyError) as info:
            topo.domain_of(bad)
        assert repr(bad) in str(info.value) and "0-7" in str(info.value)


def test_llc_size_is_the_smallest_known():
    topo = Topology(
        (Domain(0, (0, 1), 12 * MiB), Domain(1, (2,), 8 * MiB), Domain(2, (3,), None)), "spec"
    )
    assert topo.llc_size == 8 * MiB
    assert Topology((Domain(0, (0,), None),), "spec").llc_size is None


def test_domain_sorts_its_cpus_and_is_hashable():
    domain = Domain(0, [3, 1, 2], None)
    assert domain.cpus == (1, 2, 3) and domain.cores == 3
    assert hash(domain) == hash(Domain(0, (1, 2, 3), None))
    assert Topology.from_spec("2x2") == Topology.from_spec("2 x 2")


@pytest.mark.parametrize(
    "domains, fragment",
    [
        ((), "at least one domain"),
        ((Domain(0, (0, 1)), Domain(1, (1, 2))), "CPU 1"),
        ((Domain(1, (0,)),), "index 1"),
        ((Domain(0, (4,)), Domain(1, (0,))), "lowest CPU"),
    ],
)
def test_topology_invariants(domains, fragment):
    with pytest.raises(ValueError, match=fragment):
        Topology(domains, "spec")


@pytest.mark.parametrize("kwargs, fragment", [({"cpus": ()}, "no CPUs"), ({"cpus": (1, 1)}, "CPU"),
                                              ({"cpus": (0,), "llc_size": 0}, "llc_size")])
def test_domain_invariants(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        Domain(index=0, **kwargs)
