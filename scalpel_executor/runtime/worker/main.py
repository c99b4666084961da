"""The worker process: one per core, pinned, running one task at a time.

Data flow (one worker; the worker pool holds the other end of the socket pair; the messages are
defined once, in :mod:`scalpel_executor.runtime.wire.worker_messages`)::

    pool's dispatch thread                        worker process (this module)
    ──────────────────────                        ────────────────────────────
    spawn: python -m scalpel_executor.runtime.worker.main FD --cpus 0 --parent PID   (own group, env
           with OMP/BLAS thread counts, pinned to its core before it says anything)
                          <── Ready(pid)
                              imports Parsl while it waits (_preload), so no first task pays for it
                          <── Warm()          (the executor's start() waits for this; a respawned
                                              worker takes tasks from Ready on)
    Run(id, buffer,      ──>  a task of several cores: affinity set to its CPUs, BLAS/OpenMP threads to
        measure, cpus,        their count (threadpoolctl, and the environment for what it loads or
        env, memory)          starts); env (accelerator ids) set; memory declared (enforce_memory):
                              the worker's memory cgroup limited to its usage + memory + TASK_MARGIN,
                              else RLIMIT_AS to its address space + memory + MEMORY_MARGIN; all
                              restored after it
                              unpack_apply_message(buffer)
                              probe.start() if measure: one message to the probe's sampler process
                              fn(*args, **kwargs)
                          <── Measured(id, footprint)  (measured tasks still running at EARLY_REPORT:
                                                        the probe's first reading, from another thread)
                              probe.stop() if measure: footprint, peak RSS/USS, LLC counts (never waits)
                          <── WorkerResult(id, ok, serialized result or RemoteExceptionWrapper, stats)
                              descriptors 0-2 and sys.stdin/stdout/stderr put back if the task closed,
                              redirected or replaced them (kept copies; one fstat each otherwise)
    Stop()               ──>  exit 0
    socket closed (EOF)  ──>  exit 0: the pool is gone

Only one task is ever in flight per worker: the scheduler sends a task only to an idle worker, so
the socket needs no queue of its own; a measured task may answer twice (Measured, then WorkerResult). The payload is Parsl's own serialization
(``parsl.serialize``); the envelope only ever crosses this private socket pair.

``stats`` always holds ``wall``, ``cpu``, ``max_rss``, ``children_cpu`` and ``cold`` (modules were
imported while it ran: a worker's first call of an app, which pays for its imports); for a task sent with
``measure`` set to a worker with the probe on (``--probe on``, the default, or ``SCALPEL_PROBE=on``
in the environment) it also holds the fields of :class:`~scalpel_executor.host.probe.ProbeReport`
(``footprint``, ``footprint_source``, ``peak_rss``, ``peak_uss``, ``llc_references``,
``llc_misses``, ...). Which tasks are measured is the driver's decision
(:mod:`scalpel_executor.learning.sampling`); an unmeasured task costs the idle sampler nothing.
With ``--probe off`` no sampler process runs. Either way ``footprint`` is None and
``footprint_source`` says why. The sampler is the worker's child, pinned
like it and in its process group, so it ends with it.

Declared memory is enforced in the memory cgroup the pool made for this worker and moved it into
(named in ``SCALPEL_MEMORY_CGROUP``; checked to hold this process before the first limited task),
else under RLIMIT_AS. Past a cgroup's limit the kernel's OOM killer ends the worker, and the pool
fails its task with ``MemoryExceeded``; if it ends a program the task started instead, the worker
fails the task with ``MemoryExceeded``. Past RLIMIT_AS an allocation fails, and so does the task.

A worker outlives nothing: when the process that started it dies, the socket reaches EOF between tasks,
and a watchdog thread notices the parent's pid change during a long task; either way the worker
kills its own process group (itself and any ``bash_app`` children) and exits.
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import signal
import sys
import threading
import time
from multiprocessing.connection import Connection

from scalpel_executor.host.cgroups import MemoryCgroup
from scalpel_executor.host.sysfs import set_affinity
from scalpel_executor.runtime.logs import LOG_DIR_ENV, log_to_file
from scalpel_executor.runtime.worker.task_place import (OOM_KILLED_CHILD, RLIMIT_AS, StandardStreams, TaskPlace,
                                                 holds_this_worker, own_cgroup)
from scalpel_executor.runtime.wire.worker_messages import (PARENT_CHECK_INTERVAL, Measured, Ready, WorkerResult, Run, Warm, decode,
                                               encode)

#: Seconds into a measured task at which its footprint so far is reported (Measured): just after
#: the probe's first window closes (20 ms settle + 80 ms), so tasks of its key still waiting are
#: scheduled by a measurement instead of the prior. The first window also sees the task's start-up
#: allocations, so it reads high rather than low; the WorkerResult's figure replaces it.
EARLY_REPORT = 0.15
PROBE_OFF = {"footprint": None, "footprint_source": "unavailable: probe off"}
NOT_MEASURED = {"footprint": None, "footprint_source": "unavailable: not measured (sampling)"}

logger = logging.getLogger("scalpel_executor.runtime.worker.main")  # not __name__: run as __main__ (-m)


def _watch_parent(parent_pid: int) -> None:
    while True:
        time.sleep(PARENT_CHECK_INTERVAL)
        if os.getppid() != parent_pid:
            os.killpg(0, signal.SIGKILL)


def _run(buffer: bytes, place: TaskPlace | None = None, body_starts=None) -> tuple[bool, bytes]:
    from parsl.serialize import serialize, unpack_apply_message

    from scalpel_executor.runtime.errors import MemoryExceeded, TaskExit

    serving = os.getpid()
    try:
        try:
            func, args, kwargs = unpack_apply_message(buffer)
            if body_starts is not None:
                body_starts()
            result = func(*args, **kwargs)
            if place is not None and place.mechanism == RLIMIT_AS and _wrapped_memory_error(result):
                raise MemoryError(str(result.e_value))  # a python_app returns its failure wrapped
            if type(result).__name__ == "RemoteExceptionWrapper":
                return False, serialize(result)  # a python_app's failure: a failed task, not a result to learn from
        finally:
            if os.getpid() != serving:  # a fork without exec came back here: it must not answer
                os._exit(0)
    except MemoryError as error:
        if place is None or place.mechanism != RLIMIT_AS:
            return False, _serialized_failure(sys.exc_info())
        try:  # past its declaration: name both figures
            raise place.exceeded(repr(error)) from error
        except MemoryExceeded:
            return False, _serialized_failure(sys.exc_info())
    except Exception:  # every failure of user code travels back to the caller
        return False, _serialized_failure(sys.exc_info())
    except BaseException as error:  # noqa: BLE001 - sys.exit() and the like end the task, not the worker
        try:
            raise TaskExit.wrap(error) from error
        except TaskExit:
            return False, _serialized_failure(sys.exc_info())
    try:
        return True, serialize(result)
    except BaseException as error:  # noqa: BLE001 - an unpicklable result fails this task alone
        kind = type(result).__name__
        del result
        try:
            raise TypeError(f"the task's result of type {kind} cannot be serialized: {type(error).__name__}: {error}") from error
        except TypeError:
            return False, _serialized_failure(sys.exc_info())


def _wrapped_memory_error(result) -> bool:
    """Whether ``result`` is Parsl's RemoteExceptionWrapper of a MemoryError (a python_app's failure)."""
    kind = getattr(result, "e_type", None)
    return type(result).__name__ == "RemoteExceptionWrapper" and isinstance(kind, type) and issubclass(kind, MemoryError)


def _serialized_failure(exc_info) -> bytes:
    """The task's exception as Parsl's RemoteExceptionWrapper, serialized.

    An exception that cannot itself be serialized (it holds an unpicklable value, or its cause is a
    RecursionError from a 100,000-deep result) still ends the task: it travels as a RuntimeError
    carrying its type and message, without its traceback.
    """
    from parsl.app.errors import RemoteExceptionWrapper
    from parsl.serialize import serialize

    try:
        return serialize(RemoteExceptionWrapper(*exc_info))
    except BaseException as error:  # noqa: BLE001 - the fallback below always serializes
        text = f"{exc_info[0].__name__}: {str(exc_info[1])[:2000]}"
        try:
            raise RuntimeError(f"{text} (the exception itself could not be sent back: "
                               f"{type(error).__name__}: {str(error)[:200]})") from None
        except RuntimeError:
            fallback = sys.exc_info()
        return serialize(RemoteExceptionWrapper(fallback[0], fallback[1], None))


def _open_probe():
    try:
        from scalpel_executor.host.probe import Probe

        return Probe()
    except Exception:  # a worker without a probe still runs tasks
        logger.exception("the measurement probe could not be set up; tasks run unmeasured")
        return None


def _probe_stats(probe) -> dict:
    try:
        return probe.stop().to_dict()
    except Exception as error:  # noqa: BLE001 - a probe failure must not fail the task
        return {"footprint": None, "footprint_source": f"unavailable: probe error {error}"}


PRELOAD = ("parsl", "parsl.serialize", "parsl.app.errors", "parsl.app.python", "parsl.app.bash", "scalpel_executor.runtime.errors")


def _preload() -> None:
    """Import what every task's unpickling and error path needs, while the worker waits for one.

    Unpickling the first task imports Parsl whole (about 1,000 modules, 0.8 s here); done after
    "ready", a task that arrives meanwhile waits no longer than it would have, and no first task
    on a core, nor the first after a respawn, pays for it.
    """
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a task that needs it will report the error itself
            logger.exception("could not preload %s", name)


def serve(connection: Connection, parent_pid: int, probe: bool = True, cgroup: MemoryCgroup | None = None) -> None:
    """Run tasks from ``connection`` until told to stop or the scheduler goes away.

    Parameters
    ----------
    connection : Connection
        This worker's end of the socket pair.
    parent_pid : int
        The pid of the process that started this worker, watched so the worker dies with it.
    probe : bool
        Start a :class:`~scalpel_executor.host.probe.Probe`, which measures the tasks whose ``Run``
        says ``measure``; False: no task is measured.
    cgroup : MemoryCgroup, optional
        The memory cgroup its pool made for this worker and moved it into: a task that declares
        memory is limited there (resident memory), else under RLIMIT_AS (address space).
    """
    meter = _open_probe() if probe else None
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True, name="parent-watch").start()
    connection.send_bytes(encode(Ready(os.getpid())))
    _preload()
    connection.send_bytes(encode(Warm()))
    try:
        _serve_tasks(connection, meter, cgroup)
    finally:
        if meter is not None:
            meter.close()


def _report_early(connection: Connection, send_lock: threading.Lock, meter, task_id: int,
                  done: threading.Event) -> None:
    """Send the running task's first footprint reading, unless its WorkerResult goes first."""
    if done.wait(EARLY_REPORT):
        return
    footprint = meter.peek()
    with send_lock:
        if footprint is None or done.is_set():
            return
        try:
            connection.send_bytes(encode(Measured(task_id, footprint)))
        except (EOFError, OSError):
            pass  # the pool is gone; the main loop finds out on its next receive


