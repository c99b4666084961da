"""The node check: what only a real node shows, in one command (about 7 minutes by default).

Measures, on the machine it runs on: no-op throughput and lone-task round trip at 4 and 16 workers
(capped at the cores), ScalpelExecutor against HTEX and Parsl's ThreadPoolExecutor (the
DataFlowKernel's own ceiling), with the CPU per task of the driver, the node manager, HTEX's
interchange and the workers; then the streams check (a stream of 2 x 64 MiB on every core listed
before as many compute-bound tasks: what that crowd costs here, and HTEX, Scalpel's first run,
one more and the learned run on a store of its own: stream co-run seconds and makespans; about a
minute; --no-streams skips it); then the contention mix and the kernel suite (`scalpel bench
--mixes contention,suite-2x --peers htex-block,scalpel:longest_first,scalpel:scalpel`) at the
machine's full width. The rounds and repetitions are chosen to fit --budget seconds. Writes <out>/node-check.json
(every sample, the machine: CPU model, cores, LLC domains, Python and Parsl versions) and
<out>/node-check.md (the tables), and bench's own files under <out>/bench/. The bench's solo times
go to <out>/solo-times.db, not to your profile store: a check run again with the same --out reuses them.
(Logic: scalpel_executor.experiments.node_check.)

    python benchmarks/node_check.py                 # the check, --budget 420 s, into ./scalpel-node-check/
    python benchmarks/node_check.py --quick         # about a minute on 2 cores: does every piece run?
    python benchmarks/node_check.py --demo --no-streams # `scalpel demo` timed in place of the streams (8-9 minutes)
    python benchmarks/node_check.py --report scalpel-node-check/node-check.json   # the tables again

On a node without network access (and without Parsl), carry wheels. On a machine with network and
the same OS and architecture (Linux x86_64), for the node's Python (here 3.12):

    pip download --dest wheels --only-binary=:all: --python-version 3.12 --implementation cp \\
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \\
        "parsl>=2024.1.1" "psutil>=5.9" "pyzmq>=25.0" "pyperf>=2.6" "networkx>=3.0" "numpy>=1.24" \\
        "threadpoolctl>=3.1" "matplotlib>=3.6" "tabulate>=0.9" "tqdm>=4.66"
    pip wheel --no-deps --wheel-dir wheels .        # in the checkout: the project itself (pure Python)

(the list is pyproject.toml's dependencies). Copy wheels/ and this script to the node, then:

    python3.12 -m venv scalpel-venv && . scalpel-venv/bin/activate
    pip install --no-index --find-links wheels scalpel-executor
    python node_check.py --out scalpel-node-check
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from scalpel_executor.experiments.node_check import default_plan, load_record, markdown_lines, run_node_check


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[2:]))
    parser.add_argument("--budget", type=float, help="seconds the whole check may take (default 420; 60 with "
                        "--quick); rounds and repetitions are chosen to fit it")
    parser.add_argument("--quick", action="store_true", help="a smoke test of every piece: one width, small "
                        "samples, quick kernels, one repetition; its figures mean little")
    parser.add_argument("--no-streams", action="store_true", help="skip the streams check (about a minute)")
    parser.add_argument("--demo", action="store_true", help="also time `scalpel demo` with its defaults as a whole "
                        "process (about 4 minutes on 16 cores; its profile store is <out>/demo/profiles.sqlite), "
                        "before the bench, which gets what is left of the budget")
    parser.add_argument("--out", default="scalpel-node-check", help="output folder (default ./%(default)s)")
    parser.add_argument("--report", metavar="NODE_CHECK_JSON", help="run nothing: print an earlier check's tables")
    args = parser.parse_args()
    if args.report:
        print("\n".join(markdown_lines(load_record(args.report))))
        return 0
    if args.budget is not None and not args.budget > 0:
        parser.error(f"--budget must be a positive number of seconds, got {args.budget}")
    plan = default_plan(quick=args.quick, budget=args.budget)
    record = run_node_check(dataclasses.replace(plan, streams=not args.no_streams, demo=args.demo), Path(args.out))
    print()
    print("\n".join(markdown_lines(record)))
    print(f"\nrecord: {Path(args.out) / 'node-check.json'}\ntables: {Path(args.out) / 'node-check.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
