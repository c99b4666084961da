"""The ``scalpel`` command: inspect the machine, simulate policies, run the demo.

Each sub-command prints what a person needs, or JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
from collections.abc import Sequence

from scalpel_executor.cli.profile import CommandFailed, add_profile_commands
from scalpel_executor.learning.exchange import load_profile, read_json_object, shipped_profiles
from scalpel_executor.core.scheduler import POLICIES
from scalpel_executor.core.simulate import ContentionModel, SimTask, simulate
from scalpel_executor.core.topology import Topology, parse_cpu_list
from scalpel_executor.host.topology import detect_topology
from scalpel_executor.core.units import format_size, parse_size

DEFAULT_PROFILE = "polybench-xeon-e5620"


def _topology_from_args(args: argparse.Namespace) -> Topology:
    if args.spec is not None:
        if not args.spec.strip():
            raise ValueError(f'--spec is empty ({args.spec!r}); describe the machine like --spec "2x4:12MiB" '
                             "(2 domains of 4 cores, 12 MiB LLC each), or leave --spec out to read this machine")
        return Topology.from_spec(args.spec)
    if args.cpus is not None:
        lists = [parse_cpu_list(part) for part in args.cpus.split(";") if part.strip()]
        if not lists:
            raise ValueError(f'--cpus names no CPUs ({args.cpus!r}); give one CPU list per domain like --cpus "0-3;4-7", '
                             "or leave --cpus out to read this machine")
        return Topology.from_cpu_lists(lists, llc_size=args.llc)
    topology = detect_topology(args.sysfs, smt=args.smt)
    return topology


def cmd_topology(args: argparse.Namespace) -> int:
    topology = _topology_from_args(args)
    if args.json:
        print(json.dumps(topology.to_dict(), indent=2))
    else:
        print(topology.describe())
    return 0


def _pick(tasks: list[SimTask], count: int, rng: random.Random) -> list[SimTask]:
    """``count`` tasks in a random submission order: a sample, with repeats only past the pool."""
    if count <= len(tasks):
        return rng.sample(tasks, count)
    return [rng.choice(tasks) for _ in range(count)]


def compare_policies(
    pool: list[SimTask],
    topology: Topology,
    llc_size: float,
    counts: Sequence[int],
    policies: Sequence[str],
    repeats: int,
    seed: int,
    model: ContentionModel,
) -> list[dict]:
    """Simulate each policy on the same random batches; one row per (task count, policy)."""
    domains = [d.cpus for d in topology.domains]
    rows = []
    for count in counts:
        makespans: dict[str, list[float]] = {p: [] for p in policies}
        bounds = []
        for repeat in range(repeats):
            batch = _pick(pool, count, random.Random(seed * 1_000_003 + count * 1009 + repeat))
            for policy in policies:
                result = simulate(batch, domains, llc_size, policy, model=model, seed=seed + repeat)
                makespans[policy].append(result.makespan)
            bounds.append(result.lower_bound)
        reference = makespans.get("fifo")
        for policy in policies:
            row = {
                "tasks": count,
                "policy": policy,
                "repeats": repeats,
                "mean_makespan": statistics.fmean(makespans[policy]),
                "mean_lower_bound": statistics.fmean(bounds),
            }
            if reference:
                row["speedup_vs_fifo"] = statistics.geometric_mean(
                    [f / m for f, m in zip(reference, makespans[policy])]
                )
            rows.append(row)
    return rows


def _print_rows(rows: list[dict]) -> None:
    header = f"{'tasks':>5}  {'policy':<14} {'makespan s':>11} {'lower bound':>12} {'vs fifo':>8}"
    print(header)
    print("-" * len(header))
    for row in rows:
        vs = f"{row['speedup_vs_fifo']:.3f}x" if "speedup_vs_fifo" in row else "-"
        print(
            f"{row['tasks']:>5}  {row['policy']:<14} {row['mean_makespan']:>11.2f} "
            f"{row['mean_lower_bound']:>12.2f} {vs:>8}"
        )


def _parse_counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise SystemExit(f"scalpel: --tasks takes task counts like 8,16,23, got {text!r}") from None
    if not counts or any(c < 1 for c in counts):
        raise SystemExit(f"scalpel: --tasks takes positive task counts like 8,16,23, got {text!r}")
    return counts


def cmd_simulate(args: argparse.Namespace) -> int:
    document, pool = load_profile(args.profile)
    spec = args.machine or document.get("machine", {}).get("spec")
    if not spec:
        raise SystemExit(f"scalpel: profile {args.profile!r} names no machine; pass --machine like 2x4:12MiB")
    topology = Topology.from_spec(spec)
    llc_size = parse_size(args.llc, what="--llc") if args.llc else topology.llc_size
    if not llc_size:
        raise SystemExit(f"scalpel: machine {spec!r} has no LLC size; add one like {spec}:12MiB or pass --llc")
    policies = args.policies.split(",") if args.policies else list(POLICIES)
    for policy in policies:
        if policy not in POLICIES:
            raise SystemExit(f"scalpel: unknown policy {policy!r}; choose from {', '.join(POLICIES)}")
    if "fifo" not in policies:
        policies.append("fifo")
    counts = _parse_counts(args.tasks) if args.tasks else [len(pool)]
    model = ContentionModel(args.capacity_fraction, args.sensitivity)
    if args.model:
        model = _load_model(args.model)
    rows = compare_policies(pool, topology, llc_size, counts, policies, args.repeats, args.seed, model)
    if args.json:
        print(json.dumps({"profile": document.get("name"), "machine": spec, "llc_size": llc_size,
                          "model": vars(model), "rows": rows}, indent=2))
        return 0
    print(f"profile {document.get('name')}: {len(pool)} task kinds; machine {spec} "
          f"({topology.processors} domains, {topology.total_cores} cores, LLC {format_size(llc_size)} each)")
    print(f"contention model: rho={model.capacity_fraction}, sigma={model.sensitivity}; "
          f"{args.repeats} random batches per task count, seed {args.seed}\n")
    _print_rows(rows)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """The main job: the contention-heavy kernel batch under Scalpel and HTEX on this machine."""
    from pathlib import Path

    from scalpel_executor.experiments.demo import print_summary, run_demo

    policies = [p.strip() for p in (args.policies or ("scalpel" if args.quick else "scalpel,fifo")).split(",") if p.strip()]
    for policy in policies:
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r} in --policies; choose from {', '.join(POLICIES)}")
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 3)
    if args.tasks is not None and args.tasks < 2:
        raise ValueError(f"--tasks must be at least 2, got {args.tasks}")
    printer = (lambda text: print(text, file=sys.stderr)) if args.json else print
    try:
        record = run_demo(
            tasks=args.tasks if args.tasks is not None else (4 if args.quick else None),
            scale="quick" if args.quick else "full", repeats=repeats, policies=policies,
            include_htex=not args.no_htex, llc_override=args.llc, out=Path(args.out), seed=args.seed, printer=printer,
        )
    except ImportError as error:
        raise ValueError(f"the demo needs {error.name or error}: pip install matplotlib numpy") from None
    if args.json:
        print(json.dumps(record, indent=1))
    else:
        print_summary(record)
    return 0


SMOKE = {"mixes": "contention,suite-2x,light,noop-throughput,noop-latency",
         "peers": "htex-block,threads,processpool,scalpel:scalpel,oracle"}


def cmd_bench(args: argparse.Namespace) -> int:
    """Workload mixes under Parsl's executors and every Scalpel policy, interleaved and repeated."""
    from pathlib import Path

    from scalpel_executor.experiments.bench import MIXES, PEERS, format_table, markdown_table, parse_list, run_bench

    if args.report:
        for line in _report_lines(args.report, markdown_table if args.markdown else format_table):
            print(line)
        return 0
    default_mixes = [m for m in MIXES if m != "montage"]
    if args.smoke:
        args.mixes = args.mixes or SMOKE["mixes"]
        args.peers = args.peers or SMOKE["peers"]
    mixes = parse_list(args.mixes, MIXES, "--mixes", default_mixes)
    peers = parse_list(args.peers, PEERS, "--peers", PEERS)
    smoke = args.smoke
    model = None
    if args.model:
        model = _load_model(args.model)
    printer = (lambda text: print(text, file=sys.stderr)) if args.json else print
    if "montage" in mixes:
        from scalpel_executor.workloads.montage import MontageUnavailable, require_montage

        try:
            require_montage()
        except MontageUnavailable as error:
            raise ValueError(f"--mixes montage: {error}") from None
    record = run_bench(
        mixes=mixes, peers=peers, repeats=args.repeats if args.repeats is not None else (2 if smoke else 5),
        llc_override=args.llc, out=Path(args.out), scale="quick" if smoke else args.scale, seed=args.seed,
        noop_tasks=args.noop_tasks if args.noop_tasks is not None else (50 if smoke else 2000),
        latency_tasks=args.latency_tasks if args.latency_tasks is not None else (20 if smoke else 200),
        montage_tiles=args.montage_tiles, resamples=200 if smoke else 10_000, printer=printer, model=model,
    )
    if args.json:
        print(json.dumps(record, indent=1))
        return 0
    print()
    for line in format_table(record["summary"]):
        print(line)
    files = record["files"]
    print(f"\nrecord: {files['json']}" + (f"\nplot:   {files['png']}" if "png" in files else ""))
    if files.get("pyperf"):
        peer_files = list(files["pyperf"].values())
        print(f"pyperf: {len(peer_files)} suites in {Path(peer_files[0]).parent}; compare with\n"
              f"  python -m pyperf compare_to {' '.join(peer_files[:2])} --table")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Fit the contention model to measured pairs; predict the bench's mixes with it."""
    from pathlib import Path

    from scalpel_executor.experiments import calibration

    corun = _read_json(args.corun, "co-run document")
    if args.llc:
        llc = parse_size(args.llc, what="--llc")
    else:
        if corun.get("llc_bytes") is None:
            raise ValueError(f"{args.corun} names no LLC size (llc_bytes); pass --llc like 56MiB")
        llc = parse_size(corun["llc_bytes"], what=f"{args.corun}: llc_bytes")
    if not llc:
        raise ValueError("the LLC size must be positive, got 0; pass --llc like 56MiB")
    try:
        fit = calibration.fit_model(calibration.pairs_from_corun(corun), llc)
    except ValueError as error:
        raise ValueError(f"{args.corun}: {error}") from None
    record = {**fit.to_dict(), "corun": args.corun}
    printer = (lambda text: print(text, file=sys.stderr)) if args.json else print
    printer(f"fitted on {fit.pairs} measured pair slowdowns, LLC {format_size(llc)}: rho = "
            f"{fit.model.capacity_fraction:.3f}, sigma = {fit.model.sensitivity:.3f}; rms error "
            f"{fit.rms_error:.3f} (default model rho=0.5, sigma=1: {fit.default_rms_error:.3f})")
    predictions = []
    if args.bench:
        bench = _read_json(args.bench, "bench record")
        try:
            predictions = calibration.predict_bench(bench, fit.model, llc)
        except ValueError as error:
            raise ValueError(f"{args.bench}: {error}") from None
        record["bench"] = args.bench
        record["held_out"] = {**calibration.summary(predictions), "rows": calibration.prediction_rows(predictions)}
        printer(f"\n{'mix':<12} {'peer':<22} {'policy':<14} {'measured s':>10} {'predicted s':>11} {'error':>7}")
        for p in predictions:
            printer(f"{p.mix:<12} {p.peer:<22} {p.policy:<14} {p.measured:>10.3f} {p.predicted:>11.3f} {100 * p.error:>6.1f}%")
        held = record["held_out"]
        if predictions:
            printer(f"held-out mixes: mean |error| {100 * held['mean_abs_error']:.1f}%, max {100 * held['max_abs_error']:.1f}%, "
                    f"{held['within_15_percent']}/{held['predictions']} within 15%")
    if args.out:
        Path(args.out).write_text(json.dumps(record, indent=1))
        printer(f"wrote {args.out}")
    if args.plot:
        _plot_calibration(fit, predictions, args.plot)
        printer(f"wrote {args.plot}")
    if args.json:
        print(json.dumps(record, indent=1))
    return 0


