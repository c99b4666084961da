"""``scalpel topology``: show the last-level-cache domains this process can use

Shows the last-level-cache domains this process can use, read from sysfs, or the machine that --spec
or --cpus describes.

An empty --spec or --cpus is refused with an example of how to write it.
"""

from __future__ import annotations

import argparse
import json

from scalpel_executor.cli.common import add_command_parser
from scalpel_executor.core.domains import Topology, parse_cpu_list
from scalpel_executor.host.sysfs import detect_topology


def add_command(commands: argparse._SubParsersAction) -> None:
    parser = add_command_parser(commands, "topology", __doc__, run)
    parser.add_argument("--spec", help='describe a machine instead, e.g. "2x4:12MiB" (2 domains of 4 cores)')
    parser.add_argument("--cpus", help='explicit CPU lists per domain, ";"-separated, e.g. "0-3;4-7"')
    parser.add_argument("--llc", help="LLC size per domain for --cpus, e.g. 32MiB")
    parser.add_argument("--smt", action="store_true", help="use every hardware thread, not one per core")
    parser.add_argument("--sysfs", default="/sys", help="sysfs root to read (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    topology = topology_from_args(args)
    print(json.dumps(topology.to_dict(), indent=2) if args.json else topology.describe())
    return 0


def topology_from_args(args: argparse.Namespace) -> Topology:
    """The machine ``--spec`` or ``--cpus``/``--llc`` describe, else this one's."""
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
    return detect_topology(args.sysfs, smt=args.smt)
