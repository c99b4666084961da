"""``scalpel simulate``: random batches of a profile under every scheduling policy, in the simulator.

The machine is a preset (``--machine epyc``, :mod:`scalpel_executor.core.machines`: a topology
and a contention model), a spec (``--machine 8x8:32MiB``) or, by default, the profile's machine.
Explicit options override a preset's pieces: ``--spec`` its topology, ``--llc`` its LLC size,
``--model`` its contention model, ``--capacity-fraction`` and ``--sensitivity`` ρ and σ.
"""

from __future__ import annotations

import argparse
import json
import textwrap

from scalpel_executor.cli.common import at_least, comma_list, load_model_file
from scalpel_executor.core.machines import MACHINES, Machine
from scalpel_executor.core.scheduler import POLICIES
from scalpel_executor.core.simulate import ContentionModel
from scalpel_executor.core.domains import Topology
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
        description=textwrap.fill(
            "Simulate random batches drawn from a profile under each scheduling policy and print mean makespans "
            "and speedups over fifo. Shipped profiles: " + ", ".join(shipped_profiles())),
        epilog=_presets_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,  # keeps the epilog's one entry per preset
    )
    parser.add_argument("--profile", default=DEFAULT_PROFILE,
                        help="shipped profile name or JSON file (default %(default)s)")
    parser.add_argument("--machine", metavar="NAME|SPEC",
                        help="a preset machine (its topology and contention model, listed below) or a machine "
                        "spec like 8x8:32MiB (default: the profile's machine)")
    parser.add_argument("--spec", help="machine spec overriding the preset's topology, e.g. 2x8:150MiB")
    parser.add_argument("--llc", help="override the LLC size per domain, e.g. 12MiB")
    parser.add_argument("--tasks", help="comma-separated batch sizes, e.g. 8,16,23 (default: every task once)")
    parser.add_argument("--repeats", type=at_least(1), default=10, help="random batches per size (default %(default)s)")
    parser.add_argument("--policies", help=f"comma-separated subset of: {', '.join(POLICIES)} (default: all; "
                        "fifo is always added, as the reference)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the batches (default %(default)s)")
    # No argparse defaults for rho and sigma: None means "not given", so a preset's value stands.
    parser.add_argument("--capacity-fraction", type=float,
                        help=f"rho: usable share of the LLC (default: the preset's, else {model.capacity_fraction})")
    parser.add_argument("--sensitivity", type=float,
                        help=f"sigma: slowdown when every access misses (default: the preset's, else "
                        f"{model.sensitivity})")
    parser.add_argument("--model", help="calibration JSON from `scalpel calibrate --out` (sets rho and sigma, "
                        "replacing the preset's; --capacity-fraction and --sensitivity override it in turn)")
    parser.add_argument("--memory", help="the node's memory budget for tasks' declared memory, e.g. 24GiB "
                                         "(default: not counted)")
    parser.add_argument("--gpus", type=at_least(0), default=0,
                        help="accelerators on the node, for tasks that ask for gpus (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    document, pool = load_profile(args.profile)
    preset = _preset(args.machine)
    spec = args.spec or (preset.spec if preset else args.machine) or document.get("machine", {}).get("spec")
    if not spec:
        raise ValueError(f"profile {args.profile!r} names no machine; pass --machine like xeon16 or 2x4:12MiB")
    topology = Topology.from_spec(spec)
    llc_size = parse_size(args.llc, what="--llc") if args.llc else topology.llc_size
    if not llc_size:
        raise ValueError(f"machine {spec!r} has no LLC size; add one like {spec}:12MiB or pass --llc")
    policies = comma_list(args.policies, POLICIES, option="--policies", noun="policy") if args.policies \
        else list(POLICIES)
    if "fifo" not in policies:
        policies.append("fifo")
    counts = _parse_counts(args.tasks) if args.tasks else [len(pool)]
    model = _model(args, preset)
    memory = parse_size(args.memory, what="--memory") if args.memory else None
    rows = compare_policies(pool, topology, llc_size, counts, policies, args.repeats, args.seed, model,
                            memory=memory, gpus=args.gpus)
    if args.json:
        print(json.dumps({"profile": document.get("name"), "preset": preset.name if preset else None,
                          "machine": spec, "llc_size": llc_size, "model": vars(model), "rows": rows}, indent=2))
        return 0
    named = spec if not preset else f"{preset.name} = {spec}" if spec == preset.spec \
        else f"{spec} (--spec over preset {preset.name})"
    print(f"profile {document.get('name')}: {len(pool)} task kinds; machine {named} "
          f"({topology.processors} domains, {topology.total_cores} cores, LLC {format_size(llc_size)} each)")
    print(f"contention model: rho={model.capacity_fraction}, sigma={model.sensitivity}; "
          f"{args.repeats} random batches per task count, seed {args.seed}\n")
    cells = [[row["tasks"], row["policy"], f"{row['mean_makespan']:.2f}", f"{row['mean_lower_bound']:.2f}",
              f"{row['speedup_vs_fifo']:.3f}x" if "speedup_vs_fifo" in row else "-"] for row in rows]
    for line in format_table(["tasks", "policy", "makespan s", "lower bound", "vs fifo"], cells, right=[0, 2, 3, 4]):
        print(line)
    return 0


def _presets_help() -> str:
    """One entry per preset, its description wrapped under its name."""
    width = max(len(name) for name in MACHINES) + 4
    entries = [textwrap.fill(m.description, 79, initial_indent=f"  {m.name:<{width - 2}}", subsequent_indent=" " * width)
               for m in MACHINES.values()]
    return "machine presets (--machine NAME):\n" + "\n".join(entries)


def _preset(machine: str | None) -> Machine | None:
    """The preset ``--machine`` names, or None for a spec (or no --machine); ValueError for neither."""
    if not machine or machine in MACHINES:
        return MACHINES.get(machine) if machine else None
    if machine.strip()[:1].isdigit():  # a spec; Topology.from_spec names what is wrong with it
        return None
    raise ValueError(f"unknown machine {machine!r} in --machine; choose from {', '.join(MACHINES)} "
                     "or give a spec like 8x8:32MiB")


def _model(args: argparse.Namespace, preset: Machine | None) -> ContentionModel:
    """The preset's model (else the default), replaced by --model, then ρ and σ by their options."""
    model = load_model_file(args.model) if args.model else preset.model if preset else ContentionModel()
    return ContentionModel(
        model.capacity_fraction if args.capacity_fraction is None else args.capacity_fraction,
        model.sensitivity if args.sensitivity is None else args.sensitivity,
    )


def _parse_counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--tasks takes task counts like 8,16,23, got {text!r}") from None
    if not counts or any(c < 1 for c in counts):
        raise ValueError(f"--tasks takes positive task counts like 8,16,23, got {text!r}")
    return counts
