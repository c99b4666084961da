"""The host's and this process tree's CPU time (host.cpu_time): other work, apart from the executor's own."""

import os
import subprocess
import sys
import threading
import time

import pytest

from scalpel_executor.host.cpu_time import CpuSample, other_work_per_core, sample_cpu


def stat(tmp_path, user, nice, system, idle, steal=0):
    path = tmp_path / "stat"
    path.write_text(f"cpu  {user} {nice} {system} {idle} 0 0 0 {steal} 0 0\ncpu0 1 2 3 4\n")
    return path


def test_other_work_is_the_hosts_busy_time_less_the_trees_own(tmp_path):
    hz = os.sysconf("SC_CLK_TCK")
    before = sample_cpu(stat(tmp_path, 0, 0, 0, 0))
    after = sample_cpu(stat(tmp_path, 3 * hz, 50 * hz, 1 * hz, 10 * hz, steal=1 * hz))  # niced time is not others'
    assert (before.busy, after.busy) == (0.0, 5.0)  # user + system + steal
    start, end = CpuSample(0.0, before.busy, 1.0), CpuSample(2.0, after.busy, 2.0)  # the tree spent 1 s of it
    assert other_work_per_core(start, end, 2) == pytest.approx((5.0 - 1.0) / (2.0 * 2))


def test_where_the_hosts_time_is_unreadable_other_work_is_unknown(tmp_path):
    sample = sample_cpu(tmp_path / "missing")
    assert sample.busy is None and sample.own >= 0
    assert other_work_per_core(sample, sample_cpu(tmp_path / "missing"), 2) is None
    (tmp_path / "odd").write_text("intr 1 2 3\n")
    assert sample_cpu(tmp_path / "odd").busy is None


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="needs Linux's /proc/stat")
def test_the_trees_own_threads_and_waited_children_are_not_other_work():
    """Threads here and a child this process waits for each burn a set amount of CPU time (not of
    wall time, so a loaded host only makes it take longer): the host's busy time grows by at least
    what the tree's own does, so none of it is counted as other work."""
    start = sample_cpu()
    spin = "import time\nwhile time.process_time() < 0.4: pass\n"
    child = subprocess.Popen([sys.executable, "-c", spin])

    def spin_here():
        while time.thread_time() < 0.2:
            pass

    threads = [threading.Thread(target=spin_here) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    child.wait()
    end = sample_cpu()
    own, busy = end.own - start.own, end.busy - start.busy
    assert own >= 0.75  # the child's 0.4 s and the threads' 2 x 0.2 s, less clock-tick rounding
    tick = 1 / os.sysconf("SC_CLK_TCK")
    assert busy >= own - 4 * tick * os.cpu_count(), (busy, own)
