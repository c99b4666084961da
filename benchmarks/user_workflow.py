"""A scientist's own DAG workflow under ScalpelExecutor and under HTEX: makespan, and the mechanism.

The workflow (:mod:`scalpel_executor.workloads.lookups`), written as a user would::

    lookups  = [lookup(seed, MiB, rounds) for seed in range(8)]      large: random gathers over a table
    spectra  = [spectrum(2**15, seed, r) for seed in range(16)]      small FFTs
    refined  = [refine(lookup_result, ...) for each lookup]          follow-ups fed by the lookups' dicts
    products = [product(n, seed, r) for seed in range(4)]            matrix products (3 n^2 doubles)
    lines    = [bash summary_line(refined[i], outputs=[File]) ...]   two shell steps
    reduce_summaries(inputs=[line.outputs[0] ...])                   the reduce

Each repetition:

1. **The pair, measured here**: one lookup alone on CPU 0, then two at once on CPUs 0 and 1, in
   plain pinned processes: how much two large tasks slow each other on this host this minute.
2. Three runs, HTEX first in even repetitions and last in odd ones (interleaved): HTEX (one pinned
   worker per core, single-threaded BLAS); Scalpel's default on an **empty** profile store (the
   "first run"); Scalpel again on the store that first run wrote (the "learned" run). Each loads
   its executor, warms every worker, runs the workflow and reads every task's own start and end.

The stores are this script's own, in a temporary folder, one emptied per repetition, so every
repetition has a first run. Per run it reports the makespan (first task start to last task end)
and the **large co-run seconds**: the summed time during which two large tasks (lookups,
products) ran at once, from the tasks' timestamps, beside its **floor** on 2 cores (the least any
schedule of the same task durations could have without idling a core while work waits:
:func:`~scalpel_executor.experiments.live_workflows.corun_floor_seconds`); for Scalpel, why each
task started where it did (the run report's admission reasons, and each task's row).

    python benchmarks/user_workflow.py --repeats 5 --out docs/data/user-workflow
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from scalpel_executor.core.domains import Topology
from scalpel_executor.core.units import format_size
from scalpel_executor.experiments.harness import fresh_store
from scalpel_executor.experiments.live_workflows import (calibrated_rounds, finish, kind_medians, live_arguments,
                                                         live_machine, live_run, makespan_ratios, pinned_seconds,
                                                         run_line, run_order, run_record)
from scalpel_executor.experiments.records import scratch_folder
from scalpel_executor.workloads import lookups as apps

HTEX, SCALPEL = "htex-block", "scalpel:scalpel"
RUNS = ((HTEX, "htex"), (SCALPEL, "first"), (SCALPEL, "learned"))  # (peer, what the run is)
LARGE = ("lookup", "product")


def lookup_times(cpus: list[int], mib: int, rounds: int) -> list[float]:
    """Wall seconds of one lookup per CPU in ``cpus``, all started together in pinned processes."""
    return pinned_seconds([(cpu, apps.lookup, (100 + i, mib, rounds)) for i, cpu in enumerate(cpus)])


def rounds_for(mib: int, seconds: float) -> int:
    """Gather rounds that make a lookup last about ``seconds`` alone here."""
    return calibrated_rounds(lambda rounds: lookup_times([0], mib, rounds)[0], seconds)


def run_workflow(submitter, out: Path, args, rounds: int) -> tuple[list[dict], float]:
    from parsl.data_provider.files import File

    lookup, spectrum, refine, product, reduce_summaries = (
        submitter.app(f) for f in (apps.lookup, apps.spectrum, apps.refine, apps.product, apps.reduce_summaries))
    summary_line = submitter.bash_app(apps.summary_line)
    started = time.time()
    looked = [lookup(seed, args.lookup_mib, rounds) for seed in range(8)]
    spectra = [spectrum(1 << 15, seed, 2500) for seed in range(16)]  # about 0.5 s each here
    refined = [refine(result, 1 << 17, 400) for result in looked]  # about 0.3 s
    products = [product(args.product_n, seed, 8) for seed in range(4)]  # about 0.7 s, 33 MiB
    lines = [summary_line(refined[i], outputs=[File(str(out / f"line-{i}.txt"))]) for i in range(2)]
    reduced = reduce_summaries(inputs=[line.outputs[0] for line in lines])
    results = [f.result(timeout=1800) for f in looked + spectra + refined + products + [reduced]]
    for line in lines:
        line.result(timeout=60)
    return results, started


def one_run(peer: str, kind: str, repeat: int, out: Path, cores: int, topology: Topology, store: str, args,
            rounds: int) -> dict:
    """One run of the workflow under ``peer``: its makespan, large co-run seconds, tasks and (Scalpel) report."""
    results, report = live_run(peer, cores, topology, str(out / "runinfo"), store,
                               lambda submitter: run_workflow(submitter, out, args, rounds)[0])
    row = {"peer": peer, "kind": kind, "repeat": repeat, **run_record(results, report, cores, LARGE, "large")}
    print(run_line(kind, row, "large", "large tasks together"), flush=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    live_arguments(parser, repeats=5)
    parser.add_argument("--lookup-mib", type=int, default=40, help="each lookup's table, MiB")
    parser.add_argument("--lookup-seconds", type=float, default=1.5, help="a lookup's run time alone")
    parser.add_argument("--rounds", type=int, help="gather rounds per lookup (default: timed for --lookup-seconds)")
    parser.add_argument("--product-n", type=int, default=1200, help="matrix order of the products")
    args = parser.parse_args()
    topology, llc_note = live_machine(parser, args.llc)
    cores, llc = len(topology.cpus), topology.llc_size
    rounds = args.rounds or rounds_for(args.lookup_mib, args.lookup_seconds)
    print(f"{cores} cores, LLC {format_size(llc)} ({llc_note}); lookups of {args.lookup_mib} MiB, {rounds} rounds",
          flush=True)
    runs, pairs = [], []
    with scratch_folder("scalpel-user-workflow-") as folder:
        base = Path(folder)
        for repeat in range(args.repeats):
            alone = lookup_times([0], args.lookup_mib, rounds)[0]
            together = statistics.median(lookup_times([0, 1], args.lookup_mib, rounds))
            pairs.append({"repeat": repeat, "alone": alone, "together": together, "slowdown": together / alone})
            print(f"repeat {repeat + 1}: a lookup alone {alone:.2f} s, two together {together:.2f} s "
                  f"({together / alone:.2f}x)", flush=True)
            store = fresh_store(base / f"store-{repeat}")  # the first run's is empty; the learned run reads it
            for peer, kind in run_order(RUNS[:1], RUNS[1:], repeat):
                out = base / f"{kind}-{repeat}"
                out.mkdir()
                runs.append(one_run(peer, kind, repeat, out, cores, topology, store, args, rounds))
    kinds = [kind for _, kind in RUNS]
    corun = kind_medians(runs, kinds, "large_corun_seconds")
    summary = {
        "cores": cores, "llc": llc, "llc_note": llc_note, "lookup_mib": args.lookup_mib, "rounds": rounds,
        "repeats": args.repeats,
        "pair_slowdown_median": statistics.median(p["slowdown"] for p in pairs),
        "large_corun_seconds": corun,
        "large_corun_vs_htex": {kind: corun[kind] / corun["htex"] if corun["htex"] else None
                                for kind in ("first", "learned")},
        "corun_floor_seconds": kind_medians(runs, kinds, "corun_floor_seconds"),
        **makespan_ratios(runs, ("first", "learned")),
    }
    finish(args, summary, pairs, runs, "user-workflow.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
