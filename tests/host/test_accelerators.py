"""available_accelerators as device ids, and which NUMA node's CPUs each device sits near (a fake sysfs)."""

import pytest

from scalpel_executor.host.accelerators import device_cpus, device_domains, resolve_accelerators
from tests.host.sysfs_trees import pci_devices


def test_numeric_ids_are_gpus_in_pci_bus_order_each_near_its_nodes_cpus(tmp_path):
    root = pci_devices(tmp_path, [("0000:3b:00.0", "0x030200", 0), ("0000:00:02.0", "0x060000", 0),
                                 ("0000:d8:00.0", "0x030200", 1), ("0000:af:00.0", "0x030000", -1)],
                      {0: "0-7", 1: "8-15"})
    near = device_cpus(["0", "1", "2", "3", "GPU-abc"], root)
    # bus order of the accelerators: 3b (node 0), af (no node), d8 (node 1); the bridge at 00:02 is none
    assert near == {"0": frozenset(range(8)), "2": frozenset(range(8, 16))}
    assert device_cpus(["0"], tmp_path / "missing") == {}


def test_available_accelerators_is_a_count_or_distinct_ids():
    assert resolve_accelerators(None) == () and resolve_accelerators(0) == ()
    assert resolve_accelerators(3) == ("0", "1", "2")
    for bad in (-1, "0,1", True, ["0", ""], ["0,1"]):
        with pytest.raises(ValueError, match="available_accelerators"):
            resolve_accelerators(bad)


def test_devices_near_a_domain_come_from_the_numa_node_of_their_pci_device(tmp_path):
    root = pci_devices(tmp_path, [("0000:3b:00.0", "0x030200", 0), ("0000:d8:00.0", "0x030200", 1)],
                      {0: "0-3", 1: "4-7"})
    assert device_domains(["0", "1", "GPU-x"], [[0, 1], [2, 3], [4, 5], [6, 7]], root) == (
        frozenset({0, 1}), frozenset({2, 3}), frozenset())
