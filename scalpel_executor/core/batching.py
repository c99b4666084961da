"""When arrivals join the scheduler: the batch window, as a pure rule both drivers apply.

Grouping needs a batch: Algorithm 1 pairs heavy with light footprints only among tasks it sees
together, and a regroup costs O(n log n) in the waiting tasks. A Parsl workflow submits a batch
as a burst of separate ``submit`` calls, so the driver holds arrivals briefly and hands them to the
scheduler together. The rule, with times passed in by the driver (the core reads no clock):

- a lone arrival on an idle machine (nothing running or waiting: the driver passes ``running``)
  waits only :data:`LONE_WAIT_SHARE` of its estimated run time, without the ``quiet`` floor: a
  no-op is sent on at once, so a lone task's round trip pays no wait for company, while a long
  one still waits for a burst's next submits (below); whatever it later runs beside is checked
  when that starts (:mod:`scalpel_executor.core.admission`) and planned around;
- otherwise a lone arrival waits ``quiet`` seconds, or, when the driver passes ``runtime_of``, up to
  :data:`LONE_WAIT_SHARE` (1%) of its estimated run time, at most ``window``: a no-op task is
  sent on after 1 ms, a task expected to run half a second or more waits the whole window for
  company, which costs it at most 1% and spares a burst whose second submit came late the loss
  of its first task to a core before the longer ones arrived (measured: a 4-task batch of
  0.5-1.8 s kernels whose first two submits were 1.7 ms apart ended 10% later; Parsl's
  DataFlowKernel put 2.4 ms median, 3.6 ms at the 90th percentile, between a burst's first two
  submits on the 2-core development machine, the later ones 0.7 ms apart);
- a second arrival within that time marks a burst, and the batch is then held ``window`` seconds
  from its first arrival, so a burst is grouped whole even when a submit stalls for a few
  milliseconds mid-burst; while arrivals keep coming (the last less than ``quiet`` ago, or, when
  the driver passes ``runtime_of``, less than :data:`LONE_WAIT_SHARE` of the longest held task's
  estimated run time) it is held on, until that long after the last one, at most
  :data:`BURST_STRETCH` windows from the first (measured: Parsl's DataFlowKernel took 5.4 ms
  median, 8.1 ms at most, to submit a burst of 8 apps to this executor on the 2-core development
  machine, so a 5 ms window alone split most such bursts; on the same machine under load it
  paused 6 ms between a workflow's first FFT and its second, and a 1 ms quiet released the burst's
  eight lookups without their FFTs, which a first run then started two by two);
- ``max_batch`` held tasks are released at once;
- while the scheduler still holds plenty of work (``waiting >= 2 × cores``), arrivals keep
  collecting past their deadline and join it in one regroup: no core starves meanwhile. Not with
  ``hold_while_busy=False`` (the default policy, checked at dispatch): there a task that arrived
  (a DAG's follow-up) may be the one that fits beside what runs, so it joins at its deadline, and
  the scheduler merges it into its plan without planning again while it holds plenty.

The live pool calls :meth:`Batcher.hold` as tasks arrive and :meth:`Batcher.release` whenever it
wakes; :meth:`Batcher.wake_at` says when it must wake. The simulator does the same with simulated
time, so it models the window's cost (``simulate(..., batching=Batching(...))``).

>>> batcher = Batcher(Batching(window=0.005, quiet=0.001), cores=2)
>>> batcher.hold(["a"], now=0.0)
>>> batcher.release(now=0.0005, waiting=0), batcher.wake_at(waiting=0)
([], 0.001)
>>> batcher.hold(["b"], now=0.0008)  # a burst: the window runs 5 ms from the first arrival
>>> batcher.release(now=0.002, waiting=0), batcher.release(now=0.005, waiting=0)
([], ['a', 'b'])
>>> batcher.hold(["c"], now=0.006)  # alone, nothing runs, run time not told: at once
>>> batcher.release(now=0.006, waiting=0, running=0)
['c']
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Batching", "Batcher", "LONE_WAIT_SHARE", "BURST_STRETCH"]

T = TypeVar("T")
LONE_WAIT_SHARE = 0.01  # a lone arrival may wait this share of its estimated run time for company
BURST_STRETCH = 4  # a burst still arriving is held at most this many windows from its first arrival


@dataclass(frozen=True)
class Batching:
    """The batch window's settings (seconds, tasks); see the module docstring."""

    window: float = 0.005
    quiet: float = 0.001
    max_batch: int = 4096

    def __post_init__(self) -> None:
        for name in ("window", "quiet"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) \
                    or math.isinf(value) or value < 0:
                raise ValueError(f"Batching's {name} must be a finite number of seconds ≥ 0, got {value!r}")
        if isinstance(self.max_batch, bool) or not isinstance(self.max_batch, int):
            raise TypeError(f"Batching's max_batch must be an int ≥ 1, got {self.max_batch!r}")
        if self.max_batch < 1:
            raise ValueError(f"Batching's max_batch must be ≥ 1, got {self.max_batch!r}")


