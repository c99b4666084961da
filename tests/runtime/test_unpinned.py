"""A platform without CPU affinity (macOS): the executor starts, its workers run unpinned, and it
says so once (``host.sysfs.AFFINITY_UNAVAILABLE``).

The end-to-end case runs a Parsl script whose interpreters, and those of its node manager and
workers, start with a ``sitecustomize`` that removes ``os.sched_getaffinity``,
``os.sched_setaffinity`` and psutil's ``Process.cpu_affinity``, as macOS lacks them; a task reads
its CPUs from ``/proc``, which the simulation leaves in place.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from scalpel_executor.core.domains import Topology
from scalpel_executor.core.cpulist import format_cpu_list
from scalpel_executor.host.sysfs import AFFINITY_UNAVAILABLE, affinity_available, allowed_cpus, set_affinity
from scalpel_executor.runtime.node import processes

PROJECT_ROOT = str(Path(__file__).resolve().parents[2])
CPUS = sorted(os.sched_getaffinity(0))

NO_AFFINITY = textwrap.dedent(
    """
    import os
    import psutil

    for name in ("sched_getaffinity", "sched_setaffinity"):
        if hasattr(os, name):
            delattr(os, name)
    if hasattr(psutil.Process, "cpu_affinity"):
        del psutil.Process.cpu_affinity
    """
)

SCRIPT = textwrap.dedent(
    """
    import sys
    import parsl
    from parsl import python_app
    from parsl.config import Config
    from scalpel_executor import ScalpelExecutor

    @python_app
    def allowed_here(parsl_resource_specification=None):
        import os
        import time

        time.sleep(0.2)  # so both workers take a task
        with open("/proc/self/status") as status:
            line = next(line for line in status if line.startswith("Cpus_allowed_list:"))
        return os.getpid(), line.split(":", 1)[1].strip()

    if __name__ == "__main__":
        config = Config(executors=[ScalpelExecutor(label="scalpel", profiles=False)], run_dir=sys.argv[1])
        with parsl.load(config):
            print("TWO", allowed_here(parsl_resource_specification={"cores": 2}).result()[1])
            for pid, cpus in [f.result() for f in [allowed_here() for _ in range(4)]]:
                print("ONE", pid, cpus)
    """
)


def _without_affinity(monkeypatch):
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.delattr(os, "sched_setaffinity", raising=False)
    monkeypatch.delattr(psutil.Process, "cpu_affinity", raising=False)


def test_the_one_place_says_whether_affinity_exists(monkeypatch):
    assert affinity_available()  # Linux
    _without_affinity(monkeypatch)
    assert not affinity_available()
    assert set_affinity({CPUS[0]}) is False  # pins nothing, raises nothing
    assert allowed_cpus() == set(range(psutil.cpu_count()))  # every CPU may be used


def test_slot_cpus_keeps_each_slots_cpus_and_warns_once(monkeypatch, caplog):
    _without_affinity(monkeypatch)
    monkeypatch.setattr(processes, "_said_unpinned", False)
    topology = Topology.from_cpu_lists([CPUS])
    with caplog.at_level("WARNING", logger="scalpel_executor"):
        first = processes.slot_cpus(topology, "core", CPUS)
        second = processes.slot_cpus(topology, "domain", CPUS)
    assert first == [(cpu,) for cpu in CPUS]  # a task's thread count still reads them
    assert second == [tuple(CPUS)] * len(CPUS)
    assert [record.getMessage() for record in caplog.records] == [AFFINITY_UNAVAILABLE]


def test_slot_cpus_says_nothing_where_affinity_exists(monkeypatch, caplog):
    monkeypatch.setattr(processes, "_said_unpinned", False)
    with caplog.at_level("WARNING", logger="scalpel_executor"):
        processes.slot_cpus(Topology.from_cpu_lists([CPUS]), "core", CPUS)
    assert not caplog.records


@pytest.mark.skipif(len(CPUS) < 2, reason="needs two CPUs: a pinned worker would have one")
def test_executor_runs_unpinned_workers_where_the_platform_has_no_affinity(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NO_AFFINITY)
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), PROJECT_ROOT]))
    run = subprocess.run([sys.executable, str(script), str(tmp_path / "runinfo")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    everything = format_cpu_list(CPUS)
    lines = run.stdout.splitlines()
    ones = [line.split() for line in lines if line.startswith("ONE")]
    assert len(ones) == 4
    assert {cpus for _, _, cpus in ones} == {everything}  # no worker pinned to its core
    assert len({pid for _, pid, _ in ones}) == 2  # both workers ran tasks
    assert [line.split()[1] for line in lines if line.startswith("TWO")] == [everything]
    (log,) = (tmp_path / "runinfo").glob("*/parsl.log")
    assert log.read_text().count(AFFINITY_UNAVAILABLE) == 1
