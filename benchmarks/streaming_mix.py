"""A streaming workflow under ScalpelExecutor and under HTEX: does the learned per-key interference
model keep apart the pair that hurts each other when the footprint model says it fits?

The workflow (:mod:`scalpel_executor.workloads.streams`), written as a user would, the raw frames
listed first::

    normalised = [normalise(seed, MiB, passes) for seed in range(8)]    streams: a += b over MiB of arrays (6)
    scored     = [score(seed, 1024, repeats) for seed in range(8)]      small FFTs, in a core's own caches
    collect(*normalised, *scored)                                       the reduce

Streams contend for memory bandwidth, which a footprint does not show; a score's data stays in a
core's own L2. A schedule that knows it pairs each stream with a score. Whether a footprint model
already keeps two streams apart depends on their size: the default one (ρ 0.5) predicts 1.33x
for two 12 MiB streams on a 32 MiB LLC. At 8 MiB it predicts 1.00x from the nominal size, but the
probe measures a stream at 8.2-9.4 MiB (its arrays and the interpreter), so once measured two pass ρ·LLC and the
footprint model keeps them apart by itself; at ``--stream-mib 6`` (the default) they fit even as
measured, and only per-key interference can keep them apart (the header line prints the default
model's prediction from the nominal size). Each repetition:

1. **The pairs, measured here**, in plain pinned processes: a stream alone on CPU 0 and a score
   alone; two streams on CPUs 0 and 1; a stream beside a score; two scores. Their slowdowns:
   stream beside stream, stream beside score, score beside stream, and score beside score, what
   two busy cores cost each other whatever they run (on the 2-core VM of docs/results/interference.md,
   quiet: two 8 MiB streams 0.99-1.53x, the other pairs 0.95-1.17x; with other work on it, every
   pair 1.1-2.1x).
2. The runs, on one worker per core, HTEX's before Scalpel's in even repetitions and after them
   in odd ones: HTEX (one pinned worker per core); Scalpel's "first" run on an **emptied** store;
   ``--train`` more Scalpel runs on that store (the user runs the workflow again); then the
   "learned" run on it. Between Scalpel runs the script waits for the detached host refit that
   the run's cleanup started (``learning.host_model``), so each run plans with what the runs
   before it taught (a warning after ``--refit-timeout`` seconds, and on).

Per run it reports the makespan (first task start to last task end), the **stream co-run
seconds** (the summed time two normalise tasks ran at once, from their stamps) beside its floor
on 2 cores (:func:`~scalpel_executor.experiments.live_workflows.corun_floor_seconds`), and for
Scalpel the run report's admission reasons, footprint sources, each task's row, and its
contention model: ``contention_model["interference"]`` says whether the run planned with
per-key interference or with footprints alone, and why.

The stores are this script's own, in a temporary folder, one emptied per repetition.

    python benchmarks/streaming_mix.py --repeats 3 --out docs/data/streaming-mix
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.domains import Topology
from scalpel_executor.core.units import format_size
from scalpel_executor.experiments.harness import fresh_store
from scalpel_executor.experiments.live_workflows import (calibrated_rounds, finish, kind_medians, live_arguments,
                                                         live_machine, live_run, makespan_ratios, pinned_seconds,
                                                         run_line, run_order, run_record, wait_for_refit)
from scalpel_executor.learning.host_model import pair_cost
from scalpel_executor.workloads import streams

HTEX, SCALPEL = "htex-block", "scalpel:scalpel"
KINDS = ("htex", "first", "learned")  # the runs the summary compares; "train" runs only teach the store
STREAMS = ("normalise",)
SCORE_SAMPLES = 1024  # samples per scored signal: its data stays in a core's own L2


def pair_seconds(args, passes: int, repeats: int) -> dict:
    """The pairs, each started together in pinned processes: a stream alone, a score alone, two
    streams at once, a stream beside a score, and two scores (what two busy cores cost each other
    whatever they run: a clock that drops, vCPUs that share a physical core); seconds and slowdowns."""
    def stream(seed: int) -> tuple:
        return streams.normalise, (seed, args.stream_mib, passes)

    score = streams.score, (100, SCORE_SAMPLES, repeats)
    stream_alone = pinned_seconds([(0, *stream(100))])[0]
    score_alone = pinned_seconds([(0, *score)])[0]
    two_streams = statistics.median(pinned_seconds([(0, *stream(100)), (1, *stream(101))]))
    stream_beside, score_beside = pinned_seconds([(0, *stream(100)), (1, *score)])
    two_scores = statistics.median(pinned_seconds([(0, *score), (1, streams.score, (101, SCORE_SAMPLES, repeats))]))
    return {"stream_alone": stream_alone, "score_alone": score_alone, "two_streams": two_streams,
            "stream_beside_score": stream_beside, "score_beside_stream": score_beside, "two_scores": two_scores,
            "slowdown": {"stream_beside_stream": two_streams / stream_alone,
                         "stream_beside_score": stream_beside / stream_alone,
                         "score_beside_stream": score_beside / score_alone,
                         "score_beside_score": two_scores / score_alone}}


def run_workflow(submitter, args, passes: int, repeats: int) -> list[dict]:
    """The workflow on ``submitter``: the streams submitted first, then the scores, then the reduce."""
    normalise, score, collect = (submitter.app(f) for f in (streams.normalise, streams.score, streams.collect))
    normalised = [normalise(seed, args.stream_mib, passes) for seed in range(args.streams)]
    scored = [score(seed, SCORE_SAMPLES, repeats) for seed in range(args.scores)]
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


def one_run(peer: str, kind: str, repeat: int, out: Path, cores: int, topology: Topology, store: str, args,
            passes: int, repeats: int) -> dict:
    """One run of the workflow under ``peer``: its makespan, stream co-run seconds, tasks and (Scalpel) report."""
    results, report = live_run(peer, cores, topology, str(out / "runinfo"), store,
                               lambda submitter: run_workflow(submitter, args, passes, repeats))
    row = {"peer": peer, "kind": kind, "repeat": repeat, **run_record(results, report, cores, STREAMS, "stream")}
    print(run_line(kind, row, "stream", "streams together"), flush=True)
    if report is not None:
        print(interference_line(row), flush=True)
        row["refit_wait_seconds"] = wait_for_refit(store, topology, args.refit_timeout)
        if row["refit_wait_seconds"] is None:
            print(f"    warning: the host refit had not finished after {args.refit_timeout:g} s; going on",
                  flush=True)
    return row


def summarise(runs: list[dict], pairs: list[dict], cores: int, llc: int, llc_note: str, passes: int,
              repeats: int, args) -> dict:
    """The medians per kind of run, HTEX's makespan over Scalpel's, the pairs' slowdowns and how
    many learned runs planned with per-key interference."""
    learned_with = Counter(((r.get("contention_model") or {}).get("interference") or {}).get("planned_with")
                           for r in runs if r["kind"] == "learned")
    return {
        "cores": cores, "llc": llc, "llc_note": llc_note, "stream_mib": args.stream_mib, "passes": passes,
        "footprint_pair_slowdown": footprint_pair_slowdown(args.stream_mib, llc),
        "score_repeats": repeats, "repeats": args.repeats, "train": args.train,
        "makespan": kind_medians(runs, KINDS, "makespan"),
        "stream_corun_seconds": kind_medians(runs, KINDS, "stream_corun_seconds"),
        "corun_floor_seconds": kind_medians(runs, KINDS, "corun_floor_seconds"),
        **makespan_ratios(runs, ("first", "learned")),
        "pair_slowdown_median": {name: statistics.median(p["slowdown"][name] for p in pairs)
                                 for name in pairs[0]["slowdown"]},
        "learned_planned_with": dict(learned_with),
        "learned_per_key": learned_with["per-key interference"],
    }


def footprint_pair_slowdown(mib: int, llc: int) -> float:
    """What the default contention model, by footprint alone, predicts for two streams of ``mib``
    MiB together: 1.00x while both fit its share of the LLC (ρ = 0.5: 8 MiB each of 32 MiB)."""
    return pair_cost(ContentionModel(), mib << 20, mib << 20, llc)


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    live_arguments(parser, repeats=3)
    parser.add_argument("--train", type=int, default=2,
                        help="Scalpel runs on the store between the first run and the learned one")
    parser.add_argument("--streams", type=int, default=8, help="normalise tasks")
    parser.add_argument("--scores", type=int, default=8, help="score tasks")
    parser.add_argument("--stream-mib", type=int, default=6,
                        help="each normalise task's two arrays together, MiB (default 6: two fit the default "
                             "footprint model's share of a 32 MiB LLC even as measured)")
    parser.add_argument("--stream-seconds", type=float, default=1.5,
                        help="a normalise task's run time alone, and a score's")
    parser.add_argument("--passes", type=int, help="passes per normalise task (default: timed for --stream-seconds)")
    parser.add_argument("--score-repeats", type=int,
                        help="spectra per score task (default: timed for --stream-seconds)")
    parser.add_argument("--refit-timeout", type=float, default=120.0,
                        help="seconds to wait for the host refit between Scalpel runs")
    args = parser.parse_args()
    topology, llc_note = live_machine(parser, args.llc)
    cores, llc = len(topology.cpus), topology.llc_size
    passes = args.passes or calibrated_rounds(
        lambda n: pinned_seconds([(0, streams.normalise, (100, args.stream_mib, n))])[0], args.stream_seconds)
    repeats = args.score_repeats or calibrated_rounds(
        lambda n: pinned_seconds([(0, streams.score, (100, SCORE_SAMPLES, n))])[0], args.stream_seconds)
    predicted = footprint_pair_slowdown(args.stream_mib, llc)
    print(f"{cores} cores, LLC {format_size(llc)} ({llc_note}); {args.streams} streams of {args.stream_mib} MiB, "
          f"{passes} passes; {args.scores} scores, {repeats} spectra each; the default footprint model puts two "
          f"streams together at {predicted:.2f}x", flush=True)
    scalpel_runs = [(SCALPEL, "first"), *[(SCALPEL, "train")] * args.train, (SCALPEL, "learned")]
    runs, pairs = [], []
    with tempfile.TemporaryDirectory(prefix="scalpel-streaming-mix-") as folder:
        base = Path(folder)
        for repeat in range(args.repeats):
            pair = {"repeat": repeat, **pair_seconds(args, passes, repeats)}
            pairs.append(pair)
            slowdown = pair["slowdown"]
            print(f"repeat {repeat + 1}: a stream alone {pair['stream_alone']:.2f} s, a score alone "
                  f"{pair['score_alone']:.2f} s; stream beside stream {slowdown['stream_beside_stream']:.2f}x, "
                  f"stream beside score {slowdown['stream_beside_score']:.2f}x, score beside stream "
                  f"{slowdown['score_beside_stream']:.2f}x, score beside score {slowdown['score_beside_score']:.2f}x",
                  flush=True)
            store = fresh_store(base / f"store-{repeat}")  # emptied: the first run's; the later ones read it
            for number, (peer, kind) in enumerate(run_order([(HTEX, "htex")], scalpel_runs, repeat)):
                out = base / f"{repeat}-{number}-{kind}"
                out.mkdir()
                runs.append(one_run(peer, kind, repeat, out, cores, topology, store, args, passes, repeats))
    finish(args, summarise(runs, pairs, cores, llc, llc_note, passes, repeats, args), pairs, runs,
           "streaming-mix.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
