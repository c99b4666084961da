"""What the measurement probe costs a task: the same ~1 s CPU+memory task measured and not measured.

Two ways to pair the task, both interleaved (the order alternates from pair to pair, so the
machine's drift hits both sides alike):

* fresh workers (default): for every pair, two fresh workers (``python -m
  scalpel_executor.runtime.worker.main``), one with ``--probe on`` and one with ``--probe off``, pinned
  to the same CPU, run the task once each; which of the two is started first alternates too (the
  first-started worker ran 10 to 19 % faster here with both probes off, numpy's huge pages going
  to whichever asks first). ``--control`` starts both with the probe off: the noise floor.
* ``--same-worker``: one worker with the probe on runs both sides, the "on" task sent with the
  measure flag and the "off" task without, so the two share one process and its memory. Needs a
  worker that takes the flag. ``--control`` sends both without it.

``--sampling`` sends the "on" tasks as one profile key's sequence through the executor's sampling
rule (:mod:`scalpel_executor.learning.sampling`; ``--measure-first``, ``--measure-every``), so the
figures are the amortised cost per task; without it every "on" task is measured. The task is
fixed work (numpy sweeps over a ``--size`` array plus a little Python per sweep), calibrated once
to last about ``--seconds``. Times are the workers' own task wall times (no transport).

Prints the median wall time of each side, the median of the per-pair ratios on/off and the ratio
of their sums (the probe's cost; with ``--sampling`` the sums are the amortised figure), the same
for CPU time on the core (the task's own plus the sampler's, which other tenants' processes do
not lengthen as they do wall times), and the sampler's CPU per task, read from the sampler process's own ``/proc/PID/schedstat`` (every cycle
it spent, waking included) and from its windows' records; ``--json`` writes every sample.

    python benchmarks/probe_cost.py --pairs 15 --seconds 1.0
    python benchmarks/probe_cost.py --pairs 23 --same-worker --sampling
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys

from scalpel_executor.core.units import parse_size
from scalpel_executor.runtime.node.processes import WorkerClient
from scalpel_executor.runtime.wire.worker_messages import Run, encode

TICK = os.sysconf("SC_CLK_TCK")


def work(size: int, sweeps: int) -> float:
    """Sweep a ``size``-byte array ``sweeps`` times (add, then a little Python); returns its seconds."""
    import time

    import numpy as np

    start = time.perf_counter()
    data = np.ones(size // 8)
    total = 0.0
    for index in range(sweeps):
        data += 1.0
        total += float(data[index % data.size])
    return time.perf_counter() - start


def run(worker: WorkerClient, measure: bool, *args) -> dict:
    """Run ``work(*args)`` in ``worker``, measured by its probe or not; the task's stats."""
    from parsl.serialize import pack_apply_message

    worker._next_id += 1
    task = pack_apply_message(work, args, {})
    # Run(id, buffer) alone for a measured task: a worker that predates the measure flag takes it too.
    message = Run(worker._next_id, task) if measure else Run(worker._next_id, task, False)
    worker.connection.send_bytes(encode(message))
    result = worker.receive()
    if not result.ok:
        raise RuntimeError(f"the task failed in worker pid {worker.process.pid}")
    return result.stats


def sampler_pid(worker: WorkerClient) -> int | None:
    """The pid of the worker's sampler process, or None when its probe is off."""
    import psutil

    for child in psutil.Process(worker.process.pid).children():
        with contextlib.suppress(psutil.Error):
            if "--sampler" in child.cmdline():
                return child.pid
    return None


def cpu_seconds(pid: int | None) -> float:
    """CPU seconds process ``pid`` has run so far (0 for None): ``schedstat``'s nanoseconds where the
    kernel keeps them, else ``stat``'s user and system ticks (10 ms each, too coarse for one task)."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as file:
            return int(file.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        with open(f"/proc/{pid}/stat", "rb") as file:
            fields = file.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK


class Side:
    """One side of the comparison: its wall times, and the sampler's CPU and windows for "on"."""

    def __init__(self) -> None:
        self.walls: list[float] = []
        self.cpus: list[float] = []  # the task's own CPU seconds (the worker's process time)
        self.sampler_cpu: list[float] = []  # from /proc/PID/stat around the task
        self.window_cpu: list[float] = []  # from the windows' own records
        self.windows: list[int] = []
        self.footprints: list[float | None] = []
        self.measured: list[bool] = []

    def add(self, stats: dict, sampler_cpu: float, measured: bool) -> None:
        self.walls.append(stats["wall"])
        self.cpus.append(stats["cpu"])
        self.sampler_cpu.append(sampler_cpu)
        self.window_cpu.append(stats.get("probe_cpu") or 0.0)
        self.windows.append(stats.get("windows") or 0)
        self.footprints.append(stats.get("footprint"))
        self.measured.append(measured)