def _read_json(path: str, what: str) -> dict:
    """A JSON object, gzip-compressed when its name ends in .gz; ValueError naming the file otherwise."""
    return read_json_object(path, what)


def _load_model(path: str):
    """The contention model of a calibration file (``--model``); ValueError naming the file."""
    from scalpel_executor.experiments.calibration import load_model

    document = _read_json(path, "calibration")
    try:
        return load_model(document)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None


def _report_lines(path: str, table) -> list[str]:
    """The table of an earlier bench record (``bench --report``), row by row, naming a bad row."""
    record = _read_json(path, "bench record")
    if record.get("format") != "scalpel-bench/1":
        raise ValueError(f"{path} is not a bench record: it needs \"format\": \"scalpel-bench/1\" "
                         "(scalpel bench writes bench.json)")
    rows = record.get("summary")
    if not isinstance(rows, list):
        raise ValueError(f"{path}: \"summary\" must be a list of rows, one per mix and peer, got "
                         + ("nothing" if rows is None else repr(rows)[:80]))
    header = table([])
    lines = list(header)
    for position, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ValueError(f"{path}: summary row #{position} must be a JSON object, got {repr(row)[:80]}")
        try:
            lines.extend(table([row])[len(header):])
        except KeyError as error:
            raise ValueError(f"{path}: summary row #{position} lacks the field {error}") from None
        except (TypeError, ValueError) as error:
            raise ValueError(f"{path}: summary row #{position} has a field of the wrong type ({error})") from None
    return lines


