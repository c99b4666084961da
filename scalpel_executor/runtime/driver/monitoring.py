"""What the executor tells Parsl monitoring about its node managers and, in local mode, its block.

With ``Config(monitoring=MonitoringHub(...))`` the DataFlowKernel gives each executor a queue into
the monitoring database (``monitoring_messages``). HTEX's interchange puts a ``NODE_INFO`` row on
it when a manager registers, changes or goes, and ``BlockProviderExecutor`` a ``BLOCK_INFO`` row
per block whose status changes at each poll; parsl-visualize reads both (the ``node`` table's
``cpu_count``, ``total_memory``, ``worker_count`` and ``timestamp`` for its CPU, memory and worker
efficiency plots). Here a :class:`NodeMonitor` thread, started only when monitoring is on, asks
the executor every :data:`PERIOD` seconds for its managers (provider mode: the hub's
``connected_managers()``; local mode: the one node manager, or the driver's own pool) and puts::

    a manager seen with workers started    NODE_INFO, active True (a provider block's manager registers
                                           before its workers start: it is reported once they have)
    its worker count or activity changed   NODE_INFO, the new figures
    a manager gone (lost, drained, ended)  NODE_INFO, active False
    local mode: its manager changed        BLOCK_INFO for block "0", RUNNING, job id the manager's pid
    at shutdown                            every manager's last row, active False; local mode: block
                                           "0" COMPLETED

Local mode has no provider and so no blocks of Parsl's; its block is :data:`LOCAL_BLOCK`, the
node manager (a replacement is the same block with a new job id, the new manager's pid). Provider
mode's block rows are Parsl's own (its poll of the provider). A node row's ``uid`` is
``<hostname>-<pid>``, the name of the manager's log directory (:mod:`~scalpel_executor.runtime.logs`);
``total_memory`` is the host's memory in local mode and, in provider mode, the memory budget the
manager reported (what its tasks may declare; ``docs/executor.md``).
"""

from __future__ import annotations

import datetime
import logging
import os
import platform
import socket
import threading
from typing import Any, Callable, Optional, Sequence

import psutil

from parsl.jobs.states import JobState
from parsl.monitoring.message_type import MessageType
from parsl.monitoring.radios.multiprocessing import MultiprocessingQueueRadioSender

from scalpel_executor.runtime.node.pool import LOCAL_BLOCK_ID as LOCAL_BLOCK  # local mode's one block: its node manager

__all__ = ["LOCAL_BLOCK", "PERIOD", "NodeMonitor", "block_row", "local_node", "node_row", "start_monitor"]

logger = logging.getLogger(__name__)

PERIOD = 1.0  # seconds between looks at the managers (a manager that lives less may go unseen until shutdown)


def _uid(manager: dict) -> str:
    return f"{manager['hostname']}-{manager['pid']}"


def node_row(run_id: str, manager: dict, active: bool, now: datetime.datetime) -> dict:
    """The ``node`` table's row for one manager (a ``connected_managers()`` entry with ``memory``)."""
    return {"run_id": run_id, "hostname": manager["hostname"], "uid": _uid(manager), "block_id": str(manager["block_id"]),
            "cpu_count": len(manager["cpus"]), "total_memory": int(manager.get("memory") or 0),
            "active": active, "worker_count": int(manager["worker_count"]),
            "python_v": manager.get("python_version") or platform.python_version(),
            "timestamp": now, "last_heartbeat": now}


def block_row(run_id: str, label: str, block_id: str, job_id: Optional[str], state: JobState,
              now: datetime.datetime) -> dict:
    """The ``block`` table's row, as ``BlockProviderExecutor.create_monitoring_info`` makes it."""
    return {"run_id": run_id, "status": state.name, "timestamp": now, "executor_label": label, "job_id": job_id,
            "block_id": block_id}


