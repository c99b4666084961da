"""Accelerators a node's tasks may use, named as HTEX names them (``available_accelerators``).

A task that asks for ``gpus=k`` is given k distinct ids of the node's list, for its run only, in
every variable the common runtimes read (:data:`DEVICE_ENV_VARS`: CUDA, ROCm and oneAPI Level
Zero); a task that asks for none, on a node with accelerators, is given none (the variables are
set empty), so it cannot take a device another task was given. Where sysfs tells which NUMA node a
device sits on (:func:`device_cpus`), the scheduler knows which LLC domains are near it
(:func:`device_domains`): a task is started on a domain near free devices and given those first.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from scalpel_executor.core.cpulist import parse_cpu_list

__all__ = ["DEVICE_ENV_VARS", "resolve_accelerators", "device_env", "device_cpus", "device_domains"]

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


def device_domains(devices: Sequence[str], domain_cpus: Sequence[Sequence[int]],
                   sysfs_root: str | os.PathLike = "/sys") -> tuple[frozenset[int], ...]:
    """For each device, the LLC domains (indices into ``domain_cpus``) that share CPUs with the NUMA
    node it sits on; an empty set where sysfs does not tell (:func:`device_cpus`).

    The scheduler starts an accelerator task on such a domain when one has cores free, and gives
    it those devices first (:func:`scalpel_executor.core.resources.nearer_domain`).
    """
    near = device_cpus(devices, sysfs_root)
    return tuple(frozenset(d for d, cpus in enumerate(domain_cpus) if near.get(device, frozenset()) & set(cpus))
                 for device in devices)