def _plot_calibration(fit, predictions, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (pairs, mixes) = plt.subplots(1, 2, figsize=(11, 4.6), layout="constrained")
    measured = [r[2] for r in fit.residuals]
    modelled = [r[3] for r in fit.residuals]
    pairs.scatter(measured, modelled, s=14)
    low, high = min(measured + modelled + [1.0]) * 0.97, max(measured + modelled) * 1.03
    pairs.plot([low, high], [low, high], color="black", linewidth=0.8)
    pairs.set_xlabel("measured slowdown next to a co-runner")
    pairs.set_ylabel("fitted model")
    pairs.set_title(f"pairs: rho={fit.model.capacity_fraction:.2f}, sigma={fit.model.sensitivity:.2f}, "
                    f"rms {fit.rms_error:.3f}", fontsize=10)
    if predictions:
        xs = [p.measured for p in predictions]
        ys = [p.predicted for p in predictions]
        mixes.scatter(xs, ys, s=14)
        top = max(xs + ys) * 1.05
        mixes.plot([0, top], [0, top], color="black", linewidth=0.8)
        mixes.fill_between([0, top], [0, 0.85 * top], [0, 1.15 * top], color="grey", alpha=0.2, label="within 15%")
        mixes.legend(fontsize=8)
    mixes.set_xlabel("measured median makespan (s)")
    mixes.set_ylabel("simulated with the fitted model (s)")
    mixes.set_title("held-out mixes, every peer and policy", fontsize=10)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scalpel",
        description="Contention-aware co-scheduling of many-task workflows on shared last-level caches.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    topo = commands.add_parser("topology", help="show the last-level-cache domains this process can use")
    topo.add_argument("--spec", help='describe a machine instead, e.g. "2x4:12MiB" (2 domains of 4 cores)')
    topo.add_argument("--cpus", help='explicit CPU lists per domain, ";"-separated, e.g. "0-3;4-7"')
    topo.add_argument("--llc", help="LLC size per domain for --cpus, e.g. 32MiB")
    topo.add_argument("--smt", action="store_true", help="use every hardware thread, not one per core")
    topo.add_argument("--sysfs", default="/sys", help="sysfs root to read (default /sys)")
    topo.add_argument("--json", action="store_true", help="print JSON")
    topo.set_defaults(run=cmd_topology)

    sim = commands.add_parser(
        "simulate",
        help="simulate a profiled batch under every policy",
        description="Simulate random batches drawn from a profile under each scheduling policy "
        "and print mean makespans and speedups over fifo. Shipped profiles: "
        + ", ".join(shipped_profiles()),
    )
    sim.add_argument("--profile", default=DEFAULT_PROFILE, help=f"shipped profile name or JSON file (default {DEFAULT_PROFILE})")
    sim.add_argument("--machine", help='machine spec, e.g. "8x8:32MiB" (default: the profile\'s machine)')
    sim.add_argument("--llc", help="override the LLC size per domain, e.g. 12MiB")
    sim.add_argument("--tasks", help="comma-separated batch sizes, e.g. 8,16,23 (default: every task once)")
    sim.add_argument("--repeats", type=int, default=10, help="random batches per size (default 10)")
    sim.add_argument("--policies", help=f"comma-separated subset of: {', '.join(POLICIES)}")
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--capacity-fraction", type=float, default=0.5, help="rho: usable share of the LLC (default 0.5)")
    sim.add_argument("--sensitivity", type=float, default=1.0, help="sigma: slowdown when every access misses (default 1)")
    sim.add_argument("--model", help="calibration JSON from `scalpel calibrate --out` (sets rho and sigma)")
    sim.add_argument("--json", action="store_true", help="print JSON")
    sim.set_defaults(run=cmd_simulate)

    demo = commands.add_parser(
        "demo", help="the main job: a contention-heavy kernel batch under Scalpel and Parsl's HTEX, compared",
        description="Runs a contention-heavy mix of the kernel suite on this machine (large kernels that fit the "
        "last-level cache alone but not together, submitted before the small ones) under ScalpelExecutor and "
        "under Parsl's HighThroughputExecutor on the same cores, repeated and interleaved; prints a comparison "
        "table and writes a Gantt chart (PNG) and a JSON record. For a simulated comparison on machines you do "
        "not have, see `scalpel simulate`.",
    )
    demo.add_argument("--quick", action="store_true", help="4 short tasks, 1 run each, Scalpel policy only (about a minute)")
    demo.add_argument("--tasks", type=int, help="tasks in the batch (default 4 per core)")
    demo.add_argument("--repeats", type=int, help="runs per executor, interleaved (default 3; 1 with --quick)")
    demo.add_argument("--policies", help=f"Scalpel policies to run, comma-separated, from: {', '.join(POLICIES)} "
                      "(default scalpel,fifo)")
    demo.add_argument("--no-htex", action="store_true", help="leave out Parsl's HighThroughputExecutor")
    demo.add_argument("--llc", help="LLC size per domain to size the batch for, e.g. 32MiB (default: sysfs, "
                      "with a 56 MiB guess inside a VM whose sysfs reports a huge host cache)")
    demo.add_argument("--out", default="scalpel-demo", help="folder for the PNG, JSON, run logs and profile store (default ./scalpel-demo)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--json", action="store_true", help="print the JSON record instead of the table")
    demo.set_defaults(run=cmd_demo)

    bench = commands.add_parser(
        "bench", help="benchmark workload mixes under Parsl's executors and every Scalpel policy",
        description="Runs workload mixes (contention-heavy kernels, the kernel suite at 2x/4x/8x the cores, "
        "small kernels only, no-op throughput and latency, optionally Montage) under Parsl's "
        "HighThroughputExecutor (cpu_affinity block and none), Parsl's ThreadPoolExecutor, "
        "concurrent.futures.ProcessPoolExecutor, ScalpelExecutor with each policy, and an oracle order for "
        "the contention mix; peers interleaved in every repetition. Reports median makespans, the ratio to "
        "htex-block with a paired bootstrap 95%% interval, the ratio to the lower bound and the share of the "
        "HTEX-to-oracle gap; writes <out>/bench.json, <out>/bench.png and pyperf suites <out>/pyperf/<peer>.json "
        "(python -m pyperf compare_to works on them). The full default run takes about half an hour.",
    )
    bench.add_argument("--mixes", help="comma-separated, from: contention, suite-2x, suite-4x, suite-8x, light, "
                       "noop-throughput, noop-latency, montage (default: all but montage)")
    bench.add_argument("--peers", help="comma-separated, from: htex-block, htex-none, threads, processpool, "
                       "scalpel:<policy> (scalpel:* for all), oracle (default: all)")
    bench.add_argument("--repeats", type=int, help="repetitions, peers interleaved in each (default 5; 2 with --smoke)")
    bench.add_argument("--llc", help="LLC size per domain to size the mixes for, e.g. 64MiB (default: sysfs, with a "
                       "56 MiB guess inside a VM whose sysfs reports a huge host cache)")
    bench.add_argument("--scale", default="bench", choices=("quick", "bench", "full"),
                       help="solo run times of kernel cases: 0.05-0.5 s, 0.4-2 s (default) or 1-10 s")
    bench.add_argument("--noop-tasks", type=int, help="tasks of noop-throughput (default 2000)")
    bench.add_argument("--latency-tasks", type=int, help="round trips of noop-latency (default 200)")
    bench.add_argument("--montage-tiles", type=int, default=16, help="tiles of the montage mix (default 16)")
    bench.add_argument("--model", help="calibration JSON (scalpel calibrate --out) for the oracle's search "
                       "(default: the contention model's defaults)")
    bench.add_argument("--out", default="scalpel-bench", help="output folder (default ./scalpel-bench)")
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("--smoke", action="store_true", help="a one-minute check that the harness works: small "
                       "mixes, five peers, 2 repetitions; its figures mean nothing")
    bench.add_argument("--json", action="store_true", help="print the JSON record instead of the table")
    bench.add_argument("--report", metavar="BENCH_JSON", help="run nothing: print the table of an earlier run's bench.json")
    bench.add_argument("--markdown", action="store_true", help="with --report: as a Markdown table")
    bench.set_defaults(run=cmd_bench)

    cal = commands.add_parser(
        "calibrate", help="fit the simulator's contention model to measured co-runs; check it on bench mixes",
        description="Fits rho and sigma of the contention model to the pairwise slowdowns of a co-run document "
        "(python benchmarks/corun.py --out corun.json), then, with --bench, simulates every kernel mix of a "
        "`scalpel bench` record with the fitted model and reports the error against the measured makespans "
        "(those mixes are held out of the fit). The --out file feeds `scalpel simulate --model`.",
    )
    cal.add_argument("corun", help="co-run JSON written by benchmarks/corun.py --out")
    cal.add_argument("--bench", help="bench.json written by scalpel bench, to predict")
    cal.add_argument("--llc", help="LLC size the model assumes, e.g. 56MiB (default: the co-run document's)")
    cal.add_argument("--out", help="write the fit (and the predictions) to this JSON file")
    cal.add_argument("--plot", help="write a PNG: measured against modelled pairs, and mixes")
    cal.add_argument("--json", action="store_true", help="print the JSON record")
    cal.set_defaults(run=cmd_calibrate)

    add_profile_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "repeats", 1) is not None and getattr(args, "repeats", 1) < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    try:
        return args.run(args)
    except CommandFailed as error:  # the command ran, and what it ran failed (exit 1)
        print(f"scalpel: {error}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # e.g. `scalpel profile list | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (ValueError, OSError) as error:  # bad input, a file that cannot be read or written (exit 2)
        print(f"scalpel: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
