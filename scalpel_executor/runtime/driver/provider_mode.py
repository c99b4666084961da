"""Provider mode: what ``ScalpelExecutor(provider=...)`` adds to the executor, as the mixin
:class:`ProviderMode` that :class:`~scalpel_executor.runtime.driver.executor.ScalpelProviderExecutor` puts
first among its bases (``ProviderMode, ScalpelExecutor, BlockProviderExecutor``).

A mixin, not the class itself, because ``ScalpelExecutor.__new__`` names the class it builds for
``provider=``: the class stays in ``executor.py`` beside it, and this module imports nothing of it.
Its methods read the executor's own attributes (``_pool``, ``_begin_start``, ``_pool_options``,
``_complete``, ``_log_dir``) and call the executor's ``submit``, ``_complete`` and ``shutdown``
through ``super()``::

    Parsl strategy ── scale_out ── BlockProviderExecutor ── _get_launch_command(block) ──> provider.submit
                   ── outstanding() / workers_per_node ──> the hub's count / its managers' workers
                   ── scale_in(blocks, max_idletime) ──> ManagerHub.drain (idle first) ──> provider.cancel
    start() ── make_keys ── ManagerHub(config, options, _complete) ── BlockProviderExecutor.start
    hub ── blocks_pending() / cancel_block(block, cause) ──> this executor's block table
    shutdown() ── the executor's ── remove_keys

docs/design.md ("Provider mode") has the channel, the keys and the scaling rules.
"""

from __future__ import annotations

import logging
import math
import os
import shlex
import socket
import sys
import tempfile
from concurrent.futures import Future
from typing import Any, Dict, List, Optional, Union

from parsl.executors.status_handling import BlockProviderExecutor
from parsl.jobs.states import TERMINAL_STATES, JobState, JobStatus
from parsl.providers.base import ExecutionProvider

from scalpel_executor.core.tasks import Task
from scalpel_executor.host.sysfs import allowed_cpus
from scalpel_executor.runtime.wire.channel import make_keys, remove_keys
from scalpel_executor.runtime.contract import Outcome
from scalpel_executor.runtime.driver.hub import ManagerHub
from scalpel_executor.runtime.wire.manager_messages import ManagerConfig

__all__ = ["ProviderMode"]

logger = logging.getLogger(__name__)


