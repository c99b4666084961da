"""The core scheduler's CPU per arriving task and per start, against how many tasks wait.

A driver (the live pool, the simulator) calls ``Scheduler.add`` as batches fall due and
``Scheduler.dispatch`` at every wake; this script plays that conversation on one LLC domain of 16
cores with a simulated clock and measures the scheduler's own CPU time (``time.process_time``):

* setup (not timed): a burst of ``waiting`` + 16 tasks arrives through the batch rule
  (``core.batching``, released in batches of at most ``max_batch``), and the first dispatch starts
  16, leaving ``waiting`` tasks waiting;
* then ``--rounds`` rounds, each one arrival and one completion, so the queue stays as long: the
  arrival is held, released when its batch falls due, added, and followed by a dispatch as the
  pool does (µs per arrival: all of that); the completion releases a core and dispatches, which
  starts one task (µs per start). ``--direct`` adds each arrival at once, as the simulator does
  without a batch window; the baselines then plan again at every start.

Two kinds of task: ``noop`` (64 KiB, 1 ms, exact estimates: every start fits) and ``heavy``
(3 MiB, 1 s, run times known to ±20%: on a 16 MiB LLC the next start always overflows and no
waiting task fits, so the admission rule looks for one every time). Each figure is the median
over ``--repeats`` runs; the last column is the cost with the most tasks waiting over the cost
with the fewest. ``--calls`` counts the Python function calls instead (cProfile), a measure of
work that a loaded machine does not blur.

Run it with PYTHONPATH pointing at another checkout to compare two versions of the scheduler.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time

from scalpel_executor.core.batching import Batcher, Batching
from scalpel_executor.core.scheduler import CHECKED_AT_DISPATCH, Scheduler
from scalpel_executor.core.tasks import Task

MiB = 1 << 20
CORES = 16
LLC = 16 * MiB
KINDS = {  # footprint, run time estimate, its spread
    "noop": (64 * 1024, 0.001, 0.0),
    "heavy": (3 * MiB, 1.0, 0.2),
}
TICK = 0.05  # simulated seconds between one round's events: every held batch is due by the next


def make_task(number: int, kind: str) -> Task:
    footprint, runtime, spread = KINDS[kind]
    return Task(number, footprint, runtime, runtime_spread=spread, key=kind)


class CallCounter:
    """process_time's stand-in for --calls: each read returns the function calls profiled so far."""

    def __init__(self):
        self.profile = cProfile.Profile()
        self.profile.enable()

    def __call__(self) -> float:
        self.profile.disable()
        calls = sum(entry[1] for entry in pstats.Stats(self.profile).stats.values())
        self.profile.enable()
        return calls / 1e6  # measure() reports millionths of what this returns


def measure(policy: str, kind: str, waiting: int, rounds: int, direct: bool, max_batch: int,
            clock=time.process_time) -> tuple[float, float]:
    """µs of scheduler CPU per arrival and per start, with ``waiting`` tasks waiting (or what
    ``clock`` counts, in millionths)."""
    scheduler = Scheduler([list(range(CORES))], policy, llc=LLC)
    batcher: Batcher[Task] = Batcher(Batching(max_batch=max_batch), CORES, runtime_of=lambda task: task.runtime,
                                     hold_while_busy=policy not in CHECKED_AT_DISPATCH)
    now, number = 0.0, 0

    def take_arrivals(arrived: list[Task]) -> None:  # as the pool's _take_arrivals, then _dispatch
        if direct:
            scheduler.add(arrived)
        else:
            if arrived:
                batcher.hold(arrived, now)
            batch = batcher.release(now, scheduler.waiting, len(scheduler.running))
            if batch:
                scheduler.add(batch)
        for assignment in scheduler.dispatch(now):
            running.append(assignment.slot)

    running: list = []
    burst = [make_task(number + i, kind) for i in range(waiting + CORES)]
    number += len(burst)
    for at in range(0, len(burst), max_batch):  # the batch rule releases a burst at most max_batch at once
        scheduler.add(burst[at:at + max_batch])
    take_arrivals([])
    assert scheduler.waiting == waiting and len(running) == CORES, (scheduler.waiting, len(running))
    if clock is CallCounter:
        clock = CallCounter()
    arrival_cpu = start_cpu = 0.0
    starts = 0
    for _ in range(rounds):
        now += TICK
        task = make_task(number, kind)
        number += 1
        began = clock()
        take_arrivals([task])
        now += TICK / 2  # the batch's deadline (a lone arrival waits at most the window)
        take_arrivals([])
        arrival_cpu += clock() - began
        now += TICK / 2
        slot = running.pop(0)
        began = clock()
        scheduler.release(slot)
        before = len(running)
        take_arrivals([])
        start_cpu += clock() - began
        starts += len(running) - before
    if isinstance(clock, CallCounter):
        clock.profile.disable()
    return arrival_cpu / rounds * 1e6, start_cpu / max(1, starts) * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("--policies", nargs="+", default=["scalpel", "fifo", "longest_first", "scalpel-paper"],
                        help="policies to measure (default: %(default)s)")
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=list(KINDS),
                        help="task kinds (default: %(default)s)")
    parser.add_argument("--waiting", nargs="+", type=int, default=[100, 1000, 10_000],
                        help="tasks waiting (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=200, help="arrivals and starts timed per run (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure, median taken (default: %(default)s)")
    parser.add_argument("--max-batch", type=int, default=Batching.max_batch,
                        help="the batch rule's max_batch (default: %(default)s)")
    parser.add_argument("--calls", action="store_true",
                        help="count Python function calls per arrival and per start instead of µs of CPU")
    parser.add_argument("--direct", action="store_true",
                        help="add each arrival at once, without the batch rule (the simulator without a window)")
    args = parser.parse_args(argv)
    unit = "calls" if args.calls else "µs"
    header = f"{'policy':<14} {'kind':<6} {'waiting':>8} {unit + '/arrival':>11} {unit + '/start':>10}"
    print(f"scheduler {'function calls' if args.calls else 'CPU'} per arrival and per start, {CORES} cores, one {LLC // MiB} MiB LLC domain, "
          f"{args.rounds} rounds, median of {args.repeats}{', arrivals added directly' if args.direct else ''}")
    print(header)
    for policy in args.policies:
        for kind in args.kinds:
            rows = []
            for waiting in args.waiting:
                runs = [measure(policy, kind, waiting, args.rounds, args.direct, args.max_batch,
                                clock=CallCounter if args.calls else time.process_time)
                        for _ in range(args.repeats)]
                arrival = statistics.median(r[0] for r in runs)
                start = statistics.median(r[1] for r in runs)
                rows.append((arrival, start))
                print(f"{policy:<14} {kind:<6} {waiting:>8,} {arrival:>11.1f} {start:>10.1f}", flush=True)
            if len(rows) > 1:
                print(f"{policy:<14} {kind:<6} {'ratio':>8} {rows[-1][0] / rows[0][0]:>10.2f}x "
                      f"{rows[-1][1] / rows[0][1]:>9.2f}x  ({args.waiting[-1]:,} / {args.waiting[0]:,} waiting)")


if __name__ == "__main__":
    main()
