"""``scalpel simulate``: random batches of a profile under every scheduling policy, in the simulator."""

from __future__ import annotations

import argparse
import json

from scalpel_executor.cli.common import at_least, comma_list, load_model_file
from scalpel_executor.core.scheduler import POLICIES
from scalpel_executor.core.simulate import ContentionModel
from scalpel_executor.core.topology import Topology
from scalpel_executor.core.units import format_size, parse_size
from scalpel_executor.experiments.simulated_policies import compare_policies
from scalpel_executor.experiments.tables import format_table
from scalpel_executor.learning.exchange import load_profile, shipped_profiles

DEFAULT_PROFILE = "polybench-xeon-e5620"


def add_command(commands: argparse._SubParsersAction) -> None:
    model = ContentionModel()
    parser = commands.add_parser(
        "simulate",
        help="simulate a profiled batch under every policy",
        description="Simulate random batches drawn from a profile under each scheduling policy "
        "and print mean makespans and speedups over fifo. Shipped profiles: " + ", ".join(shipped_profiles()),
    )
    parser.add_argument("--profile", default=DEFAULT_PROFILE,
                        help="shipped profile name or JSON file (default %(default)s)")
    parser.add_argument("--machine", help='machine spec, e.g. "8x8:32MiB" (default: the profile\'s machine)')
    parser.add_argument("--llc", help="override the LLC size per domain, e.g. 12MiB")
    parser.add_argument("--tasks", help="comma-separated batch sizes, e.g. 8,16,23 (default: every task once)")
    parser.add_argument("--repeats", type=at_least(1), default=10, help="random batches per size (default %(default)s)")
    parser.add_argument("--policies", help=f"comma-separated subset of: {', '.join(POLICIES)} (default: all; "
                        "fifo is always added, as the reference)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the batches (default %(default)s)")
    parser.add_argument("--capacity-fraction", type=float, default=model.capacity_fraction,
                        help="rho: usable share of the LLC (default %(default)s)")
    parser.add_argument("--sensitivity", type=float, default=model.sensitivity,
                        help="sigma: slowdown when every access misses (default %(default)s)")
    parser.add_argument("--model", help="calibration JSON from `scalpel calibrate --out` (sets rho and sigma)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    document, pool = load_profile(args.profile)
    spec = args.machine or document.get("machine", {}).get("spec")
    if not spec:
        raise ValueError(f"profile {args.profile!r} names no machine; pass --machine like 2x4:12MiB")
    topology = Topology.from_spec(spec)
    llc_size = parse_size(args.llc, what="--llc") if args.llc else topology.llc_size
    if not llc_size:
        raise ValueError(f"machine {spec!r} has no LLC size; add one like {spec}:12MiB or pass --llc")
    policies = comma_list(args.policies, POLICIES, option="--policies", noun="policy") if args.policies \
        else list(POLICIES)
    if "fifo" not in policies:
        policies.append("fifo")
    counts = _parse_counts(args.tasks) if args.tasks else [len(pool)]
    model = load_model_file(args.model) if args.model else ContentionModel(args.capacity_fraction, args.sensitivity)
    rows = compare_policies(pool, topology, llc_size, counts, policies, args.repeats, args.seed, model)
    if args.json:
        print(json.dumps({"profile": document.get("name"), "machine": spec, "llc_size": llc_size,
                          "model": vars(model), "rows": rows}, indent=2))
        return 0
    print(f"profile {document.get('name')}: {len(pool)} task kinds; machine {spec} "
          f"({topology.processors} domains, {topology.total_cores} cores, LLC {format_size(llc_size)} each)")
    print(f"contention model: rho={model.capacity_fraction}, sigma={model.sensitivity}; "
          f"{args.repeats} random batches per task count, seed {args.seed}\n")
    cells = [[row["tasks"], row["policy"], f"{row['mean_makespan']:.2f}", f"{row['mean_lower_bound']:.2f}",
              f"{row['speedup_vs_fifo']:.3f}x" if "speedup_vs_fifo" in row else "-"] for row in rows]
    for line in format_table(["tasks", "policy", "makespan s", "lower bound", "vs fifo"], cells, right=[0, 2, 3, 4]):
        print(line)
    return 0


def _parse_counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--tasks takes task counts like 8,16,23, got {text!r}") from None
    if not counts or any(c < 1 for c in counts):
        raise ValueError(f"--tasks takes positive task counts like 8,16,23, got {text!r}")
    return counts
