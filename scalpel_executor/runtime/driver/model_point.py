"""A run's point of comparison: the model's makespan of the same tasks in submission order.

A run report explains each start, but a user also asks whether the policy helped. The run itself
cannot say what another order would have taken; the model can, from the run's own figures. The
report's tasks are replayed through the simulator (:func:`~scalpel_executor.core.simulate.simulate`,
the scheduler the executor itself drives) twice on the run's topology and contention model: in
submission order (``fifo``) and under the run's policy. Each task arrives when Parsl handed it over
in this run (or when the run's first task started, if Parsl handed it over before: the
workers' start-up is left out of every figure), lasts the wall time it measured here, and has the footprint the probe read (else the
estimate the scheduler used); the scheduler is told the run-time estimate it was told in the run.

Both figures are model figures and say so: they carry the model's view of contention, and a task's
measured time already holds the slowdown of what it ran beside. Their ratio is the model's gain of
the policy over submission order on this run's tasks; ``achieved`` (first start to last end) stands
beside them. A run whose policy is ``fifo`` gets the submission-order figure alone.

Tasks that never started are left out (they have no time); memory and GPUs are not booked. A run of
more than :data:`MODEL_TASKS` tasks is not replayed (``skipped`` says so): the report is written
while the user waits for ``dfk.cleanup()``.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["MODEL_TASKS", "SUBMISSION_ORDER", "model_point", "model_words"]

#: Runs with more started tasks than this are not replayed at shutdown.
MODEL_TASKS = 20_000

#: The policy that replays the tasks in the order they were submitted.
SUBMISSION_ORDER = "fifo"


def model_point(report: Mapping) -> dict:
    """The report's ``model`` section: ``{"tasks", "submission_order", "policy", "achieved", "skipped"}``
    (seconds; ``policy`` None for a ``fifo`` run; ``skipped`` None, else why nothing was replayed).

    >>> row = {"ok": True, "estimated_runtime": 1.0, "estimated_footprint": 0.0, "cores": 1}
    >>> report = {"policy": "scalpel", "contention_model": {},
    ...           "topology": {"domains": [{"cpus": [0], "llc_size": 32e6}]},
    ...           "tasks": [{**row, "started": 0.0, "waited": 0.0, "finished": 2.0, "measured_runtime": 2.0},
    ...                     {**row, "started": 2.0, "waited": 2.0, "finished": 3.0, "measured_runtime": 1.0}]}
    >>> point = model_point(report)
    >>> (point["tasks"], point["submission_order"], point["policy"], point["achieved"])
    (2, 3.0, 3.0, 3.0)
    """
    rows = [row for row in report.get("tasks", ()) if row.get("started") is not None and row.get("finished") is not None]
    domains = report["topology"]["domains"]
    llc = min((domain.get("llc_size") or 0 for domain in domains), default=0)
    section = {"tasks": len(rows), "submission_order": None, "policy": None, "achieved": None, "skipped": None}
    if not rows:
        return {**section, "skipped": "no task started"}
    if len(rows) > MODEL_TASKS:
        return {**section, "skipped": f"{len(rows)} tasks, over the {MODEL_TASKS} replayed at shutdown"}
    if not llc:
        return {**section, "skipped": "the LLC size is unknown"}
    from scalpel_executor.core.contention import ContentionModel  # the simulator only when a report is built
    from scalpel_executor.core.simulate import SimTask, simulate

    origin = min(row["started"] for row in rows)  # the workers' start-up is no part of either figure
    arrivals = [max(origin, row["started"] - (row.get("waited") or 0.0)) for row in rows]
    tasks = [SimTask(name=str(row.get("task_id", i)),
                     solo_time=max(0.0, float(row.get("measured_runtime") or row["finished"] - row["started"])),
                     footprint=float(row.get("measured_footprint") or row.get("estimated_footprint") or 0.0),
                     arrival=max(0.0, arrival - origin),
                     runtime_estimate=row.get("estimated_runtime"),
                     cores=int(row.get("width") or row.get("cores") or 1))  # a malleable task: the width it ran at
             for i, (row, arrival) in enumerate(zip(rows, arrivals))]
    planned = (report.get("contention_model") or {}).get("planned_with") or {}
    model = ContentionModel(**{name: planned[name] for name in ("capacity_fraction", "sensitivity") if name in planned})
    cpus = [list(domain["cpus"]) for domain in domains]

    def replay(policy: str) -> float:
        return round(simulate(tasks, cpus, llc, policy, model=model).makespan, 3)

    policy = report.get("policy")
    achieved = max(row["finished"] for row in rows) - origin
    return {**section, "submission_order": replay(SUBMISSION_ORDER),
            "policy": None if policy == SUBMISSION_ORDER else replay(policy), "achieved": round(achieved, 3)}


def model_words(section: Mapping | None, policy: str) -> str | None:
    """The closing line's clause for a report's ``model`` section; None when there is none to say.

    >>> model_words({"tasks": 9, "submission_order": 12.0, "policy": 10.0, "achieved": 10.5, "skipped": None},
    ...             "scalpel")
    'model figures, these tasks replayed: 12.00 s in submission order, 10.00 s under scalpel (1.20x); achieved 10.50 s'
    """
    if not section or section.get("submission_order") is None:
        return None
    replayed = f"model figures, these tasks replayed: {section['submission_order']:.2f} s in submission order"
    if section.get("policy"):
        gain = section["submission_order"] / section["policy"] if section["policy"] > 0 else 1.0
        replayed += f", {section['policy']:.2f} s under {policy} ({gain:.2f}x)"
    return f"{replayed}; achieved {section['achieved']:.2f} s"