def timed(worker: WorkerClient, sampler: int | None, measure: bool, side: Side, size: int, sweeps: int) -> None:
    before = cpu_seconds(sampler)
    stats = run(worker, measure, size, sweeps)
    side.add(stats, cpu_seconds(sampler) - before, measure and sampler is not None)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=15, help="on/off pairs to run (default 15)")
    parser.add_argument("--seconds", type=float, default=1.0, help="target task length (default 1.0)")
    parser.add_argument("--size", default="16MiB", help="the task's array (default 16MiB)")
    parser.add_argument("--cpu", type=int, default=min(os.sched_getaffinity(0)), help="CPU both workers run on")
    parser.add_argument("--json", metavar="FILE", help="write every sample to FILE")
    parser.add_argument("--control", action="store_true",
                        help="A/A control: measure the 'on' side no more than the 'off' side, to see the noise floor")
    parser.add_argument("--same-worker", action="store_true",
                        help="run both sides in one probed worker, the 'on' task with the measure flag")
    parser.add_argument("--sampling", action="store_true",
                        help="measure the 'on' tasks by the executor's sampling rule, as one key's sequence")
    parser.add_argument("--measure-first", type=int, help="with --sampling: the rule's measure_first (default: the executor's)")
    parser.add_argument("--measure-every", type=int, help="with --sampling: the rule's measure_every (default: the executor's)")
    args = parser.parse_args(argv)
    if args.pairs < 1 or args.seconds <= 0:
        parser.error(f"--pairs must be at least 1 and --seconds positive, got {args.pairs} and {args.seconds}")
    return args


def sampling_plan(args: argparse.Namespace):
    """The executor's sampling rule for the 'on' side, or None (every 'on' task measured)."""
    if not args.sampling:
        return None  # imported only here: the fresh-worker mode also runs against a tree without the rule
    from scalpel_executor.learning.sampling import MeasurePlan, Sampling

    rule = Sampling(**{name: value for name, value in (("measure_first", args.measure_first),
                                                       ("measure_every", args.measure_every)) if value is not None})
    args.measure_first, args.measure_every = rule.measure_first, rule.measure_every
    return MeasurePlan(rule)


