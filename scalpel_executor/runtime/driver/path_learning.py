"""What an executor tells each task of the critical path behind it, and what its run adds to the learned tails.

:class:`PathLearning` is held by :class:`~scalpel_executor.runtime.driver.executor.ScalpelExecutor`, which
calls it at six moments; the tails themselves are :class:`~scalpel_executor.learning.critical_path.Tails`::

    executor.start ───── start(profile store) ──> Tails (learned tails beside the profiles; none without a store)
    executor.submit ──── tail_of(func, args, key) ── take_sighting ──> (seconds, at the widest, source, Parsl id)
                                                                         ──> Task.tail, Task.wide_tail
                          (no sighting yet: install the graph's memoizer once, runtime.driver.graph.install,
                           and read this first call's Parsl id from the DFK's records: launching_id)
                    ──── watch(task), lengthened() ──> pool.lengthen(id, tail, at the widest): the tasks
                          told no chain whose children a later sighting shows (invoked after them)
    executor._complete ─ ended(Parsl id, wall, at the widest, ok) ──> the run's graph learns its run time
    executor.shutdown ── learn() ──> the store's key_tails (one transaction)
    run_report ───────── report() ──> the report's ``critical_path``

A fault reading the graph or storing the tails is one warning; a task is never refused, nor a run
failed, for what orders it or what it could learn.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from scalpel_executor.learning.critical_path import CriticalPathStore, Tails
from scalpel_executor.learning.store import ProfileStore
from scalpel_executor.runtime.driver.graph import GraphMemoizer, Sighting, install as see_graph, take_sighting

logger = logging.getLogger(__name__)

__all__ = ["PathLearning"]


class PathLearning:
    """One executor's critical paths: the tails it tells its tasks, and what its run teaches.

    Parameters
    ----------
    executor : ParslExecutor
        The executor whose tasks it orders (its ``label`` names Parsl's sightings of them, and the
        DataFlowKernel running it is the one whose graph is read).
    default_runtime : float
        The prior run time (seconds) of a task in the graph with no estimate yet.
    """

    def __init__(self, executor, default_runtime: float):
        self.executor = executor
        self.default_runtime = default_runtime
        self.tails: Tails | None = None  # the chains waiting for each task (learning.critical_path), from start()
        self.graph_checked = False  # the DFK's memoizer was looked at (runtime.driver.graph.install), once
        self.graph_seen = False  # a task came with its place in Parsl's graph
        self.learned = 0  # keys and apps whose tails this run stored
        self.lengthened_count = 0  # tasks told a longer chain after their submit (lengthened)
        self._graph = None  # the latest sighting's PendingGraph
        self._untold: dict[int, Any] = {}  # Parsl id -> Task: tasks told no chain, until told one or ended
        self._fathered_at = 0  # the graph's edge log read so far (PendingGraph.fathered_since)
        self._fresh: list[int] = []  # watched since the last look: a child may be in the log read already
        self._untold_lock = threading.Lock()  # launch threads submit at once

    def start(self, store: ProfileStore | None) -> None:
        """Read the learned tails beside the profiles (none without a store)."""
        paths = None
        if store is not None:
            try:
                paths = CriticalPathStore(store.path if store.persistent else None)
            except Exception as error:  # noqa: BLE001 - never fail a run for what it could learn
                logger.warning("executor %r learns no critical paths: %s", self.executor.label, error)
        self.tails = Tails(paths, self.default_runtime)

    def tail_of(self, func, args: tuple, key: str) -> tuple[float, float, str | None, int | None]:
        """The chain waiting for this call's result (seconds), the same at the widest, where they
        came from, and its Parsl task id when the graph showed it (learning.critical_path);
        (0, 0, None, None) when nothing is known."""
        tails = self.tails
        if tails is None:
            return 0.0, 0.0, None, None
        try:
            sighting, parsl_id = take_sighting(self.executor.label, args), None
            if sighting is None and not self.graph_checked:
                self.graph_checked = True
                parsl_id, sighting = self._install_graph(args)
            self.graph_seen |= sighting is not None
            if sighting is not None:
                self._graph = sighting.graph
            app = sighting.func_name if sighting is not None else getattr(func, "__name__", "")
            seconds, wide, source = tails.tail(sighting, key, app)
            return seconds, wide, source, parsl_id if sighting is None else sighting.task_id
        except Exception as error:  # noqa: BLE001 - a task is never refused for what orders it
            if not tails.sources["failed"]:  # said once
                logger.warning("executor %r orders tasks without their critical path: %s", self.executor.label, error)
            tails.sources["failed"] += 1
            return 0.0, 0.0, None, None

    def _install_graph(self, args: tuple) -> tuple[int | None, Sighting | None]:
        """Show tasks' places in the graph: wrap the memoizer of the DataFlowKernel running the
        executor, once (``scalpel_config()`` installs it from the start; runtime.driver.graph.install).
        Returns the Parsl task id of this first call where the graph is seen from now on, read from the
        DataFlowKernel's records (:func:`launching_id`), so that its report row and errors
        name it as Parsl does, as the later calls' do, and its sighting: the graph as far as the
        workflow has invoked it now (its own children, if invoked), as the later calls' see it, so
        that a later submit can tell it its chain (:meth:`lengthened`). (None, None) where the
        graph is not seen."""
        try:
            import parsl
            dfk = parsl.dfk()
        except Exception:  # noqa: BLE001 - used without a DataFlowKernel: no graph to see
            return None, None
        if not any(executor is self.executor for executor in getattr(dfk, "executors", {}).values()):
            return None, None
        if not see_graph(dfk):
            return None, None
        parsl_id = launching_id(dfk, self.executor.label, args)
        record = None if parsl_id is None else dfk.tasks.get(parsl_id)
        memoizer = dfk.memoizer
        sighting = memoizer.sighting(record) if record is not None and isinstance(memoizer, GraphMemoizer) else None
        return parsl_id, sighting

    def watch(self, task, parsl_id: int | None, source: str | None) -> None:
        """``task`` (the executor's Task, ``parsl_id`` in the graph) was told no chain (``source``
        None) while the graph was seen: its children may be invoked after it reached the executor,
        and a later sighting show them (:meth:`lengthened`). Kept until then or its end."""
        if source is None and parsl_id is not None and self._graph is not None:
            with self._untold_lock:
                self._untold[parsl_id] = task
                self._fresh.append(parsl_id)

    def lengthened(self) -> list:
        """The watched tasks the graph now shows children of, each told its chain once: (Task, seconds,
        at the widest), for the executor to tell its pool. A task may have started: the pool leaves it.

        Parsl launches a task with no inputs as soon as it is invoked, often before the script's next
        line invokes its children; a plain Config's first call always comes before the graph is seen.
        Told no chain, such a task made its stage's exploration look free: three least-squares fits
        on two cores (``examples/malleable/fits.py --regions 3``), the first told 0, were each tried
        on both cores one after another and read nothing (5.76 s simulated); told its chain, two ran
        on one core each and the third on both, reading the key's speed-up (4.90 s; live, the first
        runs 0.895x the whole process of every task on one core; docs/results/widths-log.md)."""
        graph, tails = self._graph, self.tails
        if graph is None or tails is None:
            return []
        told = []
        try:  # O(the edges the script added since the last call): the parents that gained a child
            with self._untold_lock:
                parents, self._fathered_at = graph.fathered_since(self._fathered_at)
                fresh, self._fresh = self._fresh, []
                for parent in dict.fromkeys(p for p in [*fresh, *parents] if p in self._untold):
                    if (chain := tails.chain(graph, parent)) is not None and chain[0] > 0:
                        told.append((self._untold.pop(parent), *chain))
                self.lengthened_count += len(told)
        except Exception as error:  # noqa: BLE001 - a task is never refused for what orders it
            logger.debug("could not read the chains of the tasks told none: %s", error)
        return told

    def ended(self, parsl_id: int | None, wall: float, wide: float, succeeded: bool) -> None:
        """A task the graph showed (``parsl_id``) ran ``wall`` seconds (``wide`` at its widest width):
        the run's graph learns it."""
        if parsl_id is not None and self.tails is not None:
            self.tails.run.ended(parsl_id, wall, succeeded, wide)
        if parsl_id is not None and self._untold:
            with self._untold_lock:
                self._untold.pop(parsl_id, None)

    def learn(self) -> None:
        """Store the tails this run's graph taught (one transaction); a fault is one warning."""
        tails = self.tails
        if tails is None or tails.store is None:
            return
        try:
            self.learned = len(tails.learn())
        except Exception as error:  # noqa: BLE001 - never fail a shutdown for what it could learn
            logger.warning("executor %r could not store this run's critical paths: %s", self.executor.label, error)
        finally:
            tails.store.close()

    def report(self) -> dict:
        """The run report's ``critical_path``: whether the graph was seen, where tasks' tails came
        from, and how many keys and apps this run stored."""
        tails = self.tails
        told = {} if tails is None else {k: v for k, v in tails.sources.items() if k != "failed"}
        report = {"graph_seen": self.graph_seen, "tails_told": told, "tails_stored": self.learned}
        if self.lengthened_count:
            report["tails_lengthened"] = self.lengthened_count  # told a longer chain after their submit
        if tails is not None and tails.run.forgotten:
            report["graph_forgotten"] = tails.run.forgotten  # learned from the latest tasks only
        if not self.graph_seen:
            report["not_learned"] = ("Parsl's task graph was not visible to the executor (a memoizer it could not "
                                     "wrap, or tasks submitted without a DataFlowKernel), so this run taught no "
                                     "critical path; learned ones were still used")
        return report


def launching_id(dfk: Any, executor_label: str, args: tuple) -> int | None:
    """The Parsl task id of the call being submitted to ``executor_label`` now, where no memoizer
    sighted it (the first call under a plain Config, before runtime.driver.graph.install): the one record of
    ``dfk.tasks`` for that executor being launched (``try_time_launched`` set, no ``exec_fu`` yet)
    whose args are these very objects. None where not exactly one is, or the records cannot be read."""
    try:
        found = [record["id"] for record in list(dfk.tasks.values())
                 if record.get("executor") == executor_label and record.get("exec_fu") is None
                 and record.get("try_time_launched") is not None and len(record.get("args", ())) == len(args)
                 and all(given is wanted for given, wanted in zip(args, record["args"]))]
    except Exception:  # noqa: BLE001 - a name in a message is not worth a failed submit
        return None
    return found[0] if len(found) == 1 else None
