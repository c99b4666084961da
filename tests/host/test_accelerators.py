"""available_accelerators as device ids, and which NUMA node's CPUs each device sits near (a fake sysfs)."""

from pathlib import Path

import pytest

from scalpel_executor.host.accelerators import device_cpus, pick_devices, resolve_accelerators


def fake_sysfs(root: Path, devices: list[tuple[str, str, int]], nodes: dict[int, str]) -> Path:
    """PCI devices (address, class, numa node) and NUMA nodes (cpulist), as Linux lays them out."""
    for address, pci_class, node in devices:
        directory = root / "bus" / "pci" / "devices" / address
        directory.mkdir(parents=True)
        (directory / "class").write_text(pci_class + "\n")
        (directory / "numa_node").write_text(f"{node}\n")
    for node, cpulist in nodes.items():
        directory = root / "devices" / "system" / "node" / f"node{node}"
        directory.mkdir(parents=True)
        (directory / "cpulist").write_text(cpulist + "\n")
    return root


def test_numeric_ids_are_gpus_in_pci_bus_order_each_near_its_nodes_cpus(tmp_path):
    root = fake_sysfs(tmp_path, [("0000:3b:00.0", "0x030200", 0), ("0000:00:02.0", "0x060000", 0),
                                 ("0000:d8:00.0", "0x030200", 1), ("0000:af:00.0", "0x030000", -1)],
                      {0: "0-7", 1: "8-15"})
    near = device_cpus(["0", "1", "2", "3", "GPU-abc"], root)
    # bus order of the accelerators: 3b (node 0), af (no node), d8 (node 1); the bridge at 00:02 is none
    assert near == {"0": frozenset(range(8)), "2": frozenset(range(8, 16))}
    assert device_cpus(["0"], tmp_path / "missing") == {}


def test_a_task_is_given_the_free_devices_near_its_cpus_first():
    near = {"0": frozenset(range(8)), "1": frozenset(range(8)), "2": frozenset(range(8, 16))}
    assert pick_devices(["0", "1", "2"], 1, [9], near) == ["2"]
    assert pick_devices(["0", "1", "2"], 2, [9], near) == ["2", "0"]
    assert pick_devices(["1", "0"], 1, [3], near) == ["1"]
    assert pick_devices(["5", "6"], 1, [3], {}) == ["5"]  # nothing known: the order given


def test_available_accelerators_is_a_count_or_distinct_ids():
    assert resolve_accelerators(None) == () and resolve_accelerators(0) == ()
    assert resolve_accelerators(3) == ("0", "1", "2")
    for bad in (-1, "0,1", True, ["0", ""], ["0,1"]):
        with pytest.raises(ValueError, match="available_accelerators"):
            resolve_accelerators(bad)