class Batcher(Generic[T]):
    """Holds arrivals until the batch is due (see the module docstring)."""

    def __init__(self, batching: Batching, cores: int, runtime_of: Callable[[T], float] | None = None, *,
                 hold_while_busy: bool = True):
        self.batching = batching
        self.cores = cores
        self._hold_while_busy = hold_while_busy
        self._runtime_of = runtime_of  # a task's estimated run time (seconds), for a lone arrival's wait
        self._held: list[T] = []
        self._longest = 0.0  # the longest finite estimated run time held (runtime_of), seconds
        self._first_at = 0.0
        self._last_at = 0.0

    @property
    def held(self) -> list[T]:
        """The tasks held now, in arrival order (the driver fails them if it stops)."""
        return self._held

    def hold(self, tasks: Iterable[T], now: float) -> None:
        """Tasks arrived at ``now``."""
        tasks = list(tasks)
        if not tasks:
            return
        if not self._held:
            self._first_at, self._longest = now, 0.0
        self._last_at = now
        self._held.extend(tasks)
        if self._runtime_of is not None:
            runtimes = [r for r in map(self._runtime_of, tasks) if math.isfinite(r)]
            self._longest = max([self._longest, *runtimes])

    def _due_at(self, running: int | None = None) -> float:
        if len(self._held) > 1:
            window = self.batching.window
            quiet = max(self.batching.quiet, LONE_WAIT_SHARE * self._longest)
            return min(max(self._first_at + window, self._last_at + quiet), self._first_at + BURST_STRETCH * window)
        quiet = 0.0 if running == 0 else self.batching.quiet  # an idle machine: no floor (docstring)
        if self._runtime_of is not None:
            runtime = self._runtime_of(self._held[0])
            if math.isfinite(runtime):
                quiet = max(quiet, LONE_WAIT_SHARE * runtime)
        return self._first_at + min(quiet, self.batching.window)

    def _starving(self, waiting: int) -> bool:
        return not self._hold_while_busy or waiting < 2 * self.cores

    def wake_at(self, waiting: int, running: int | None = None) -> float | None:
        """When the held batch falls due, given ``waiting`` tasks in the scheduler and ``running``
        tasks on its cores (None: not told); None: no deadline.

        While the scheduler holds plenty of work there is none: the driver's next completion
        calls :meth:`release` again.
        """
        if not self._held or not self._starving(waiting):
            return None
        return self._due_at(running if waiting == 0 else None)

    def release(self, now: float, waiting: int, running: int | None = None) -> list[T]:
        """The held tasks if the batch is due at ``now``, else ``[]``."""
        if not self._held:
            return []
        due = self._due_at(running if waiting == 0 else None)
        if len(self._held) >= self.batching.max_batch or (now >= due and self._starving(waiting)):
            batch, self._held = self._held, []
            return batch
        return []
