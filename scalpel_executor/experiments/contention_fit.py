"""Fit the simulator's contention model to co-runs measured on a machine, and check it on mixes.

::

    benchmarks/corun.py --out corun.json        scalpel bench --out B  (B/bench.json)
      solo times, pairwise slowdowns              median makespans of whole mixes per peer
            │                                        │
            └─> fit_model: rho, sigma minimising     └─> predict_bench: each mix simulated with the
                the squared error of the pair            fitted model, the peer's policy, the measured
                slowdowns (sigma in closed form          solo times and the cases' footprints, in
                for each rho on a grid:                  submission order ─> error per (mix, peer)
                core.contention_fit)

Not to be confused with ``workloads.kernels.scale_to_seconds``, which picks a kernel case's steps for a
wanted run time. The mixes are held out: the fit sees pairs only. Pure functions on the two JSON documents; the
``scalpel calibrate`` command prints both steps and writes ``calibration.json``, which
``scalpel simulate --model`` and ``benchmarks/scale.py`` read.
"""

from __future__ import annotations

import math
import numbers
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from scalpel_executor.core.contention_fit import CoRun, fit_contention, load_model  # noqa: F401 - re-exported: benchmarks read calibrations through it
from scalpel_executor.core.simulate import ContentionModel, SimTask, lower_bound, simulate
from scalpel_executor.core.units import parse_size

#: How each peer hands tasks to workers, as a scheduler policy: Parsl's executors and the process
#: pool give the next task in submission order to whichever worker is free.
PEER_POLICY = {"htex-block": "fifo", "htex-none": "fifo", "threads": "fifo", "processpool": "fifo", "oracle": "fifo",
               "scalpel-inprocess": "scalpel"}


@dataclass(frozen=True)
class PairObservation:
    """A task of ``footprint`` bytes measured next to one of ``partner`` bytes: median slowdown."""

    label: str
    partner_label: str
    footprint: float
    partner: float
    slowdown: float


@dataclass(frozen=True)
class Fit:
    model: ContentionModel
    llc: float
    rms_error: float  # of the pair slowdowns, in slowdown units
    default_rms_error: float  # the same for the default model
    pairs: int
    residuals: tuple[tuple[str, str, float, float], ...]  # (label, partner, measured, modelled)

    def to_dict(self) -> dict:
        return {"format": "scalpel-calibration/1", "capacity_fraction": self.model.capacity_fraction,
                "sensitivity": self.model.sensitivity, "llc_bytes": self.llc, "rms_error": self.rms_error,
                "default_rms_error": self.default_rms_error, "pairs": self.pairs,
                "residuals": [list(r) for r in self.residuals]}


def _positive_finite(value: object) -> bool:
    return (not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(float(value))
            and value > 0)


def pairs_from_corun(document: dict) -> list[PairObservation]:
    """The median slowdowns of a ``benchmarks/corun.py --out`` document, one per ordered pair.

    Raises ValueError, one line saying which field is missing or wrong, for anything else: a
    document that is not an object, cases without a ``footprint_bytes`` size, a matrix that is
    not square or holds anything but finite numbers > 0.
    """
    try:
        cases, matrix = document["cases"], document["slowdown"]
    except (KeyError, TypeError):
        raise ValueError("not a co-run document: it needs 'cases' and 'slowdown' (benchmarks/corun.py --out)") from None
    if not isinstance(cases, list) or not all(isinstance(case, dict) for case in cases):
        raise ValueError("'cases' must be a list of objects such as {\"label\": \"spmv@4MiB\", "
                         "\"footprint_bytes\": 4194304}")
    labels, footprints = [], []
    for i, case in enumerate(cases):
        label = str(case.get("label", f"case #{i}"))
        if "footprint_bytes" not in case:
            raise ValueError(f"case #{i} ({label}) has no footprint_bytes; give its size in bytes, "
                             "e.g. \"footprint_bytes\": 4194304")
        labels.append(label)
        footprints.append(float(parse_size(case["footprint_bytes"], what=f"footprint_bytes of case #{i} ({label})")))
    if (not isinstance(matrix, list) or len(matrix) != len(cases)
            or any(not isinstance(row, list) or len(row) != len(cases) for row in matrix)):
        raise ValueError(f"'slowdown' must be a {len(cases)} x {len(cases)} matrix (a list of {len(cases)} lists, "
                         "one per case)")
    out = []
    for i, row in enumerate(matrix):
        for j, value in enumerate(row):
            if not _positive_finite(value):
                raise ValueError(f"slowdown of {labels[i]} next to {labels[j]} must be a finite number > 0, "
                                 f"got {value!r}")
            out.append(PairObservation(labels[i], labels[j], footprints[i], footprints[j], float(value)))
    return out


def _rms(model: ContentionModel, pairs: Sequence[PairObservation], llc: float) -> float:
    errors = [model.slowdowns([p.footprint, p.partner], [model.sensitivity] * 2, llc)[0] - p.slowdown for p in pairs]
    return math.sqrt(statistics.fmean(e * e for e in errors))


