"""The worker process: one per core, pinned, running one task at a time.

Data flow (one worker; the node scheduler holds the other end of the socket pair)::

    node scheduler thread                         worker process (this module)
    ─────────────────────                         ────────────────────────────
    spawn: python -m scalpel_executor.worker FD --cpus 0 --slot 0   (own session, env with
           OMP/BLAS thread counts, pinned to its core before it says anything)
                          <── ("ready", pid)
    ("task", id, buffer) ──>  unpack_apply_message(buffer) → fn(*args, **kwargs)
                          <── ("result", id, ok, serialized result or RemoteExceptionWrapper, stats)
    ("stop",)            ──>  exit 0
    socket closed (EOF)  ──>  exit 0: the node scheduler is gone

Only one message is ever in flight per direction: the scheduler sends a task only to an idle
worker, so the socket needs no queue of its own. The payload is Parsl's own serialization
(``parsl.serialize``); the envelope is a pickled tuple of numbers, strings and bytes that only
ever crosses this private socket pair.

A worker outlives nothing: when the scheduler process dies, the socket reaches EOF between tasks,
and a watchdog thread notices the parent's pid change during a long task; either way the worker
kills its own process group (itself and any ``bash_app`` children) and exits.
"""

from __future__ import annotations

import argparse
import os
import pickle
import resource
import signal
import sys
import threading
import time
from multiprocessing.connection import Connection

PARENT_CHECK_INTERVAL = 1.0  # seconds between checks that the scheduler process still lives


def _watch_parent(parent_pid: int) -> None:
    while True:
        time.sleep(PARENT_CHECK_INTERVAL)
        if os.getppid() != parent_pid:
            os.killpg(0, signal.SIGKILL)


def _run(buffer: bytes) -> tuple[bool, bytes]:
    from parsl.app.errors import RemoteExceptionWrapper
    from parsl.serialize import serialize, unpack_apply_message

    try:
        func, args, kwargs = unpack_apply_message(buffer)
        result = func(*args, **kwargs)
    except BaseException:  # noqa: BLE001 - every failure of user code travels back to the caller
        return False, serialize(RemoteExceptionWrapper(*sys.exc_info()))
    try:
        return True, serialize(result)
    except BaseException as error:  # noqa: BLE001 - an unpicklable result fails this task alone
        try:
            raise TypeError(f"the task's result of type {type(result).__name__} cannot be serialized: {error}") from error
        except TypeError:
            return False, serialize(RemoteExceptionWrapper(*sys.exc_info()))


def serve(connection: Connection, parent_pid: int) -> None:
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True, name="parent-watch").start()
    connection.send_bytes(pickle.dumps(("ready", os.getpid())))
    while True:
        try:
            message = pickle.loads(connection.recv_bytes())
        except (EOFError, OSError):
            return
        if message[0] == "stop":
            return
        _, task_id, buffer = message
        wall_start, cpu_start = time.perf_counter(), time.process_time()
        ok, payload = _run(buffer)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        stats = {
            "wall": time.perf_counter() - wall_start,
            "cpu": time.process_time() - cpu_start,
            "max_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "children_cpu": children.ru_utime + children.ru_stime,
        }
        try:
            connection.send_bytes(pickle.dumps(("result", task_id, ok, payload, stats), protocol=pickle.HIGHEST_PROTOCOL))
        except (EOFError, OSError):
            return


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scalpel_executor.worker", description=__doc__.splitlines()[0])
    parser.add_argument("fd", type=int, help="file descriptor of this worker's end of the socket pair")
    parser.add_argument("--cpus", required=True, help="comma-separated CPUs to pin to")
    parser.add_argument("--parent", type=int, required=True, help="pid of the node scheduler process")
    args = parser.parse_args(argv)
    cpus = {int(c) for c in args.cpus.split(",")}
    os.sched_setaffinity(0, cpus)
    for entry in reversed(os.environ.get("SCALPEL_SYS_PATH", "").split(os.pathsep)):
        if entry and entry not in sys.path:
            sys.path.insert(0, entry)
    serve(Connection(args.fd), args.parent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
