"""A config for Parsl's own throughput tool, ``parsl-perf``, with one ScalpelExecutor (local mode)::

    python -m parsl.benchmark.perf --config examples/parsl_perf.py --time 15

One pinned worker per core of this machine behind a node manager, as ``ScalpelExecutor()`` runs by
default. ``examples/parsl_perf_htex.py`` is HTEX on the same cores, for the figure beside it
(docs/results/throughput.md, "parsl-perf"). parsl-perf loads this file and calls ``fresh_config()``.

The profile store is off: a throughput run of no-op tasks has nothing to teach the store of
measured footprints and run times that your workflows learn from (``profiles=False``).
"""

from parsl.config import Config

from scalpel_executor import ScalpelExecutor


def fresh_config() -> Config:
    return Config(executors=[ScalpelExecutor(label="scalpel", profiles=False)])
