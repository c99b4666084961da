"""The messages between the worker pool and a worker: one definition of each, and their encoding.

::

    pool                                   worker (one per core, pinned)
      │                    <── Ready(pid)   imported the minimum; takes tasks from now on
      │                    <── Warm()       imported what tasks need (Parsl's serialization, ...)
      │  Run(task_id, buffer, measure,  ──>  one at a time: a worker holds at most one task;
      │      cpus, env)                     measure: the probe measures it (the driver decides);
      │                                     cpus: the task's CPUs when it has more than the worker's
      │                                     core (its threads follow), env: its accelerators
      │  <── WorkerResult(task_id, ok, payload, stats)
      │  Stop() ──>                         exit 0

The task and its result are opaque bytes here (Parsl's serialization); the envelope is a pickled
tuple of numbers, strings and bytes, tagged by kind, so both ends agree on one layout and a
message of an unknown kind fails loudly instead of being misread. The channel is a socketpair
between a process and the children it spawned: nobody else can write to it.
"""

from __future__ import annotations

import pickle
from typing import Any, NamedTuple, Union

__all__ = ["Ready", "Warm", "Run", "Measured", "WorkerResult", "Stop", "Message", "PARENT_CHECK_INTERVAL", "encode",
           "decode"]

#: Seconds between a child's checks that the process that spawned it still lives (a getppid
#: call): a worker's of its pool's process, a node manager's of its driver. Either ends when the
#: answer changes, so no process outlives the one it works for by more than this.
PARENT_CHECK_INTERVAL = 0.2


class Ready(NamedTuple):
    pid: int


class Warm(NamedTuple):
    pass


class Run(NamedTuple):
    task_id: int
    buffer: bytes
    measure: bool = True  # start the probe around this task (a worker started with --probe off never does)
    cpus: tuple[int, ...] = ()  # the task's CPUs and thread count for its run; (): the worker's own
    env: tuple[tuple[str, str], ...] = ()  # environment for its run only (accelerator ids)
    memory: int = 0  # bytes it declared, enforced (enforce_memory=True); 0: not enforced


class Measured(NamedTuple):
    """The probe's first reading of a running task's footprint, before its WorkerResult (at most one)."""

    task_id: int
    footprint: float  # bytes


class WorkerResult(NamedTuple):
    task_id: int
    ok: bool  # True: payload is the serialized result; False: a serialized RemoteExceptionWrapper
    payload: bytes
    stats: dict[str, Any]  # wall time, the probe's measurements


class Stop(NamedTuple):
    pass


Message = Union[Ready, Warm, Run, Measured, WorkerResult, Stop]
_KINDS: dict[str, type] = {"ready": Ready, "warm": Warm, "task": Run, "measured": Measured, "result": WorkerResult,
                           "stop": Stop}
_TAGS = {kind: tag for tag, kind in _KINDS.items()}


def encode(message: Message) -> bytes:
    """The bytes of one message.

    >>> decode(encode(Run(7, b"call", False))) == Run(7, b"call", False)
    True
    """
    return pickle.dumps((_TAGS[type(message)], *message), protocol=pickle.HIGHEST_PROTOCOL)


def decode(data: bytes) -> Message:
    """The message in ``data``; ValueError for anything that is not one."""
    envelope = pickle.loads(data)
    try:
        return _KINDS[envelope[0]](*envelope[1:])
    except (KeyError, TypeError, IndexError):
        raise ValueError(f"not a worker protocol message: {envelope!r:.200}") from None
