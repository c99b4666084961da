"""Hardware LLC counters of the worker, through ``perf_event_open`` called with ctypes.

Runs in the worker, not in the sampler: the counters are opened with ``inherit`` on the worker
itself, so they also count the children a task starts, and the worker's
:class:`~scalpel_executor.host.probe.worker_side.Probe` reads them at a task's start and stop (two
8-byte reads, no message to the sampler). Where the machine has no ``cpu`` PMU (virtual machines) or
the kernel refuses (``perf_event_paranoid``), there are no counters and the probe reports None for
them.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import platform
import struct

# One logger for the whole probe, named as the package, so one setting covers it.
logger = logging.getLogger("scalpel_executor.host.probe")

_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241, "ppc64le": 319, "s390x": 331, "riscv64": 241}
_PERF_TYPE_HARDWARE = 0
_PERF_COUNT_HW_CACHE_REFERENCES = 2
_PERF_COUNT_HW_CACHE_MISSES = 3
_PERF_FLAG_FD_CLOEXEC = 1 << 3
_ATTR_DISABLED, _ATTR_INHERIT, _ATTR_EXCLUDE_KERNEL, _ATTR_EXCLUDE_HV = 1 << 0, 1 << 1, 1 << 5, 1 << 6
_PERF_ATTR_SIZE = 64  # PERF_ATTR_SIZE_VER0: every kernel with perf events accepts it
_PERF_EVENT_IOC_ENABLE = 0x2400


def llc_counter_problem(event_source_root: str) -> str | None:
    """None when LLC counters can be asked for here, else why not (only looks at files)."""
    if not os.path.isdir(os.path.join(event_source_root, "cpu")):
        return f"no hardware performance counters (no 'cpu' event source in {event_source_root})"
    if _PERF_EVENT_OPEN.get(platform.machine()) is None:
        return f"perf_event_open syscall number unknown for {platform.machine()}"
    return None


class LLCCounters:
    """LLC references and misses of this process and the children it starts (``inherit``).

    Open with :meth:`open`, which returns None (and logs why at debug level) wherever the kernel
    offers no hardware counters; :meth:`read` returns ``(references, misses)`` since opening.
    """

    def __init__(self, fds: tuple[int, int]):
        self._fds = fds

    @classmethod
    def open(cls, event_source_root: str = "/sys/bus/event_source/devices") -> LLCCounters | None:
        problem = llc_counter_problem(event_source_root)
        if problem:
            logger.debug("LLC counters unavailable: %s", problem)
            return None
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fds = []
            for config in (_PERF_COUNT_HW_CACHE_REFERENCES, _PERF_COUNT_HW_CACHE_MISSES):
                attr = ctypes.create_string_buffer(struct.pack(
                    "=IIQQQQQ", _PERF_TYPE_HARDWARE, _PERF_ATTR_SIZE, config, 0, 0, 0,
                    _ATTR_DISABLED | _ATTR_INHERIT | _ATTR_EXCLUDE_KERNEL | _ATTR_EXCLUDE_HV,
                ).ljust(_PERF_ATTR_SIZE, b"\0"))
                fd = libc.syscall(_PERF_EVENT_OPEN[platform.machine()], attr, ctypes.c_int(0), ctypes.c_int(-1),
                                  ctypes.c_int(-1), ctypes.c_ulong(_PERF_FLAG_FD_CLOEXEC))
                if fd < 0:
                    code = ctypes.get_errno()
                    for opened in fds:
                        os.close(opened)
                    logger.debug("perf_event_open failed: %s", os.strerror(code) or errno.errorcode.get(code))
                    return None
                fds.append(fd)
            import fcntl

            for fd in fds:
                fcntl.ioctl(fd, _PERF_EVENT_IOC_ENABLE, 0)
            return cls((fds[0], fds[1]))
        except (OSError, AttributeError, ValueError) as error:
            logger.debug("LLC counters unavailable: %s", error)
            return None

    def read(self) -> tuple[int, int]:
        references, misses = (struct.unpack("=Q", os.read(fd, 8))[0] for fd in self._fds)
        return references, misses

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
