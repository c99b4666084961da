"""The CPU time processes get beside a load, started in a session of their own or in a process
group of the caller's session: what the way the executor starts its workers and node managers
(``scalpel_executor.runtime.node.processes.OWN_GROUP``) gives them against other processes.

Where the kernel shares CPU time among sessions (``/proc/sys/kernel/sched_autogroup_enabled`` 1,
processes in no cgroup of their own), each session draws one share: ``--workers`` busy processes
each in a session of their own take more of the CPUs beside a ``--load`` of busy processes than
the same processes in process groups of one session, which is how HTEX's workers start (Parsl's
``execute_wait``, ``os.setpgrp``). With autogroup off, or in a cgroup (systemd's user slices,
Slurm's job cgroups), the two ways get the same.

Each round runs both ways, the order alternating, for ``--seconds`` each; printed: every round's
CPU-seconds per way, out of the workers' wall-core-seconds, and the medians.

    python benchmarks/cpu_share.py --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

BUSY = "import resource, sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end: pass\n" \
       "print(resource.getrusage(resource.RUSAGE_SELF).ru_utime + resource.getrusage(resource.RUSAGE_SELF).ru_stime)"
#: How each way starts a worker: a session of its own, or a process group of the caller's session.
WAYS = {"session": {"start_new_session": True}, "group": {"preexec_fn": os.setpgrp}}


def busy(seconds: float, **how) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", BUSY, str(seconds)], stdout=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, **how)


def cpu_seconds(way: str, workers: int, seconds: float) -> float:
    """CPU-seconds ``workers`` busy processes started ``way`` took over ``seconds``."""
    started = [busy(seconds, **WAYS[way]) for _ in range(workers)]
    return sum(float(process.communicate()[0]) for process in started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--rounds", type=int, default=5, help="rounds of both ways (default 5)")
    parser.add_argument("--seconds", type=float, default=4.0, help="seconds each way runs (default 4)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2,
                        help="busy processes started each way (default: the CPUs)")
    parser.add_argument("--load", type=int, default=os.cpu_count() or 2,
                        help="busy processes in one session of their own running throughout (default: the CPUs)")
    args = parser.parse_args(argv)
    for name in ("rounds", "workers"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.seconds <= 0 or args.load < 0:
        parser.error(f"--seconds must be above 0 and --load 0 or more, got {args.seconds} and {args.load}")
    autogroup = Path("/proc/sys/kernel/sched_autogroup_enabled")
    print(f"sched_autogroup_enabled: {autogroup.read_text().strip() if autogroup.exists() else 'absent'}; "
          f"{args.workers} workers beside a load of {args.load}, {args.seconds:g} s each way "
          f"({args.workers * args.seconds:g} wall-core-seconds)")
    span = args.rounds * 2 * args.seconds + 5
    load = [busy(span, start_new_session=True) for _ in range(args.load)]
    taken: dict[str, list[float]] = {way: [] for way in WAYS}
    try:
        for round_ in range(args.rounds):
            for way in (WAYS if round_ % 2 == 0 else reversed(list(WAYS))):
                taken[way].append(cpu_seconds(way, args.workers, args.seconds))
            print(f"round {round_ + 1}: " + ", ".join(f"{way} {taken[way][-1]:.2f}" for way in WAYS), flush=True)
    finally:
        for process in load:
            process.kill()
            process.wait()
    print("medians: " + ", ".join(f"{way} {statistics.median(v):.2f} CPU-s" for way, v in taken.items())
          + f"; session / group {statistics.median(taken['session']) / statistics.median(taken['group']):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