class ProviderMode:
    """ScalpelExecutor's provider mode: the CurveZMQ keys, the hub, Parsl's blocks and their scaling
    (module docstring). Mixed in before ``ScalpelExecutor`` and ``BlockProviderExecutor``."""

    _key_dirs: tuple = ()  # the CurveZMQ key directory and any directory made for it alone, until shutdown

    @property
    def provider(self) -> Optional[ExecutionProvider]:  # BlockProviderExecutor's, not ScalpelExecutor's None
        return self._provider

    def start(self) -> None:
        if not self._begin_start():
            return
        made: tuple[str, ...] = ()  # directories made for the keys alone, removed with them
        if self.run_dir == self._unset_run_dir:  # not run by a DataFlowKernel: keep keys out of the working dir
            made = (tempfile.mkdtemp(prefix=f"scalpel-{self.label}-"),)
            self._cert_dir = make_keys(os.path.join(made[0], "certificates"))
        else:
            self._cert_dir = make_keys(os.path.join(self.run_dir, self.label, "certificates"))
        self._key_dirs = (self._cert_dir, *made)
        config = ManagerConfig.of_driver(None if self.topology is None else self._topology, smt=self.smt,
                                         max_workers=self.max_workers_per_node)
        hub = ManagerHub(config, self._pool_options(), self._complete, cert_dir=self._cert_dir,
                         address=self.address, port_range=self.port_range, prefetch=self.prefetch_capacity)
        hub.blocks_pending, hub.cancel_block = self._blocks_pending, self._cancel_block
        try:
            hub.start()
        except BaseException:
            self._remove_keys()
            raise
        self._pool = hub
        BlockProviderExecutor.start(self)
        self._start_node_monitor()
        logger.info("executor %r listens for node managers on %s (provider %s)", self.label, hub.url,
                    type(self.provider).__name__)

    def _blocks_pending(self) -> bool:
        """Whether a block that is not over has no connected manager yet (it may bring a node)."""
        connected = {manager["block_id"] for manager in self.connected_managers()}
        return any(status.state not in TERMINAL_STATES and block_id not in connected
                   for block_id, status in list(self._status.items()))

    def _cancel_block(self, block_id: str, cause: str) -> None:
        """Cancel the block of a manager the hub lost that may still hold its node (silent, sending
        malformed messages, no usable core), marked as scale_in_facade marks it: Parsl's strategy
        then starts another as ``outstanding()`` asks, where the block would have held a node idle."""
        job_id, status = self.blocks_to_job_id.get(block_id), self._status.get(block_id)
        if job_id is None or status is not None and status.state in TERMINAL_STATES:
            return
        logger.warning("%s Cancelling block %s (job %s): %s", self._scale_prefix, block_id, job_id, cause)
        if self._filter_scale_in_ids([job_id], self.provider.cancel([job_id])):
            self._status[block_id] = self._simulated_status[block_id] = JobStatus(JobState.SCALED_IN)
            self.send_monitoring_info({block_id: self._status[block_id]})

    def shutdown(self) -> None:
        """As ScalpelExecutor's; then, the hub stopped and its managers told to end, the run's
        CurveZMQ keys are deleted. Idempotent."""
        try:
            super().shutdown()
        finally:
            self._remove_keys()

    def _remove_keys(self) -> None:
        """Delete the key files and the directories start() made for them, once each is empty."""
        if not self._key_dirs:
            return
        (cert_dir, *made), self._key_dirs = self._key_dirs, ()
        remove_keys(cert_dir)
        for directory in made:
            try:
                os.rmdir(directory)
            except OSError:
                pass  # not empty: someone else's files

    def _get_launch_command(self, block_id: str) -> str:
        hub: ManagerHub = self._pool
        return self.launch_cmd.format(python=shlex.quote(sys.executable), url=self._manager_url(hub),
                                      cert_dir=shlex.quote(str(self._cert_dir)), block_id=block_id,
                                      driver_threshold=self.heartbeat_threshold,
                                      log_dir=shlex.quote(self._log_dir() or ""))

    def _manager_url(self, hub: ManagerHub) -> str:
        if self.address in ("*", "0.0.0.0"):
            return f"tcp://{socket.gethostname()}:{hub.port}"
        return hub.url

    def submit(self, func, resource_specification: Dict[str, Any], *args: Any, **kwargs: Any) -> Future:
        if self.bad_state_is_set:
            raise self.executor_exception
        future = super().submit(func, resource_specification, *args, **kwargs)
        # BlockProviderExecutor fails these if its blocks cannot start (set_bad_state_and_fail_all);
        # a task handed over after shutdown is already failed and has no id
        task_id = getattr(future, "parsl_executor_task_id", None)
        if task_id is not None:
            self._tasks[task_id] = future
        return future

    def _complete(self, task: Task, outcome: Outcome) -> None:
        self._tasks.pop(task.id, None)
        super()._complete(task, outcome)

    def outstanding(self) -> int:
        """Tasks submitted and not finished (waiting in the driver or held by a manager); a method, as HTEX's."""
        hub = self._pool
        return 0 if hub is None else hub.outstanding

    @property
    def workers_per_node(self) -> Union[int, float]:
        """``max_workers_per_node``; else the most workers a connected manager runs; else this host's CPUs."""
        if self.max_workers_per_node is not None:
            return self.max_workers_per_node
        hub = self._pool
        counts = [m["worker_count"] for m in hub.connected_managers()] if hub is not None else []
        return max(counts, default=0) or len(allowed_cpus())

    def connected_managers(self) -> List[Dict[str, Any]]:
        """One dict per connected node manager, as HTEX's (``block_id``, ``worker_count``, ``tasks``,
        ``idle_duration``, ``active``, ...) plus ``hostname``, ``pid``, ``cpus``, ``slot_cpus``, ``memory``."""
        hub = self._pool
        return [] if hub is None else hub.connected_managers()

    _node_managers = connected_managers  # what Parsl monitoring's node rows describe

    def scale_in(self, blocks: int, max_idletime: Optional[float] = None) -> List[str]:
        """Cancel up to ``blocks`` blocks, as HTEX's: those whose managers hold no task first, the
        longest idle (a block with no manager yet: idle since ever) first among them. With
        ``max_idletime`` (Parsl's ``htex_auto_scale`` strategy, while tasks run elsewhere) only
        blocks that hold no task and have been idle longer than that, which may be fewer."""
        hub = self._pool
        activity = hub.block_activity() if hub is not None else {}
        unconnected = (0, math.inf)  # (tasks held, seconds idle)
        active = [block_id for block_id, status in self._status.items() if status.state not in TERMINAL_STATES]
        chosen = sorted(active, key=lambda block_id: (activity.get(block_id, unconnected)[0],
                                                      -activity.get(block_id, unconnected)[1]))  # stable: oldest first
        if max_idletime is not None:
            chosen = [block_id for block_id in chosen if activity.get(block_id, unconnected)[0] == 0
                      and activity.get(block_id, unconnected)[1] > max_idletime]
        chosen = chosen[:blocks]
        if hub is not None and chosen:
            chosen = hub.drain(chosen, idle_only=max_idletime is not None)  # a task dealt meanwhile keeps its block
        if not chosen:
            return []
        job_ids = [self.blocks_to_job_id[block_id] for block_id in chosen]
        logger.info("%s Scaling in blocks %s (jobs %s)", self._scale_prefix, chosen, job_ids)
        cancelled = self._filter_scale_in_ids(job_ids, self.provider.cancel(job_ids))
        return [self.job_ids_to_block[job_id] for job_id in cancelled]
