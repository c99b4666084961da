"""How long workers outlive a driving process killed with SIGKILL.

Starts a driver (a DataFlowKernel with one ScalpelExecutor) in a child process, with its workers
idle or busy in a 60 s task, SIGKILLs it, and times until every worker and footprint sampler is
gone. Usage: ``python benchmarks/driver_kill.py [--rounds 2]``; figures in docs/reliability.md.
"""

import argparse
import os
import signal
import subprocess
import sys
import time

import psutil

DRIVER = r'''
import parsl, sys, time
from parsl import python_app
from parsl.config import Config
from scalpel_executor import ScalpelExecutor
@python_app
def sleepy(t):
    import time; time.sleep(t); return t
ex = ScalpelExecutor(profiles=False)
parsl.load(Config(executors=[ex]))
busy = [sleepy(60) for _ in ex.pool.worker_pids] if sys.argv[1] == "busy" else None
time.sleep(1.5)
print(" ".join(map(str, ex.pool.worker_pids)), flush=True)
time.sleep(600)
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="rounds per mode (default 2)")
    args = parser.parse_args()
    for mode in ["idle", "busy"] * args.rounds:
        driver = subprocess.Popen([sys.executable, "-c", DRIVER, mode], stdout=subprocess.PIPE, text=True)
        workers = [int(pid) for pid in driver.stdout.readline().split()]
        started = workers + [c.pid for pid in workers for c in psutil.Process(pid).children(recursive=True)]
        killed = time.monotonic()
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        while any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in started):
            time.sleep(0.01)
        print(f"{mode}: {len(started)} processes gone {time.monotonic() - killed:.2f} s after the SIGKILL")
    return 0


if __name__ == "__main__":
    sys.exit(main())
