"""HTEX on the cores ``examples/parsl_perf.py`` gives ScalpelExecutor, for ``parsl-perf``::

    python -m parsl.benchmark.perf --config examples/parsl_perf_htex.py --time 15

One LocalProvider block on this host, one worker per core this process may use, each pinned to
its core (``cpu_affinity="block"``), as ScalpelExecutor pins its workers.
"""

import os

from parsl.config import Config
from parsl.executors import HighThroughputExecutor
from parsl.providers import LocalProvider


def fresh_config() -> Config:
    cores = len(os.sched_getaffinity(0))
    return Config(executors=[HighThroughputExecutor(
        label="htex", max_workers_per_node=cores, cpu_affinity="block",
        provider=LocalProvider(init_blocks=1, min_blocks=1, max_blocks=1))])