def sweeps_for_seconds(cpu: int, size: int, seconds: float) -> int:
    """Sweeps of a ``size`` array that take about ``seconds`` on ``cpu`` (fastest of three)."""
    with WorkerClient([cpu], probe=False) as plain:
        plain.run(work, size, 10)
        per_sweep = min(plain.run(work, size, 100)[1] for _ in range(3)) / 100
    return max(1, round(seconds / per_sweep))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    size = parse_size(args.size, what="--size")
    sweeps = sweeps_for_seconds(args.cpu, size, args.seconds)
    plan = sampling_plan(args)
    on, off = Side(), Side()
    warm = max(10, sweeps // 3)  # imports, the array's first touch, the sampler's first windows
    same = WorkerClient([args.cpu], probe=True) if args.same_worker else None
    try:
        if same is not None:
            run(same, False, size, warm)
        for pair in range(args.pairs):
            measure = not args.control and (plan is None or plan.decide("probe_cost.work"))
            with contextlib.ExitStack() as stack:
                if same is not None:
                    probed, plain, unmeasured = same, same, False
                else:
                    # Fresh workers for every pair: a worker's heap keeps its physical pages from task
                    # to task, and their placement alone made one process 20 % slower than another.
                    # The plain worker has no probe, so its tasks go without the flag (True, the default).
                    unmeasured = True
                    probes = (not args.control, False) if pair % 2 == 0 else (False, not args.control)
                    started = [stack.enter_context(WorkerClient([args.cpu], probe=probe)) for probe in probes]
                    probed, plain = started if pair % 2 == 0 else started[::-1]
                    for worker in (probed, plain):
                        run(worker, True, size, warm)
                # With both probes off (fresh control) the flag changes nothing: send it unset.
                sides = [(probed, measure or (args.control and same is None), on), (plain, unmeasured, off)]
                for worker, flag, side in sides if pair % 2 == 0 else sides[::-1]:
                    timed(worker, sampler_pid(worker), flag, side, size, sweeps)
            print(f"pair {pair + 1:2d}: on{'*' if on.measured[-1] else ' '} {on.walls[-1]:.3f} s  "
                  f"off {off.walls[-1]:.3f} s  ratio {on.walls[-1] / off.walls[-1]:.3f}  "
                  f"sampler {on.sampler_cpu[-1] * 1e3:.1f} ms CPU, {on.windows[-1]} windows", file=sys.stderr)
    finally:
        if same is not None:
            same.close()
    report(args, size, sweeps, on, off)
    return 0


def report(args: argparse.Namespace, size: int, sweeps: int, on: Side, off: Side) -> None:
    ratios = [a / b for a, b in zip(on.walls, off.walls)]
    median_ratio, sum_ratio = statistics.median(ratios), sum(on.walls) / sum(off.walls)
    measured = [i for i, m in enumerate(on.measured) if m]
    mode = "one probed worker, measure flag on/off" if args.same_worker else "fresh workers, probe on/off"
    print(f"task: {sweeps} sweeps of {args.size} on CPU {args.cpu}, {args.pairs} interleaved pairs ({mode}"
          f"{', control' if args.control else ''})")
    if args.sampling:
        print(f"sampling: measure_first={args.measure_first}, measure_every={args.measure_every}: "
              f"{len(measured)} of {args.pairs} 'on' tasks measured")
    print(f"median wall, off: {statistics.median(off.walls):.3f} s")
    print(f"median wall, on:  {statistics.median(on.walls):.3f} s")
    print(f"median ratio on/off:     {median_ratio:.4f}  ({100 * (median_ratio - 1):+.2f} %)")
    print(f"ratio of sums on/off:    {sum_ratio:.4f}  ({100 * (sum_ratio - 1):+.2f} %)")
    # CPU time on the core, the task's own plus the sampler's: what the probe costs the core, blind
    # to other tenants' processes that lengthen wall times on a shared machine.
    core = [(c + p) / o for c, p, o in zip(on.cpus, on.sampler_cpu, off.cpus)]
    print(f"core CPU on/off:         {statistics.median(core):.4f} median, "
          f"{(sum(on.cpus) + sum(on.sampler_cpu)) / sum(off.cpus):.4f} of sums (task {statistics.median(off.cpus):.3f} s CPU)")
    task = statistics.median(off.walls)
    if measured:
        per_measured = statistics.median(on.sampler_cpu[i] for i in measured)
        print(f"sampler CPU per measured task: {per_measured * 1e3:.1f} ms median ({100 * per_measured / task:.2f} % "
              f"of the task; windows' records {statistics.median(on.window_cpu[i] for i in measured) * 1e3:.1f} ms, "
              f"{statistics.median(on.windows[i] for i in measured):.0f} windows)")
    amortised = sum(on.sampler_cpu) / len(on.sampler_cpu)
    print(f"sampler CPU per 'on' task:     {amortised * 1e3:.2f} ms mean ({100 * amortised / task:.2f} % of the task)"
          f"; per 'off' task {sum(off.sampler_cpu) / len(off.sampler_cpu) * 1e3:.2f} ms")
    if measured:
        footprints = [on.footprints[i] for i in measured if on.footprints[i] is not None]
        if footprints:
            print(f"footprint measured: {statistics.median(footprints) / 2**20:.2f} MiB median "
                  f"(array {size / 2**20:.2f} MiB)")
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"size": size, "sweeps": sweeps, "cpu": args.cpu, "same_worker": args.same_worker,
                       "control": args.control, "sampling": args.sampling, "on": on.walls, "off": off.walls,
                       "ratios": ratios, "cpu_on": on.cpus, "cpu_off": off.cpus, "measured": on.measured, "sampler_cpu": on.sampler_cpu,
                       "window_cpu": on.window_cpu, "windows": on.windows, "footprints": on.footprints}, file, indent=1)


if __name__ == "__main__":
    sys.exit(main())