def _serve_tasks(connection: Connection, meter, cgroup: MemoryCgroup | None = None) -> None:
    send_lock = threading.Lock()  # the early report and the WorkerResult share the socket
    checked = False  # whether cgroup was checked to hold this worker
    standard = StandardStreams()
    while True:
        try:
            message = decode(connection.recv_bytes())
        except (EOFError, OSError):
            return
        if not isinstance(message, Run):
            return  # Stop
        task_id, buffer, measure, cpus, env, memory = message
        measuring = meter is not None and measure
        done = threading.Event()

        def measure_body() -> None:
            # The probe starts once the task is unpickled: unpickling a fresh worker's first task
            # imports its module (a test module read 16-24 MiB in the first window of a 0.3 s sleep).
            meter.start()
            threading.Thread(target=_report_early, args=(connection, send_lock, meter, task_id, done), daemon=True,
                             name="early-report").start()

        modules = len(sys.modules)
        wall_start, cpu_start = time.perf_counter(), time.process_time()
        if memory and not checked:
            cgroup, checked = holds_this_worker(cgroup), True
        with TaskPlace(cpus, env, memory, task_id, cgroup) as place:
            ok, payload = _run(buffer, place, measure_body if measuring else None)
        if not ok and place.oom_killed():
            try:
                raise place.exceeded(OOM_KILLED_CHILD)
            except MemoryError:
                payload = _serialized_failure(sys.exc_info())
        wall, cpu = time.perf_counter() - wall_start, time.process_time() - cpu_start
        with send_lock:
            done.set()
        measured = _probe_stats(meter) if measuring else NOT_MEASURED if meter is not None else PROBE_OFF
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        stats = {key: value for key, value in measured.items() if key not in ("wall", "cpu")}
        stats.update({
            "wall": wall,
            "cpu": cpu,
            "max_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "children_cpu": children.ru_utime + children.ru_stime,
            # modules imported on the way: the worker's first call of an app pays for its imports
            "cold": len(sys.modules) > modules,
        })
        try:
            connection.send_bytes(encode(WorkerResult(task_id, ok, payload, stats)))
        except (EOFError, OSError):
            return
        standard.restore()  # after the result: the check costs the task's round trip nothing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scalpel_executor.runtime.worker.main", description=__doc__.splitlines()[0])
    parser.add_argument("fd", type=int, help="file descriptor of this worker's end of the socket pair")
    parser.add_argument("--cpus", required=True, help="comma-separated CPUs to pin to")
    parser.add_argument("--parent", type=int, required=True, help="pid of the process that started this worker (the worker exits when it goes)")
    parser.add_argument("--probe", choices=("on", "off"), default="off" if os.environ.get("SCALPEL_PROBE") == "off" else "on",
                        help="start the probe, which measures the tasks sent to be measured (default: $SCALPEL_PROBE, else on)")
    args = parser.parse_args(argv)
    cpus = {int(c) for c in args.cpus.split(",")}
    set_affinity(cpus)  # unpinned where the platform has no affinity (slot_cpus said so once)
    _log_to_run_dir()
    logger.info("worker pid %d (rank %s of %s) started on CPUs %s for pid %d", os.getpid(),
                os.environ.get("PARSL_WORKER_RANK", "-"), os.environ.get("PARSL_WORKER_COUNT", "-"), args.cpus,
                args.parent)
    for entry in reversed(os.environ.get("SCALPEL_SYS_PATH", "").split(os.pathsep)):
        if entry and entry not in sys.path:
            sys.path.insert(0, entry)
    serve(Connection(args.fd), args.parent, probe=args.probe == "on", cgroup=own_cgroup())
    logger.info("worker pid %d stopping: told to, or its manager is gone", os.getpid())
    return 0


def _log_to_run_dir() -> None:
    """Into ``worker-<rank>.log`` in the directory the node manager named (:data:`LOG_DIR_ENV`), if any;
    warnings still reach stderr, which the manager forwards."""
    directory = os.environ.get(LOG_DIR_ENV)
    if not directory:
        return
    try:
        log_to_file(os.path.join(directory, f"worker-{os.environ.get('PARSL_WORKER_RANK', os.getpid())}.log"))
    except OSError as error:
        print(f"scalpel worker {os.getpid()}: no log file: {error}", file=sys.stderr)
        return
    # Python's last resort printed warnings on stderr only while no handler existed; keep them there.
    logging.getLogger("scalpel_executor").addHandler(logging.lastResort)


if __name__ == "__main__":
    sys.exit(main())
