"""``scalpel calibrate``: fit the simulator's contention model to measured co-runs; check it on bench
mixes

Fits rho and sigma of the contention model to the pairwise slowdowns of a co-run document (python
benchmarks/corun.py --out corun.json), then, with --bench, simulates every kernel mix of a `scalpel
bench` record with the fitted model and reports the error against the measured makespans (those
mixes are held out of the fit). The --out file feeds `scalpel simulate --model`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from scalpel_executor.cli.common import add_command_parser, status_printer
from scalpel_executor.core.units import format_size, parse_size
from scalpel_executor.experiments import contention_fit
from scalpel_executor.experiments.tables import format_table
from scalpel_executor.learning.exchange import read_json_object


def add_command(commands: argparse._SubParsersAction) -> None:
    parser = add_command_parser(commands, "calibrate", __doc__, run)
    parser.add_argument("corun", help="co-run JSON written by benchmarks/corun.py --out")
    parser.add_argument("--bench", help="bench.json written by scalpel bench, to predict")
    parser.add_argument("--llc", help="LLC size the model assumes, e.g. 56MiB (default: the co-run document's)")
    parser.add_argument("--out", help="write the fit (and the predictions) to this JSON file")
    parser.add_argument("--plot", help="write a PNG: measured against modelled pairs, and mixes")
    parser.add_argument("--json", action="store_true", help="print the JSON record")


def run(args: argparse.Namespace) -> int:
    corun = read_json_object(args.corun, "co-run document")
    llc = _llc(args, corun)
    try:
        fit = contention_fit.fit_model(contention_fit.pairs_from_corun(corun), llc)
    except ValueError as error:
        raise ValueError(f"{args.corun}: {error}") from None
    record = {**fit.to_dict(), "corun": args.corun}
    say = status_printer(args.json)
    say(f"fitted on {fit.pairs} measured pair slowdowns, LLC {format_size(llc)}: rho = "
        f"{fit.model.capacity_fraction:.3f}, sigma = {fit.model.sensitivity:.3f}; rms error "
        f"{fit.rms_error:.3f} (default model rho=0.5, sigma=1: {fit.default_rms_error:.3f})")
    predictions = []
    if args.bench:
        bench = read_json_object(args.bench, "bench record")
        try:
            predictions = contention_fit.predict_bench(bench, fit.model, llc)
        except ValueError as error:
            raise ValueError(f"{args.bench}: {error}") from None
        record["bench"] = args.bench
        held = record["held_out"] = {**contention_fit.summarise_predictions(predictions),
                                     "rows": contention_fit.prediction_rows(predictions)}
        say("")
        cells = [[p.mix, p.peer, p.policy, f"{p.measured:.3f}", f"{p.predicted:.3f}", f"{100 * p.error:.1f}%"]
                 for p in predictions]
        for line in format_table(["mix", "peer", "policy", "measured s", "predicted s", "error"], cells,
                                 right=[3, 4, 5]):
            say(line)
        if predictions:
            say(f"held-out mixes: mean |error| {100 * held['mean_abs_error']:.1f}%, max "
                f"{100 * held['max_abs_error']:.1f}%, {held['within_15_percent']}/{held['predictions']} within 15%")
    if args.out:
        Path(args.out).write_text(json.dumps(record, indent=1))
        say(f"wrote {args.out}")
    if args.plot:
        # matplotlib loads only when a chart is asked for.
        from scalpel_executor.experiments.charts import calibration_chart

        calibration_chart(fit, predictions, args.plot)
        say(f"wrote {args.plot}")
    if args.json:
        print(json.dumps(record, indent=1))
    return 0


def _llc(args: argparse.Namespace, corun: dict) -> float:
    """The LLC size of the fit: ``--llc``, else the co-run document's ``llc_bytes``."""
    if args.llc:
        llc = parse_size(args.llc, what="--llc")
    elif corun.get("llc_bytes") is None:
        raise ValueError(f"{args.corun} names no LLC size (llc_bytes); pass --llc like 56MiB")
    else:
        llc = parse_size(corun["llc_bytes"], what=f"{args.corun}: llc_bytes")
    if not llc:
        raise ValueError("the LLC size must be positive, got 0; pass --llc like 56MiB")
    return llc
