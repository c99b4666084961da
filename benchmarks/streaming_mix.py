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
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from scalpel_executor.core.units import format_size
from scalpel_executor.experiments.harness import fresh_store
from scalpel_executor.experiments.live_workflows import finish, kind_medians, live_arguments, live_machine, \
    makespan_ratios, run_order
from scalpel_executor.experiments.streaming_mix import (HTEX, KINDS, StreamingMix, calibrated,
                                                        footprint_pair_slowdown, learned_planned_with, one_run,
                                                        pair_seconds, scalpel_runs)


def summarise(runs: list[dict], pairs: list[dict], cores: int, llc: int, llc_note: str, mix: StreamingMix,
              args) -> dict:
    """The medians per kind of run, HTEX's makespan over Scalpel's, the pairs' slowdowns and how
    many learned runs planned with per-key interference."""
    learned_with = learned_planned_with(runs)
    return {
        "cores": cores, "llc": llc, "llc_note": llc_note, "stream_mib": mix.stream_mib, "passes": mix.passes,
        "footprint_pair_slowdown": footprint_pair_slowdown(mix.stream_mib, llc),
        "score_repeats": mix.spectra, "repeats": args.repeats, "train": args.train,
        "makespan": kind_medians(runs, KINDS, "makespan"),
        "stream_corun_seconds": kind_medians(runs, KINDS, "stream_corun_seconds"),
        "corun_floor_seconds": kind_medians(runs, KINDS, "corun_floor_seconds"),
        **makespan_ratios(runs, ("first", "learned")),
        "pair_slowdown_median": {name: statistics.median(p["slowdown"][name] for p in pairs)
                                 for name in pairs[0]["slowdown"]},
        "learned_planned_with": learned_with,
        "learned_per_key": learned_with.get("per-key interference", 0),
    }


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
    try:
        mix = StreamingMix(args.streams, args.scores, args.stream_mib)
    except ValueError as error:
        parser.error(str(error))
    timed = calibrated(mix, args.stream_seconds) if not (args.passes and args.score_repeats) else mix
    mix = replace(mix, passes=args.passes or timed.passes, spectra=args.score_repeats or timed.spectra)
    predicted = footprint_pair_slowdown(mix.stream_mib, llc)
    print(f"{cores} cores, LLC {format_size(llc)} ({llc_note}); {mix.streams} streams of {mix.stream_mib} MiB, "
          f"{mix.passes} passes; {mix.scores} scores, {mix.spectra} spectra each; the default footprint model puts "
          f"two streams together at {predicted:.2f}x", flush=True)
    runs, pairs = [], []
    with tempfile.TemporaryDirectory(prefix="scalpel-streaming-mix-") as folder:
        base = Path(folder)
        for repeat in range(args.repeats):
            pair = {"repeat": repeat, **pair_seconds(mix)}
            pairs.append(pair)
            slowdown = pair["slowdown"]
            print(f"repeat {repeat + 1}: a stream alone {pair['stream_alone']:.2f} s, a score alone "
                  f"{pair['score_alone']:.2f} s; stream beside stream {slowdown['stream_beside_stream']:.2f}x, "
                  f"stream beside score {slowdown['stream_beside_score']:.2f}x, score beside stream "
                  f"{slowdown['score_beside_stream']:.2f}x, score beside score {slowdown['score_beside_score']:.2f}x",
                  flush=True)
            store = fresh_store(base / f"store-{repeat}")  # emptied: the first run's; the later ones read it
            for number, (peer, kind) in enumerate(run_order([(HTEX, "htex")], scalpel_runs(args.train), repeat)):
                runs.append(one_run(peer, kind, repeat, base / f"{repeat}-{number}-{kind}", cores, topology, store,
                                    mix, refit_timeout=args.refit_timeout,
                                    printer=lambda line: print(line, flush=True)))
    finish(args, summarise(runs, pairs, cores, llc, llc_note, mix, args), pairs, runs, "streaming-mix.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
