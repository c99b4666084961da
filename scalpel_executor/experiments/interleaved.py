"""Interleaved rounds: executors timed on no-op tasks in turn, each sample in a process of its own.

The harness of ``benchmarks/throughput.py``, ``node_manager.py`` and ``provider_mode.py``::

    the script's process                              one child per sample (this module, run with -m)
      run_rounds(contenders, rounds, ...)               build the contender's executor, parsl.load
        round 1: A B C, round 2: A B C, ... ──SPEC──>   wait for its managers (provider mode)
        on_sample(round, name, sample)      <──JSON──   warm up (50 tasks), time TASKS at once,
      medians(samples, keys)                            then PINGS lone tasks one after another

Contenders alternate within every round so that the machine's drift hits all alike, and each
sample is a fresh interpreter with one DataFlowKernel, so no executor inherits another's threads or
imports. The executors' profiles go to a store of the rounds' own (``SCALPEL_PROFILE_STORE``), kept
across rounds as a user's would be, never to the user's store.

A sample holds ``throughput`` (tasks/s of the submitted-at-once phase), ``round_trip_median`` and
``round_trip_p90`` (seconds, lone tasks), and with :attr:`Contender.measure_cpu` the CPU the
driving process spent per task in the throughput phase (``driver_cpu_per_task_us``: its own
threads, Parsl's DFK and, in-process, the pool's) and the node manager process's
(``manager_cpu_per_task_us``, None without :attr:`Contender.manager_cpu`).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import parsl
import psutil
from parsl import python_app
from parsl.config import Config
from parsl.executors import HighThroughputExecutor
from parsl.providers import LocalProvider

import scalpel_executor
from scalpel_executor.runtime.executor import DEFAULT_LAUNCH_CMD, ScalpelExecutor

WARM_UP = 50  # tasks before the timed phases: workers started, imports done


@dataclass(frozen=True)
class Contender:
    """One executor of the rounds, as its child process builds it.

    ``executor``: ``"htex"`` (Parsl's HighThroughputExecutor) or ``"scalpel"`` (ScalpelExecutor),
    labelled so; ``options``: its other constructor arguments (JSON); ``provider``: the
    ``LocalProvider`` arguments of its blocks (None: no provider; HTEX always needs one);
    ``launch_suffix``: appended to ScalpelExecutor's default ``launch_cmd`` in provider mode;
    ``config``: ``parsl.config.Config`` arguments besides the executor and run directory;
    ``managers``: node managers to wait for before the warm-up (provider mode);
    ``measure_cpu``: record the driver's CPU per task; ``manager_cpu``: and the node manager
    process's (``executor.pool.pid``, local mode's node manager).
    """

    executor: str
    options: dict = field(default_factory=dict)
    provider: dict | None = None
    launch_suffix: str = ""
    config: dict = field(default_factory=lambda: {"strategy": "none"})
    managers: int = 0
    measure_cpu: bool = False
    manager_cpu: bool = False


def run_sample(contender: Contender, tasks: int, pings: int, folder: str, timeout: float = 900) -> dict:
    """One sample of ``contender`` in a child process; RuntimeError with its stderr if it fails."""
    spec = {**asdict(contender), "tasks": tasks, "pings": pings, "run_dir": os.path.join(folder, "runinfo")}
    # The parent's own copy of the package first, so the child times the code the script imported.
    package_root = str(Path(scalpel_executor.__file__).resolve().parents[1])
    env = dict(os.environ, SCALPEL_PROFILE_STORE=os.path.join(folder, "profiles.sqlite"),
               PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
    run = subprocess.run([sys.executable, "-m", __spec__.name, json.dumps(spec)],
                         capture_output=True, text=True, timeout=timeout, env=env)
    if run.returncode != 0:
        raise RuntimeError(f"{contender.executor} failed with exit code {run.returncode}:\n{run.stderr[-3000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def run_rounds(contenders: Mapping[str, Contender], rounds: int, tasks: int, pings: int, *, prefix: str,
               on_sample: Callable[[int, str, dict], None] = lambda round_, name, sample: None,
               ) -> dict[str, list[dict]]:
    """``rounds`` samples of every contender, interleaved; ``on_sample(round, name, sample)`` after each.

    Returns each contender's samples in round order. ``prefix`` names the temporary folder of the
    rounds' profile store and run directories.
    """
    samples: dict[str, list[dict]] = {name: [] for name in contenders}
    with tempfile.TemporaryDirectory(prefix=prefix) as folder:
        for round_ in range(rounds):
            for name, contender in contenders.items():
                sample = run_sample(contender, tasks, pings, folder)
                samples[name].append(sample)
                on_sample(round_, name, sample)
    return samples


def medians(samples: Mapping[str, list[dict]], keys: Iterable[str]) -> dict[str, dict[str, float]]:
    """Each contender's median of each of ``keys`` over its samples; a key its samples leave None is left out."""
    return {name: {key: statistics.median(s[key] for s in values) for key in keys if values[0].get(key) is not None}
            for name, values in samples.items()}