def fit_model(pairs: Sequence[PairObservation], llc: float, *, rhos: Iterable[float] | None = None,
              max_sensitivity: float = 8.0) -> Fit:
    """rho and sigma of :class:`~scalpel_executor.core.simulate.ContentionModel` that best explain
    ``pairs`` on an LLC of ``llc`` bytes (least squares on the slowdowns).

    :func:`scalpel_executor.core.contention_fit.fit_contention` on the slowdowns (not their logs),
    each pair one co-run with one co-runner: for each rho on a geometric grid (0.01 to 4 by
    default), refined twice between the best point's neighbours, sigma in closed form, clipped to
    [0, ``max_sensitivity``]. O(grid x pairs).
    """
    if not pairs:
        raise ValueError("need at least one measured pair to fit")
    if not (llc > 0):
        raise ValueError(f"llc must be a positive number of bytes, got {llc!r}")
    coruns = [CoRun(p.footprint, ((1.0, (p.partner,)),), p.slowdown) for p in pairs]
    model, _ = fit_contention(coruns, llc, log=False, rhos=rhos, max_sensitivity=max_sensitivity)
    residuals = tuple((p.label, p.partner_label, p.slowdown,
                       model.slowdowns([p.footprint, p.partner], [model.sensitivity] * 2, llc)[0]) for p in pairs)
    return Fit(model, llc, _rms(model, pairs, llc), _rms(ContentionModel(), pairs, llc), len(pairs), residuals)


@dataclass(frozen=True)
class Prediction:
    mix: str
    peer: str
    policy: str
    measured: float  # median makespan, seconds
    predicted: float
    lower_bound: float

    @property
    def error(self) -> float:
        """predicted / measured - 1."""
        return self.predicted / self.measured - 1.0


def predict_bench(bench: dict, model: ContentionModel, llc: float | None = None) -> list[Prediction]:
    """Simulate every kernel mix of a ``scalpel bench`` record under each peer's policy.

    Tasks get the median solo time of the bench's solo passes and their case's footprint, in the
    order the peer submitted them; the machine is the bench machine's domains and LLC (``llc``
    overrides the LLC). Peers whose policy is unknown are skipped.

    Raises ValueError, one line, for a record that is not a bench record or lacks a field or holds
    one of the wrong type.
    """
    if not isinstance(bench, dict) or bench.get("format") != "scalpel-bench/1":
        raise ValueError("not a bench record: expected format scalpel-bench/1 (scalpel bench writes bench.json)")
    try:
        return _predict_bench(bench, model, llc)
    except KeyError as error:
        raise ValueError(f"not a usable bench record: a field {error} is missing") from None
    except StopIteration:
        raise ValueError("not a usable bench record: a summary row names a mix that 'mixes' lacks") from None
    except (TypeError, AttributeError, IndexError, statistics.StatisticsError) as error:
        raise ValueError(f"not a usable bench record: a field has the wrong type ({error})") from None


def _predict_bench(bench: dict, model: ContentionModel, llc: float | None) -> list[Prediction]:
    machine = bench["machine"]
    size = float(llc or machine["llc"])
    domains = machine["domains"]
    solo = {name: statistics.median(times) for name, times in bench["solo"].items() if times}
    footprints = {}
    for mix in bench["mixes"]:
        for case in mix["cases"]:
            footprints[case["case"]] = case["footprint"]
    out = []
    for row in bench["summary"]:
        mix = next(m for m in bench["mixes"] if m["name"] == row["mix"])
        if mix["kind"] != "kernels" or "median" not in row:
            continue
        peer = row["peer"]
        policy = peer.split(":", 1)[1] if peer.startswith("scalpel:") else PEER_POLICY.get(peer)
        if policy is None:
            continue
        order = mix["oracle"] if peer == "oracle" else [c["case"] for c in mix["cases"]]
        if not all(name in solo for name in order):
            continue
        tasks = [SimTask(name, solo[name], footprints[name]) for name in order]
        predicted = simulate(tasks, domains, size, policy, model=model).makespan
        out.append(Prediction(row["mix"], peer, policy, row["median"], predicted,
                              lower_bound([solo[n] for n in order], sum(len(d) for d in domains))))
    return out


def summarise_predictions(predictions: Sequence[Prediction]) -> dict:
    """How far the predictions are off: mean and largest |error|, how many within 15%."""
    errors = [abs(p.error) for p in predictions]
    return {"predictions": len(errors), "mean_abs_error": statistics.fmean(errors) if errors else None,
            "max_abs_error": max(errors, default=None),
            "within_15_percent": sum(e <= 0.15 for e in errors)}


def prediction_rows(predictions: Sequence[Prediction]) -> list[dict]:
    """The predictions as JSON rows, each with its error."""
    return [{**asdict(p), "error": p.error} for p in predictions]
