"""The streaming mix, live: streams (bound by memory bandwidth, which a footprint does not show)
listed before compute-bound scores, under HTEX and under ScalpelExecutor's first, trained and
learned runs on one store. ``benchmarks/streaming_mix.py`` runs it on two cores, the node check
(:mod:`~scalpel_executor.experiments.node_check`) on a whole node::

    StreamingMix        the workflow's shape: how many streams and scores, each stream's MiB, the
                        passes and spectra that make a task last its seconds alone
    calibrated          a mix whose passes and spectra are timed on this machine
    pair_seconds        stream and score alone, two streams, a stream beside a score, two scores,
                        started together in pinned processes: what each pair costs here
    crowd_seconds       a stream alone, then one stream on every CPU, and a score beside them: what
                        a node's memory bandwidth costs a crowd of streams
    run_workflow        the workflow on a Parsl submitter: streams first, then scores, a reduce
    one_run             one run under a peer: makespan, stream co-run seconds, Scalpel's report,
                        the detached refit waited for
    scalpel_runs        the runs of a repetition on one store: first, ``train`` more, learned

The stores are the caller's (a temporary folder, emptied per repetition): a benchmark never
writes the user's profile store.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.domains import Topology
from scalpel_executor.experiments.live_workflows import (calibrated_rounds, live_run, pinned_seconds, run_line,
                                                         run_record, wait_for_refit)
from scalpel_executor.learning.host_model import pair_cost
from scalpel_executor.workloads import streams

HTEX, SCALPEL = "htex-block", "scalpel:scalpel"
KINDS = ("htex", "first", "learned")  # the runs a summary compares; "train" runs only teach the store
STREAMS = ("normalise",)
SCORE_SAMPLES = 1024  # samples per scored signal: its data stays in a core's own L2


@dataclass(frozen=True)
class StreamingMix:
    """The workflow: ``streams`` normalise tasks of ``stream_mib`` MiB (their two arrays together)
    making ``passes`` passes, then ``scores`` score tasks of ``spectra`` spectra each, a reduce."""

    streams: int = 8
    scores: int = 8
    stream_mib: int = 6
    passes: int = 1
    spectra: int = 1

    def __post_init__(self) -> None:
        for name in ("streams", "scores", "stream_mib", "passes", "spectra"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}")

    def stream(self, seed: int) -> tuple[Callable, tuple]:
        return streams.normalise, (seed, self.stream_mib, self.passes)

    def score(self, seed: int) -> tuple[Callable, tuple]:
        return streams.score, (seed, SCORE_SAMPLES, self.spectra)


def calibrated(mix: StreamingMix, seconds: float) -> StreamingMix:
    """``mix`` with the passes and spectra that make a stream and a score last about ``seconds``
    alone on CPU 0 of this machine."""
    passes = calibrated_rounds(lambda n: pinned_seconds([(0, *replace(mix, passes=n).stream(100))])[0], seconds)
    spectra = calibrated_rounds(lambda n: pinned_seconds([(0, *replace(mix, spectra=n).score(100))])[0], seconds)
    return replace(mix, passes=passes, spectra=spectra)


def pair_seconds(mix: StreamingMix) -> dict:
    """The pairs on CPUs 0 and 1, each started together in pinned processes: a stream alone, a
    score alone, two streams at once, a stream beside a score, and two scores (what two busy cores
    cost each other whatever they run: a clock that drops, vCPUs that share a physical core);
    seconds and slowdowns."""
    stream_alone = pinned_seconds([(0, *mix.stream(100))])[0]
    score_alone = pinned_seconds([(0, *mix.score(100))])[0]
    two_streams = statistics.median(pinned_seconds([(0, *mix.stream(100)), (1, *mix.stream(101))]))
    stream_beside, score_beside = pinned_seconds([(0, *mix.stream(100)), (1, *mix.score(100))])
    two_scores = statistics.median(pinned_seconds([(0, *mix.score(100)), (1, *mix.score(101))]))
    return {"stream_alone": stream_alone, "score_alone": score_alone, "two_streams": two_streams,
            "stream_beside_score": stream_beside, "score_beside_stream": score_beside, "two_scores": two_scores,
            "slowdown": {"stream_beside_stream": two_streams / stream_alone,
                         "stream_beside_score": stream_beside / stream_alone,
                         "score_beside_stream": score_beside / score_alone,
                         "score_beside_score": two_scores / score_alone}}


def crowd_seconds(mix: StreamingMix, cpus: Sequence[int]) -> dict:
    """What a node's memory bandwidth costs a crowd, in pinned processes started together: a
    stream alone on the first CPU, a stream on every CPU of ``cpus`` (the median), a score alone,
    and a score on the first CPU beside a stream on each other one; seconds and slowdowns."""
    if len(cpus) < 2:
        raise ValueError(f"a crowd needs at least two CPUs, got {list(cpus)!r}")
    first, others = cpus[0], list(cpus[1:])
    stream_alone = pinned_seconds([(first, *mix.stream(100))])[0]
    crowd = statistics.median(pinned_seconds([(cpu, *mix.stream(100 + i)) for i, cpu in enumerate(cpus)]))
    score_alone = pinned_seconds([(first, *mix.score(100))])[0]
    beside = pinned_seconds([(first, *mix.score(100))] + [(cpu, *mix.stream(101 + i)) for i, cpu in enumerate(others)])
    return {"cpus": len(cpus), "stream_alone": stream_alone, "streams_together": crowd,
            "score_alone": score_alone, "score_among_streams": beside[0],
            "slowdown": {"streams_together": crowd / stream_alone,
                         "score_among_streams": beside[0] / score_alone}}


def run_workflow(submitter, mix: StreamingMix) -> list[dict]:
    """The workflow on ``submitter``: the streams submitted first, then the scores, then the reduce."""
    normalise, score, collect = (submitter.app(f) for f in (streams.normalise, streams.score, streams.collect))
    normalised = [normalise(*mix.stream(seed)[1]) for seed in range(mix.streams)]
    scored = [score(*mix.score(seed)[1]) for seed in range(mix.scores)]
    collected = collect(*normalised, *scored)
    return [f.result(timeout=1800) for f in normalised + scored + [collected]]


def interference_line(record: dict) -> str:
    """What a Scalpel run planned with: per-key interference or footprints (for how many keys and
    tasks, and why), around which footprint model (ρ, σ and where it came from)."""
    model = record.get("contention_model") or {}
    interference, planned = model.get("interference") or {}, model.get("planned_with") or {}
    return (f"    planned with {interference.get('planned_with')} ({interference.get('keys')} keys, "
            f"{interference.get('tasks')} tasks told) around the {model.get('source')} footprint model "
            f"(ρ {planned.get('capacity_fraction', math.nan):.2f}, σ {planned.get('sensitivity', math.nan):.2f}): "
            f"{interference.get('reason')}")


def one_run(peer: str, kind: str, repeat: int, out: Path, cores: int, topology: Topology, store: str,
            mix: StreamingMix, *, refit_timeout: float, printer: Callable[[str], None] = print) -> dict:
    """One run of the workflow under ``peer``: its makespan, stream co-run seconds, tasks and
    (Scalpel) report; after a Scalpel run, the detached refit it started waited for."""
    out.mkdir(parents=True, exist_ok=True)
    results, report = live_run(peer, cores, topology, str(out / "runinfo"), store,
                               lambda submitter: run_workflow(submitter, mix))
    row = {"peer": peer, "kind": kind, "repeat": repeat, **run_record(results, report, cores, STREAMS, "stream")}
    printer(run_line(kind, row, "stream", "streams together"))
    if report is not None:
        printer(interference_line(row))
        row["refit_wait_seconds"] = wait_for_refit(store, topology, refit_timeout)
        if row["refit_wait_seconds"] is None:
            printer(f"    warning: the host refit had not finished after {refit_timeout:g} s; going on")
    return row


def scalpel_runs(train: int) -> list[tuple[str, str]]:
    """A repetition's Scalpel runs on one store: the first (on an emptied store), ``train`` more,
    then the learned one."""
    return [(SCALPEL, "first"), *[(SCALPEL, "train")] * train, (SCALPEL, "learned")]


def learned_planned_with(runs: Sequence[dict]) -> dict[str, int]:
    """How many learned runs planned with per-key interference, and how many with footprints."""
    counts: dict[str, int] = {}
    for run in runs:
        if run["kind"] == "learned":
            name = str(((run.get("contention_model") or {}).get("interference") or {}).get("planned_with"))
            counts[name] = counts.get(name, 0) + 1
    return counts


def footprint_pair_slowdown(mib: int, llc: int) -> float:
    """What the default contention model, by footprint alone, predicts for two streams of ``mib``
    MiB together: 1.00x while both fit its share of the LLC (ρ = 0.5: 8 MiB each of 32 MiB)."""
    return pair_cost(ContentionModel(), mib << 20, mib << 20, llc)
