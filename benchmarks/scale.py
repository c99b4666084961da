"""Machines this one cannot show, simulated with a contention model calibrated here.

    python benchmarks/scale.py --model calibration.json --out docs/figures/scale

Two studies, every policy on the same random batches (seeded), contention model from
``scalpel calibrate --out`` (or the defaults without ``--model``):

* **paper**: the Scalpel paper's machine, 2 x Xeon E5620 (2 LLC domains x 4 cores, 12 MiB L3 each),
  batches of 8-23 tasks drawn from its Table II kernels (``polybench-xeon-e5620`` profile).
* **wide**: a two-socket machine with 8 LLC domains of 8 cores and 32 MiB L3 each, batches of 10x
  to 100x as many tasks as cores, drawn from the kernel suite sized for that cache (small, medium
  and large footprints of every kernel, solo times 1-10 s from the shipped rate table).

Printed: mean makespan per policy, geometric-mean speedup over ``fifo`` and the makespan over the
lower bound; written: ``<out>.json`` and ``<out>.png``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display

import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

from scalpel_executor.experiments.contention_fit import load_model
from scalpel_executor.learning.exchange import load_profile
from scalpel_executor.core.scheduler import POLICIES
from scalpel_executor.core.simulate import ContentionModel
from scalpel_executor.core.domains import Topology
from scalpel_executor.experiments.simulated_policies import compare_policies
from scalpel_executor.experiments.study_machines import suite_pool
from scalpel_executor.experiments.tables import format_table

POLICY_ORDER = [p for p in ("scalpel", "longest_first", "grouping+fifo", "di", "random", "fifo") if p in POLICIES]


def study(name: str, pool: list, spec: str, counts: list[int], repeats: int, model: ContentionModel,
          seed: int) -> list[dict]:
    """Every policy of POLICY_ORDER on the same random batches of each size, on machine ``spec``."""
    topology = Topology.from_spec(spec)
    rows = []
    for count in counts:
        started = time.perf_counter()
        rows += [{"study": name, "machine": spec, **row} for row in
                 compare_policies(pool, topology, topology.llc_size, [count], POLICY_ORDER, repeats, seed, model)]
        print(f"  {name}: {count} tasks x {repeats} batches x {len(POLICY_ORDER)} policies in "
              f"{time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    return rows


def plot(rows: list[dict], path: Path) -> None:
    studies = list(dict.fromkeys(r["study"] for r in rows))
    figure, axes = plt.subplots(1, len(studies), figsize=(6 * len(studies), 4.4), layout="constrained", squeeze=False)
    for axis, name in zip(axes[0], studies):
        of = [r for r in rows if r["study"] == name]
        for policy in POLICY_ORDER:
            points = [(r["tasks"], r["speedup_vs_fifo"]) for r in of if r["policy"] == policy]
            axis.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=policy)
        axis.axhline(1.0, color="black", linewidth=0.8)
        axis.set_xlabel("tasks in the batch")
        axis.set_ylabel("speedup over fifo (geometric mean)")
        axis.set_title(f"{name}: {of[0]['machine']}", fontsize=10)
        axis.legend(fontsize=8)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="calibration JSON from `scalpel calibrate --out` (default: the model's defaults)")
    parser.add_argument("--paper-tasks", default="8,11,15,16,19,23")
    parser.add_argument("--paper-repeats", type=int, default=50)
    parser.add_argument("--wide-spec", default="8x8:32MiB")
    parser.add_argument("--wide-factors", default="10,25,50,100", help="tasks as multiples of the wide machine's cores")
    parser.add_argument("--wide-repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="scale", help="write <out>.json and <out>.png")
    args = parser.parse_args(argv)
    model = ContentionModel()
    if args.model:
        with open(args.model) as handle:
            model = load_model(json.load(handle))
    print(f"contention model: rho={model.capacity_fraction:.3f}, sigma={model.sensitivity:.3f}", flush=True)
    _, paper_pool = load_profile("polybench-xeon-e5620")
    rows = study("paper", paper_pool, "2x4:12MiB", [int(x) for x in args.paper_tasks.split(",")],
                 args.paper_repeats, model, args.seed)
    wide = Topology.from_spec(args.wide_spec)
    cores = wide.total_cores
    pool = suite_pool(wide.llc_size, len(wide.domains[0].cpus))
    rows += study("wide", pool, args.wide_spec, [int(f) * cores for f in args.wide_factors.split(",")],
                  args.wide_repeats, model, args.seed)
    print()
    cells = [[row["study"], row["tasks"], row["policy"], f"{row['mean_makespan']:.1f}", f"{row['speedup_vs_fifo']:.3f}x",
              f"{row['over_lower_bound']:.3f}"] for row in rows]
    for line in format_table(["study", "tasks", "policy", "makespan s", "vs fifo", "/ bound"], cells, right=[1, 3, 4, 5]):
        print(line)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"model": vars(model), "command": " ".join(sys.argv), "rows": rows},
                                                   indent=1))
    plot(rows, out.with_suffix(".png"))
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
