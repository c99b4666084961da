"""``scalpel demo``: the main job: a contention-heavy kernel batch under Scalpel and Parsl's HTEX,
compared

Runs a contention-heavy mix of the kernel suite on this machine (large kernels that fit the
last-level cache alone but not together, submitted before the small ones) under Parsl's
HighThroughputExecutor, under ScalpelExecutor with the fifo policy (its mechanics, no reordering)
and with each other policy, on the same cores, repeated and interleaved, after one solo pass over the
distinct cases this machine has not run alone before. Says how long it will take before it starts; prints
the makespans and their split: mechanics (HTEX / scalpel:fifo), policy (scalpel:fifo / scalpel) and
total, each with a paired bootstrap interval; writes a Gantt chart (PNG) and a JSON record. For a
simulated comparison on machines you do not have, see `scalpel simulate`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from scalpel_executor.cli.common import add_command_parser, at_least, comma_list, status_printer
from scalpel_executor.core.scheduler import POLICIES
from scalpel_executor.experiments.plans import DEMO, DEMO_QUICK, with_given


def add_command(commands: argparse._SubParsersAction) -> None:
    parser = add_command_parser(commands, "demo", __doc__, run)
    parser.add_argument("--quick", action="store_true",
                        help=f"{DEMO_QUICK.tasks} short tasks, {DEMO_QUICK.repeats} runs each, policies "
                        f"{' and '.join(DEMO_QUICK.policies)} (about a minute)")
    parser.add_argument("--tasks", type=at_least(2), help=f"tasks in the batch (default {DEMO.tasks_per_core} per "
                        f"core; {DEMO_QUICK.tasks} with --quick)")
    parser.add_argument("--repeats", type=at_least(1), help=f"runs per executor, interleaved (default "
                        f"{DEMO.repeats}; {DEMO_QUICK.repeats} with --quick)")
    parser.add_argument("--policies", help=f"Scalpel policies to run, comma-separated, from: {', '.join(POLICIES)}; "
                        "fifo is the baseline the others' share is measured against "
                        f"(default {','.join(DEMO.policies)}; {','.join(DEMO_QUICK.policies)} with --quick)")
    parser.add_argument("--no-htex", action="store_true", help="leave out Parsl's HighThroughputExecutor")
    parser.add_argument("--llc", help="LLC size per domain to size the batch for and that Scalpel plans with, "
                        "e.g. 32MiB (default: sysfs, with a 56 MiB guess inside a VM whose sysfs reports a huge "
                        "host cache)")
    parser.add_argument("--out", default="scalpel-demo",
                        help="folder for the PNG, JSON, run logs and profile store (default ./%(default)s)")
    parser.add_argument("--fresh-solo", action="store_true",
                        help="run every distinct case alone again, and time its steps again, instead of reusing "
                        "what earlier runs measured on this machine (kept in the profile store's file, "
                        "$SCALPEL_PROFILE_STORE or the default one)")
    parser.add_argument("--seed", type=int, help=f"seeds the batch and the bootstrap (default {DEMO.seed})")
    parser.add_argument("--json", action="store_true", help="print the JSON record instead of the table")


def run(args: argparse.Namespace) -> int:
    policies = comma_list(args.policies, POLICIES, option="--policies", noun="policy") if args.policies else None
    plan = with_given(DEMO_QUICK if args.quick else DEMO, tasks=args.tasks, repeats=args.repeats,
                      policies=tuple(policies) if policies else None, seed=args.seed,
                      include_htex=False if args.no_htex else None)
    # Parsl, numpy and matplotlib load only once a demo runs, not for `scalpel --help`.
    from scalpel_executor.experiments.demo import print_summary, run_demo

    record = run_demo(plan, llc_override=args.llc, out=Path(args.out), printer=status_printer(args.json),
                      fresh_solo=args.fresh_solo)
    if args.json:
        print(json.dumps(record, indent=1))
    else:
        print_summary(record)
    return 0
