"""Where each task of the default policy's plan stands, indexed by rank and by admission signature. Pure.

The scheduler keeps its plan as a list of one-task groups, the next one last. Two questions walked
that list from the head, once per arriving task and once per start, so that their cost grew with
the tasks waiting (measured on 16 cores: 10 µs + 0.19 µs per waiting task for an arrival's merge;
1.9 ms per start with 3,000 waiting 3 MiB tasks, none of which fitted):

* ``Scheduler._merge``: the first task of a priority level, in dispatch order, whose rank (run
  time + tail) is below the arrival's;
* ``Scheduler._admit``: the first waiting task of each admission signature (footprint, profile key
  while unmeasured, interference terms: ``admission.signature``) after the head, in dispatch order,
  which is all ``admission.decide`` reads of the tasks past its look-ahead.

:class:`PlanIndex` answers both from labels: every task of the plan carries an integer label that
grows with its place in the list (dispatch order is falling labels), so a task's place is a bisection
of the labels, and per priority level the labels of the tasks of each rank and of each signature
are kept sorted. An arrival is labelled between its neighbours; when two neighbours' labels are
adjacent integers, a window around them is labelled again, evenly, doubling until it has room.

Cost: a place, an insertion or a removal is O(log n) plus a memmove of the list (n tasks planned);
the first task below a rank is O(r log n) for r distinct ranks below it in its level; the first
task of every signature is O(s log n) for s distinct signatures in the level. With run times
estimated per profile key (as the live executor does), r and s are the keys waiting, not the tasks.

>>> from scalpel_executor.core.tasks import Task
>>> plan = [Task(i, runtime=r, seq=i) for i, r in enumerate([1.0, 2.0, 3.0])]  # dispatch: 3 s first
>>> index = PlanIndex(plan)
>>> index.first_below(0.0, 2.5) == index.position(plan[1])  # the first in dispatch order below 2.5 s
True
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections import deque
from collections.abc import Callable, Hashable, Sequence

from scalpel_executor.core.admission import signature
from scalpel_executor.core.tasks import Task, rank

__all__ = ["PlanIndex"]

GAP = 1 << 64  # between labels after a relabelling: 64 arrivals at one place before the next
ROOM = 1 << 16  # a relabelled window leaves at least this much between labels


class PlanIndex:
    """Labels and per-level indexes of a plan of tasks, the next task last (module docstring).

    The scheduler calls :meth:`insert` and :meth:`remove` beside every change to its list, with
    the same list position, and builds a new index when it plans again.
    """

    def __init__(self, plan: Sequence[Task]):
        # Deques, as the plan: most arrivals are labelled below every other, most starts remove the top.
        self.labels: deque[int] = deque(i * GAP for i in range(len(plan)))
        self._entry: dict[int, tuple[int, float, float, Hashable]] = {}  # seq -> label, priority, rank, signature
        self._ranks: dict[float, dict[float, deque[int]]] = {}  # priority -> rank -> labels, ascending
        self._rank_values: dict[float, list[float]] = {}  # priority -> its distinct ranks, ascending
        self._signatures: dict[float, dict[Hashable, deque[int]]] = {}  # priority -> signature -> labels
        for label, task in zip(self.labels, plan):
            self._add(label, task, append=True)

    def __len__(self) -> int:
        return len(self.labels)

    def position(self, task: Task) -> int:
        """``task``'s place in the plan list."""
        return bisect_left(self.labels, self._entry[task.seq][0])

    def insert(self, at: int, task: Task, task_at: Callable[[int], Task]) -> None:
        """``task`` was inserted at list position ``at``; ``task_at(i)`` is the task at position ``i``
        of the list after the insertion."""
        labels = self.labels
        left = labels[at - 1] if at > 0 else None
        right = labels[at] if at < len(labels) else None
        if left is not None and right is not None and right - left < 2:
            self._relabel(at, task_at)  # ``at`` inclusive: room made around the new place
            left, right = labels[at - 1], labels[at]
        if left is None and right is None:
            label = 0
        elif left is None:
            label = right - GAP
        elif right is None:
            label = left + GAP
        else:
            label = (left + right) // 2
        labels.insert(at, label)
        self._add(label, task)

    def remove(self, at: int, task: Task) -> None:
        """The task at list position ``at`` left the plan."""
        label, priority, task_rank, task_signature = self._entry.pop(task.seq)
        del self.labels[at]
        ranks = self._ranks[priority]
        _discard(ranks[task_rank], label)
        if not ranks[task_rank]:
            del ranks[task_rank]
            values = self._rank_values[priority]
            del values[bisect_left(values, task_rank)]
        signatures = self._signatures[priority]
        _discard(signatures[task_signature], label)
        if not signatures[task_signature]:
            del signatures[task_signature]

    def first_below(self, priority: float, below: float) -> int | None:
        """The list position of the first task of ``priority``'s level, in dispatch order, whose
        rank is below ``below``; None: none is."""
        values = self._rank_values.get(priority)
        if not values:
            return None
        ranks = self._ranks[priority]
        best = max((ranks[value][-1] for value in values[:bisect_left(values, below)]), default=None)
        return None if best is None else bisect_left(self.labels, best)

    def first_of_signatures(self, priority: float, before: int, skip: Callable[[Hashable], bool]) -> list[int]:
        """The list positions, in dispatch order, of the first task before list position ``before``
        (in dispatch order: after it) of each signature of ``priority``'s level for which ``skip``
        is false."""
        bound = self.labels[before] if before < len(self.labels) else None
        firsts = []
        for task_signature, labels in self._signatures.get(priority, {}).items():
            if skip(task_signature):
                continue
            at = (len(labels) if bound is None else bisect_left(labels, bound)) - 1
            if at >= 0:
                firsts.append(labels[at])
        firsts.sort(reverse=True)
        return [bisect_left(self.labels, label) for label in firsts]

    def signatures_counted(self, priority: float) -> dict[Hashable, int]:
        """Each signature of ``priority``'s level and how many planned tasks have it."""
        return {key: len(labels) for key, labels in self._signatures.get(priority, {}).items()}

    def _add(self, label: int, task: Task, *, append: bool = False) -> None:
        task_rank, task_signature = rank(task), signature(task)
        self._entry[task.seq] = (label, task.priority, task_rank, task_signature)
        ranks = self._ranks.setdefault(task.priority, {})
        if task_rank not in ranks:
            ranks[task_rank] = deque()
            insort(self._rank_values.setdefault(task.priority, []), task_rank)
        labelled = self._signatures.setdefault(task.priority, {}).setdefault(task_signature, deque())
        if append:  # labels come in ascending order while the index is built
            ranks[task_rank].append(label)
            labelled.append(label)
        else:
            insort(ranks[task_rank], label)
            insort(labelled, label)

    def _relabel(self, at: int, task_at: Callable[[int], Task]) -> None:
        """Spread the labels of a window of the list around ``at`` (the new task's place, not yet
        labelled) evenly, doubling the window until it leaves :data:`ROOM` between labels.
        Order is kept, so each index list keeps its order: its run of labels inside the window is
        replaced in place."""
        labels, n = self.labels, len(self.labels)
        width = 1
        while True:
            lo, hi = max(0, at - width), min(n, at + width)  # labels[lo:hi] are relabelled
            low = labels[lo - 1] if lo > 0 else None
            high = labels[hi] if hi < n else None
            count = hi - lo + 1  # and one place left empty for the new task
            if low is None or high is None or (high - low) // (count + 1) >= ROOM:
                break
            width *= 2
        if low is None and high is None:
            low = -GAP
        step = GAP if low is None or high is None else (high - low) // (count + 1)
        if low is None:
            low = high - step * (count + 1)
        fresh = [low + step * (k + 1) for k in range(count)]
        del fresh[at - lo]  # the new task's place stays empty
        for k, label in enumerate(fresh):
            labels[lo + k] = label
        # each index list's labels inside the window, replaced in order (the order is unchanged)
        runs: dict[int, tuple[deque[int], list[int]]] = {}  # id(index list) -> it, its new labels in order
        for k, task in enumerate(task_at(i) for i in range(lo, hi + 1) if i != at):
            _, priority, task_rank, task_signature = self._entry[task.seq]
            self._entry[task.seq] = (fresh[k], priority, task_rank, task_signature)
            for target in (self._ranks[priority][task_rank], self._signatures[priority][task_signature]):
                runs.setdefault(id(target), (target, []))[1].append(fresh[k])
        for target, run in runs.values():
            start = bisect_right(target, low) if lo > 0 else 0
            for k, label in enumerate(run):
                target[start + k] = label


def _discard(labels: deque[int], label: int) -> None:
    del labels[bisect_left(labels, label)]
