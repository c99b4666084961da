"""Accelerators a node's tasks may use, named as HTEX names them (``available_accelerators``).

A task that asks for ``gpus=k`` is given k distinct ids of the node's list, for its run only, in
every variable the common runtimes read (:data:`DEVICE_ENV_VARS`: CUDA, ROCm and oneAPI Level
Zero); a task that asks for none, on a node with accelerators, is given none (the variables are
set empty), so it cannot take a device another task was given.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["DEVICE_ENV_VARS", "resolve_accelerators", "device_env"]

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