def write_samples(path: str | None, arguments, samples: Mapping[str, list[dict]], medians_: Mapping) -> None:
    """``--json PATH``: the command's arguments (an argparse namespace), every sample and the medians."""
    if path:
        with open(path, "w") as handle:
            json.dump({"args": vars(arguments), "samples": samples, "medians": medians_}, handle, indent=1)


def noop():
    return 0


def _executor(spec: dict):
    """The contender's executor, as ``spec`` describes it (see :class:`Contender`)."""
    provider = LocalProvider(**spec["provider"]) if spec["provider"] is not None else None
    if spec["executor"] == "htex":
        return HighThroughputExecutor(label="htex", provider=provider, **spec["options"])
    options = dict(spec["options"])
    if provider is not None:
        options.update(provider=provider, launch_cmd=DEFAULT_LAUNCH_CMD + spec["launch_suffix"])
    return ScalpelExecutor(label="scalpel", **options)


def _wait_for_managers(executor, count: int, timeout: float = 120) -> None:
    """Until ``count`` node managers of the executor's blocks are connected (0: at once)."""
    if count == 0:
        return
    deadline = time.monotonic() + timeout
    while len(executor.connected_managers()) < count:
        if time.monotonic() > deadline:
            sys.exit(f"the blocks' {count} managers did not connect within {timeout:.0f} s")
        time.sleep(0.1)


def _sample(spec: dict) -> dict:
    """The child's whole run: one executor, one DataFlowKernel, the timed phases."""
    executor = _executor(spec)
    app = python_app(noop)  # defined in __main__: Parsl ships it by value, as a user's script function
    tasks, pings = spec["tasks"], spec["pings"]
    with parsl.load(Config(executors=[executor], run_dir=spec["run_dir"], **spec["config"])):
        _wait_for_managers(executor, spec["managers"])
        for _ in range(WARM_UP):
            app().result()
        manager = psutil.Process(executor.pool.pid) if spec["manager_cpu"] else None
        manager_cpu = sum(manager.cpu_times()[:2]) if manager else 0.0
        cpu, start = os.times(), time.perf_counter()
        futures = [app() for _ in range(tasks)]
        for future in futures:
            future.result()
        elapsed, after = time.perf_counter() - start, os.times()
        manager_cpu = sum(manager.cpu_times()[:2]) - manager_cpu if manager else None
        trips = []
        for _ in range(pings):
            began = time.perf_counter()
            app().result()
            trips.append(time.perf_counter() - began)
    trips.sort()
    sample = {"throughput": tasks / elapsed, "round_trip_median": trips[len(trips) // 2],
              "round_trip_p90": trips[int(len(trips) * 0.9)]}
    if spec["measure_cpu"]:
        sample["driver_cpu_per_task_us"] = (after.user + after.system - cpu.user - cpu.system) / tasks * 1e6
        sample["manager_cpu_per_task_us"] = None if manager_cpu is None else manager_cpu / tasks * 1e6
    return sample


if __name__ == "__main__":
    print(json.dumps(_sample(json.loads(sys.argv[1]))))
