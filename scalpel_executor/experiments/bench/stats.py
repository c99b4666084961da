"""The benchmark's statistics: paired bootstrap intervals and the summary rows. Pure."""

from __future__ import annotations

import math
import random
import statistics
import zlib
from collections.abc import Sequence

from scalpel_executor.core.simulate import lower_bound
from scalpel_executor.experiments.bench.mixes import Mix, MixRun
from scalpel_executor.experiments.plans import REFERENCE


def bootstrap_ratio(reference: Sequence[float], other: Sequence[float], *, resamples: int = 10_000,
                    seed: int = 0, confidence: float = 0.95) -> tuple[float, float, float]:
    """median(reference) / median(other) and a percentile bootstrap interval, resampling the
    repetitions in pairs (both were measured in the same repetition, next to each other).

    ``reference`` and ``other`` are makespans per repetition, same length; > 1 means ``other``
    is faster. Returns (ratio, low, high).

    >>> bootstrap_ratio([2.0, 2.0, 2.0], [1.0, 1.0, 1.0])
    (2.0, 2.0, 2.0)
    """
    if len(reference) != len(other) or not reference:
        raise ValueError(f"need paired, non-empty samples; got {len(reference)} and {len(other)}")
    point = statistics.median(reference) / statistics.median(other)
    rng = random.Random(seed)
    n = len(reference)
    draws = []
    for _ in range(resamples):
        picks = [rng.randrange(n) for _ in range(n)]
        draws.append(statistics.median(reference[i] for i in picks) / statistics.median(other[i] for i in picks))
    draws.sort()
    tail = (1 - confidence) / 2
    return point, draws[int(tail * (resamples - 1))], draws[math.ceil((1 - tail) * (resamples - 1))]


def summarise(runs: Sequence[MixRun], mixes: Sequence[Mix], solo: dict[str, list[float]], cores: int,
              reference: str = REFERENCE, resamples: int = 10_000) -> list[dict]:
    """One row per (mix, peer): see the module docstring. Pure."""
    solo_median = {name: statistics.median(times) for name, times in solo.items() if times}
    rows = []
    for mix in mixes:
        by_peer: dict[str, dict[int, MixRun]] = {}
        for run in runs:
            if run.mix == mix.name:
                by_peer.setdefault(run.peer, {})[run.repeat] = run
        bound = None
        if mix.kind == "kernels" and all(c.name in solo_median for c in mix.cases):
            bound = lower_bound([solo_median[c.name] for c in mix.cases], cores)
        ref_runs = by_peer.get(reference, {})
        for peer, per_repeat in by_peer.items():
            good = {r: run for r, run in per_repeat.items() if run.makespan is not None}
            errors = [run.error for run in per_repeat.values() if run.error]
            row = {"mix": mix.name, "peer": peer, "runs": len(good), "failed": len(errors),
                   "errors": sorted(set(errors))[:3], "makespans": [good[r].makespan for r in sorted(good)]}
            if peer == "oracle" and mix.oracle_method:
                row["oracle_method"] = mix.oracle_method
            if good:
                row["median"] = statistics.median(row["makespans"])
                if mix.kind == "latency":
                    latencies = [x for run in good.values() for x in run.latencies]
                    row["median_latency_ms"] = 1e3 * statistics.median(latencies)
                    row["p99_latency_ms"] = 1e3 * _p99(latencies)
                if mix.kind == "throughput":
                    row["tasks_per_second"] = mix.count / row["median"]
                if bound:
                    row["lower_bound"] = bound
                    row["over_lower_bound"] = row["median"] / bound
                slowdowns = [t["seconds"] / solo_median[t["case"]] for run in good.values() for t in run.tasks
                             if solo_median.get(t["case"])]
                if slowdowns:
                    row["mean_slowdown_vs_solo"] = statistics.fmean(slowdowns)
                paired = sorted(r for r in good if r in ref_runs and ref_runs[r].makespan is not None)
                if paired:
                    ratio, low, high = bootstrap_ratio([ref_runs[r].makespan for r in paired],
                                                       [good[r].makespan for r in paired], resamples=resamples,
                                                       seed=zlib.crc32(f"{mix.name}/{peer}".encode()))
                    row.update(vs_reference=ratio, ci_low=low, ci_high=high, paired_runs=len(paired))
            rows.append(row)
    _gap_captured(rows, reference)
    return rows


def _gap_captured(rows: list[dict], reference: str) -> None:
    """Where a mix has an oracle: the share of the reference-to-oracle gap each peer closes."""
    for mix in {row["mix"] for row in rows}:
        of_mix = {row["peer"]: row for row in rows if row["mix"] == mix and "median" in row}
        if "oracle" not in of_mix or reference not in of_mix:
            continue
        gap = of_mix[reference]["median"] - of_mix["oracle"]["median"]
        for row in of_mix.values():
            row["oracle_gap_s"] = gap
            row["oracle_method"] = of_mix["oracle"].get("oracle_method", "")
            row["gap_captured"] = (of_mix[reference]["median"] - row["median"]) / gap if gap > 0 else None


def _p99(values: Sequence[float]) -> float:
    """The 99th percentile, interpolated between the sample's own values (one value: itself)."""
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[98]


def paired_against(runs: Sequence[dict], reference: str, *, resamples: int = 10_000) -> list[dict]:
    """Every peer against ``reference`` from a bench record's ``runs`` (dicts with ``peer``, ``mix``,
    ``repeat``, ``makespan``): per (mix, peer), the repetitions both finished, median(reference) /
    median(peer) with its paired bootstrap interval (above 1: the peer was faster) and the
    per-repetition ratios. ValueError naming ``reference`` when no run of it is in ``runs``. Pure."""
    times: dict[tuple[str, str], dict[int, float]] = {}
    for run in runs:
        if run.get("makespan") is not None and not run.get("error"):
            times.setdefault((run["mix"], run["peer"]), {})[run["repeat"]] = float(run["makespan"])
    if not any(peer == reference for _, peer in times):
        peers = sorted({peer for _, peer in times})
        raise ValueError(f"no finished run of peer {reference!r} to compare with; the record has: {', '.join(peers)}")
    rows = []
    for (mix, peer), per_repeat in times.items():
        base = times.get((mix, reference))
        if peer == reference or not base:
            continue
        shared = sorted(set(base) & set(per_repeat))
        if not shared:
            continue
        ref, other = [base[r] for r in shared], [per_repeat[r] for r in shared]
        ratio, low, high = bootstrap_ratio(ref, other, resamples=resamples)
        rows.append({"mix": mix, "peer": peer, "runs": len(shared), "ratio": ratio, "ci_low": low, "ci_high": high,
                     "per_repeat": [a / b for a, b in zip(ref, other)]})
    return rows
