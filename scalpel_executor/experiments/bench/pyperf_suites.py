"""The benchmark's runs as pyperf suites, so ``python -m pyperf compare_to`` reads them.

pyperf's ``Runner`` does not drive the runs: it times one benchmark at a time in its own worker
processes, which would put minutes of machine drift between the executors compared. Instead
each repetition becomes a ``pyperf.Run``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyperf

from scalpel_executor.experiments.bench.mixes import MixRun


def write_pyperf(runs: Sequence[MixRun], directory: Path, metadata: dict) -> dict[str, Path]:
    """One pyperf suite per peer (``<peer>.json``): a benchmark per mix, a run per repetition whose
    values are the makespan (or, for noop-latency, every round trip)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for peer in dict.fromkeys(run.peer for run in runs):
        benchmarks = []
        for mix in dict.fromkeys(run.mix for run in runs if run.peer == peer):
            good = [r for r in runs if r.peer == peer and r.mix == mix and r.makespan is not None]
            if not good:
                continue
            pyperf_runs = [
                pyperf.Run(r.latencies if r.latencies else [r.makespan], collect_metadata=False,
                           metadata={"name": mix, "unit": "second", "loops": 1, "peer": peer, "repeat": r.repeat + 1,
                                     **{k: v for k, v in metadata.items() if isinstance(v, (str, int, float))}})
                for r in good]
            benchmarks.append(pyperf.Benchmark(pyperf_runs))
        if benchmarks:
            path = directory / f"{peer.replace(':', '-').replace('+', '-')}.json"
            path.unlink(missing_ok=True)
            pyperf.BenchmarkSuite(benchmarks).dump(str(path), replace=True)
            paths[peer] = path
    return paths
