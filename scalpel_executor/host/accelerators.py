"""Accelerators a node's tasks may use, named as HTEX names them (``available_accelerators``).

A task that asks for ``gpus=k`` is given k distinct ids of the node's list, for its run only, in
every variable the common runtimes read (:data:`DEVICE_ENV_VARS`: CUDA, ROCm and oneAPI Level
Zero); a task that asks for none, on a node with accelerators, is given none (the variables are
set empty), so it cannot take a device another task was given. Of the free ids, a task is given
those on the NUMA node of its CPUs first, where sysfs tells which node a device sits on
(:func:`device_cpus`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from scalpel_executor.core.cpulist import parse_cpu_list

__all__ = ["DEVICE_ENV_VARS", "resolve_accelerators", "device_env", "device_cpus", "pick_devices"]

#: What CUDA, ROCm (HIP) and oneAPI Level Zero read to choose their visible devices.
DEVICE_ENV_VARS = ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK")


def resolve_accelerators(value: int | Sequence[str] | None) -> tuple[str, ...]:
    """``available_accelerators`` as device ids: a count n is ``"0"`` … ``"n-1"``, a list is kept.

    >>> resolve_accelerators(2)
    ('0', '1')
    >>> resolve_accelerators(["0", "3"])
    ('0', '3')
    >>> resolve_accelerators(["0", "0"])
    Traceback (most recent call last):
    ...
    ValueError: available_accelerators names device '0' twice in ['0', '0']; each id is one device
    """
    if value is None:
        return ()
    if isinstance(value, bool) or isinstance(value, (str, bytes)):
        raise ValueError(f"available_accelerators must be a count such as 4 or a list of device ids such as "
                         f"['0', '1'], got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"available_accelerators must be a count >= 0 or a list of device ids, got {value!r}")
        return tuple(str(i) for i in range(value))
    ids = list(value)
    for device in ids:
        if not isinstance(device, str) or not device.strip() or "," in device:
            raise ValueError(f"available_accelerators ids must be non-empty strings without commas, such as '0' "
                             f"or 'GPU-5e1b...', got {device!r} in {ids!r}")
    for device in ids:
        if ids.count(device) > 1:
            raise ValueError(f"available_accelerators names device {device!r} twice in {ids!r}; each id is one device")
    return tuple(ids)


def device_env(devices: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The environment that shows a task ``devices`` and no other."""
    value = ",".join(devices)
    return tuple((name, value) for name in DEVICE_ENV_VARS)


#: PCI classes of display and 3D controllers (GPUs), and of processing accelerators.
_ACCELERATOR_CLASSES = ("0x0300", "0x0302", "0x1200")


def device_cpus(devices: Sequence[str], sysfs_root: str | os.PathLike = "/sys") -> dict[str, frozenset[int]]:
    """The CPUs of the NUMA node each device sits on, where sysfs tells.

    A numeric id ``i`` is read as the i-th accelerator in PCI bus order (``CUDA_DEVICE_ORDER=PCI_BUS_ID``,
    ROCm's default); its ``numa_node`` gives the node, and the node's ``cpulist`` its CPUs. Ids that
    are not numbers, devices past the count found, a node of -1 (none) or a tree without these files
    are left out: nothing is known of them.
    """
    root = Path(sysfs_root)
    pci = root / "bus" / "pci" / "devices"
    try:
        found = sorted(entry for entry in pci.iterdir()
                       if (entry / "class").is_file() and (entry / "class").read_text().strip()[:6] in _ACCELERATOR_CLASSES)
    except OSError:
        return {}
    near: dict[str, frozenset[int]] = {}
    for device in devices:
        if not device.isdigit() or int(device) >= len(found):
            continue
        try:
            node = int((found[int(device)] / "numa_node").read_text().strip())
            if node < 0:
                continue
            text = (root / "devices" / "system" / "node" / f"node{node}" / "cpulist").read_text().strip()
        except (OSError, ValueError):
            continue
        near[device] = frozenset(parse_cpu_list(text))
    return near


def pick_devices(free: Sequence[str], count: int, cpus: Sequence[int], near: dict[str, frozenset[int]]) -> list[str]:
    """``count`` of the ``free`` ids for a task on ``cpus``: those on the NUMA node of its CPUs first,
    then the rest, each in the order given.

    >>> pick_devices(["0", "1", "2"], 1, [4], {"0": frozenset({0, 1}), "2": frozenset({4, 5})})
    ['2']
    """
    ranked = sorted(range(len(free)), key=lambda i: (not near.get(free[i], frozenset()) & set(cpus), i))
    return [free[i] for i in ranked[:count]]
