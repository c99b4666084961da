"""``scalpel bench``: benchmark workload mixes under Parsl's executors and every Scalpel policy

Runs workload mixes (contention-heavy kernels, the kernel suite at 2x/4x/8x the cores, small kernels
only, a workflow DAG of kernels with a bash step and a reduce, BLAS kernels asking for two cores
among one-core ones (mixed-cores; the cores hint goes to Scalpel only), no-op throughput and
latency, optionally Montage) under Parsl's HighThroughputExecutor (cpu_affinity block and none),
Parsl's ThreadPoolExecutor, concurrent.futures.ProcessPoolExecutor, ScalpelExecutor with each
policy, and an oracle order for the contention mix; peers interleaved in every repetition. Reports
median makespans, the ratio to htex-block with a paired bootstrap 95% interval, the ratio to the
lower bound and the share of the HTEX-to-oracle gap; writes <out>/bench.json, <out>/bench.png and
pyperf suites <out>/pyperf/<peer>.json (python -m pyperf compare_to works on them). The full default
run takes about half an hour.

With ``--report``, nothing runs: an earlier run's table is printed from its bench.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from scalpel_executor.cli.common import add_command_parser, at_least, comma_list, load_model_file, status_printer
from scalpel_executor.core.scheduler import POLICIES
from scalpel_executor.experiments.bench.report import summary_table
from scalpel_executor.experiments.plans import BENCH, BENCH_SMOKE, MIXES, PEERS, SCALES, SCALPEL_POLICIES, with_given
from scalpel_executor.learning.exchange import read_json_object

#: ``--peers scalpel:*`` stands for every benchmarked Scalpel policy.
_EVERY_POLICY = {"scalpel:*": [f"scalpel:{p}" for p in SCALPEL_POLICIES]}


def add_command(commands: argparse._SubParsersAction) -> None:
    parser = add_command_parser(commands, "bench", __doc__, run)
    parser.add_argument("--mixes", help=f"comma-separated, from: {', '.join(MIXES)} (default: all but montage)")
    parser.add_argument("--peers", help=f"comma-separated, from: {', '.join(PEERS)}; scalpel:* for every "
                        "Scalpel policy (default: all)")
    parser.add_argument("--repeats", type=at_least(1), help=f"repetitions, peers interleaved in each (default "
                        f"{BENCH.repeats}; {BENCH_SMOKE.repeats} with --smoke)")
    parser.add_argument("--llc", help="LLC size per domain to size the mixes for, e.g. 64MiB (default: sysfs, with a "
                        "56 MiB guess inside a VM whose sysfs reports a huge host cache)")
    parser.add_argument("--scale", choices=SCALES, help="solo run times of kernel cases: 0.05-0.5 s, 0.4-2 s or "
                        f"1-10 s (default {BENCH.scale}; {BENCH_SMOKE.scale} with --smoke)")
    parser.add_argument("--noop-tasks", type=at_least(1), help=f"tasks of noop-throughput (default "
                        f"{BENCH.noop_tasks}; {BENCH_SMOKE.noop_tasks} with --smoke)")
    parser.add_argument("--latency-tasks", type=at_least(1), help=f"round trips of noop-latency (default "
                        f"{BENCH.latency_tasks}; {BENCH_SMOKE.latency_tasks} with --smoke)")
    parser.add_argument("--montage-tiles", type=at_least(2),
                        help=f"tiles of the montage mix (default {BENCH.montage_tiles})")
    parser.add_argument("--model", help="calibration JSON (scalpel calibrate --out) for the oracle's search "
                        "and the scalpel policy's plans (default: the contention model's defaults)")
    parser.add_argument("--out", default="scalpel-bench", help="output folder (default ./%(default)s)")
    parser.add_argument("--seed", type=int, help=f"seeds the mixes (default {BENCH.seed})")
    parser.add_argument("--fresh-solo", action="store_true",
                        help="run every distinct kernel case alone again, and time its steps again, instead of "
                        "reusing what earlier runs measured on this machine (kept in the profile store's file, "
                        "$SCALPEL_PROFILE_STORE or the default one)")
    parser.add_argument("--smoke", action="store_true", help="a one-minute check that the harness works: "
                        f"{len(BENCH_SMOKE.mixes)} small mixes, {len(BENCH_SMOKE.peers)} peers, "
                        f"{BENCH_SMOKE.repeats} repetitions; its figures mean nothing")
    parser.add_argument("--json", action="store_true", help="print the JSON record instead of the table")
    parser.add_argument("--report", metavar="BENCH_JSON",
                        help="run nothing: print the table of an earlier run's bench.json")
    parser.add_argument("--markdown", action="store_true", help="with --report: as a Markdown table")
    parser.add_argument("--against", metavar="PEER",
                        help="with --report: every peer against PEER instead of htex-block, paired per "
                             "repetition (e.g. scalpel:longest_first)")


def run(args: argparse.Namespace) -> int:
    if args.against and not args.report:
        raise ValueError("--against compares the peers of an earlier run: give its bench.json with --report")
    if args.report:
        for line in report_lines(args.report, markdown=args.markdown, against=args.against):
            print(line)
        return 0
    plan = with_given(BENCH_SMOKE if args.smoke else BENCH, repeats=args.repeats, scale=args.scale,
                      noop_tasks=args.noop_tasks, latency_tasks=args.latency_tasks,
                      montage_tiles=args.montage_tiles, seed=args.seed,
                      mixes=tuple(comma_list(args.mixes, MIXES, option="--mixes", noun="mix")) if args.mixes else None,
                      peers=tuple(_peers(args.peers)) if args.peers else None)
    model = load_model_file(args.model) if args.model else None
    # Parsl, numpy, matplotlib and pyperf load only once a benchmark runs, not for `scalpel --help`.
    from scalpel_executor.experiments.bench.run import run_bench
    from scalpel_executor.workloads.montage import MontageUnavailable

    try:
        record = run_bench(plan, out=Path(args.out), llc_override=args.llc, model=model,
                           printer=status_printer(args.json), fresh_solo=args.fresh_solo)
    except MontageUnavailable as error:
        raise ValueError(f"--mixes montage: {error}") from None
    if args.json:
        print(json.dumps(record, indent=1))
        return 0
    print()
    for line in summary_table(record["summary"]):
        print(line)
    print()
    for sentence in record.get("verdicts", []):
        print(sentence)
    files = record["files"]
    print(f"\nrecord: {files['json']}" + (f"\nplot:   {files['png']}" if "png" in files else ""))
    if files.get("pyperf"):
        peer_files = list(files["pyperf"].values())
        print(f"pyperf: {len(peer_files)} suites in {Path(peer_files[0]).parent}; compare with\n"
              f"  python -m pyperf compare_to {' '.join(peer_files[:2])} --table")
    return 0


def _peers(text: str) -> list[str]:
    for part in (p.strip() for p in text.split(",")):
        if part.startswith("scalpel:") and part not in PEERS and part[len("scalpel:"):] in POLICIES:
            raise ValueError(f"policy {part[len('scalpel:'):]!r} is not benchmarked; benchmarked policies: "
                             f"{', '.join(SCALPEL_POLICIES)}")
    return comma_list(text, PEERS, option="--peers", noun="peer", expand=_EVERY_POLICY)


def report_lines(path: str, *, markdown: bool = False, against: str | None = None) -> list[str]:
    """The table of an earlier bench record (``bench --report``); ValueError naming the file and a bad row.

    With ``against``, every peer paired per repetition with that peer instead."""
    record = read_json_object(path, "bench record")
    if record.get("format") != "scalpel-bench/1":
        raise ValueError(f"{path} is not a bench record: it needs \"format\": \"scalpel-bench/1\" "
                         "(scalpel bench writes bench.json)")
    if against is not None:
        from scalpel_executor.experiments.bench.report import paired_table
        from scalpel_executor.experiments.bench.stats import paired_against
        from scalpel_executor.experiments.bench.verdict import bench_verdicts

        runs = record.get("runs")
        if not isinstance(runs, list) or not all(isinstance(r, dict) and {"mix", "peer", "repeat"} <= r.keys()
                                                 for r in runs):
            raise ValueError(f"{path}: \"runs\" must be a list of runs with mix, peer, repeat and makespan")
        try:
            paired = paired_against(runs, against)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None
        rows = [{**row, "vs_reference": row["ratio"], "paired_runs": row["runs"]} for row in paired]
        return paired_table(paired, against, markdown=markdown) + [""] + bench_verdicts(
            rows, _machine_words(record), runs, against)
    rows = record.get("summary")
    if not isinstance(rows, list):
        raise ValueError(f"{path}: \"summary\" must be a list of rows, one per mix and peer, got "
                         + ("nothing" if rows is None else repr(rows)[:80]))
    try:
        table = summary_table(rows, markdown=markdown)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    verdicts = record.get("verdicts")
    return table + ([""] + [str(v) for v in verdicts] if isinstance(verdicts, list) and verdicts else [])


def _machine_words(record: dict) -> str:
    """The machine a bench record was measured on, as a verdict names it (older records: from its
    cores, domains and LLC)."""
    machine = record.get("machine") if isinstance(record.get("machine"), dict) else {}
    if isinstance(machine.get("words"), str):
        return machine["words"]
    from scalpel_executor.experiments.bench.verdict import machine_words  # numpy loads only when a report asks

    try:
        return machine_words(int(machine["cores"]), len(machine["domains"]), float(machine["llc"]), None)
    except (KeyError, TypeError, ValueError):
        return "machine not recorded"