def local_node(pool: Any, cpus: Sequence[int]) -> list[dict]:
    """Local mode's one node manager (or, without one, this process's pool running on ``cpus``) as
    ``connected_managers()`` describes a provider block's: block :data:`LOCAL_BLOCK`; none before it starts."""
    if pool is None:
        return []
    return [{"block_id": LOCAL_BLOCK, "hostname": socket.gethostname(),
             "pid": getattr(pool, "pid", None) or os.getpid(), "cpus": list(cpus),
             "worker_count": len(pool.worker_pids), "active": True, "memory": psutil.virtual_memory().total}]


def start_monitor(queue, run_id: str, label: str, managers: Callable[[], list[dict]], *,
                  local: bool) -> Optional[NodeMonitor]:
    """A started :class:`NodeMonitor` (its arguments), or None when Parsl monitoring is off (no queue)."""
    if queue is None:
        return None
    monitor = NodeMonitor(queue, run_id, label, managers, local=local)
    monitor.start()
    return monitor


class NodeMonitor:
    """Puts node rows (and local mode's block rows) on the monitoring queue as the managers change.

    Parameters
    ----------
    queue
        The executor's ``monitoring_messages``.
    run_id, label : str
        The workflow's run id and the executor's label.
    managers : callable() -> list of dict
        The managers now, each as ``connected_managers()`` describes one, with ``memory``.
    local : bool
        Local mode: report block :data:`LOCAL_BLOCK` too.
    """

    def __init__(self, queue, run_id: str, label: str, managers: Callable[[], list[dict]], *, local: bool):
        self._radio = MultiprocessingQueueRadioSender(queue)
        self._run_id, self._label, self._managers, self._local = run_id, label, managers, local
        self._seen: dict[str, tuple[dict, bool, int]] = {}  # uid -> (manager, active, worker count) last sent
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"scalpel-monitoring-{label}", daemon=True)

    def start(self) -> None:
        self.look()
        self._thread.start()

    def stop(self) -> None:
        """One last look, then every manager inactive and local mode's block completed."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.look()
        now = datetime.datetime.now()
        self._send_nodes([node_row(self._run_id, manager, False, now) for manager, active, _ in self._seen.values()
                          if active])
        if self._local:
            job_ids = [str(manager["pid"]) for manager, _, _ in self._seen.values()]
            self._send_block(job_ids[-1] if job_ids else None, JobState.COMPLETED, now)
        self._seen.clear()

    def _loop(self) -> None:
        while not self._stop.wait(PERIOD):
            try:
                self.look()
            except Exception:  # noqa: BLE001 - monitoring never stops the executor
                logger.exception("could not report node managers to Parsl monitoring")

    def look(self) -> None:
        """Send a row for each manager that appeared, changed or went since the last look."""
        now = datetime.datetime.now()
        current = {_uid(manager): manager for manager in self._managers()
                   if manager["worker_count"] or _uid(manager) in self._seen}
        rows = []
        for uid, manager in current.items():
            state = (bool(manager["active"]), int(manager["worker_count"]))
            previous = self._seen.get(uid)
            if previous is None or previous[1:] != state:
                rows.append(node_row(self._run_id, manager, state[0], now))
                if previous is None and self._local:
                    self._send_block(str(manager["pid"]), JobState.RUNNING, now)
            self._seen[uid] = (manager, *state)
        for uid in [uid for uid in self._seen if uid not in current]:
            manager, active, _ = self._seen.pop(uid)
            if active:
                rows.append(node_row(self._run_id, manager, False, now))
        self._send_nodes(rows)

    def _send_nodes(self, rows: list[dict]) -> None:
        for row in rows:
            self._radio.send((MessageType.NODE_INFO, row))

    def _send_block(self, job_id: Optional[str], state: JobState, now: datetime.datetime) -> None:
        self._radio.send((MessageType.BLOCK_INFO, [block_row(self._run_id, self._label, LOCAL_BLOCK, job_id, state,
                                                             now)]))
