"""Which rule should replace ``scalpel`` as the default policy? A simulated study with a search baseline.

::

    python benchmarks/archive/policy_study.py check --machine paper         # the fast evaluator agrees with simulate()
    python benchmarks/archive/policy_study.py fit-xeon16                     # the 16-core machine's contention model
    python benchmarks/archive/policy_study.py run --machine paper --model default --out study/paper-default.json
    python benchmarks/archive/policy_study.py report study/*.json            # the tables of docs/results/policy-study.md

``run`` simulates every candidate policy on the same seeded batches as ``benchmarks/scale.py``
(same pools, same batch seeds), plus a search for the best first-come-first-served dispatch order in
the same contention model, and writes one JSON record; ``--sizes``, ``--repeats`` and
``--first-repeat`` split a study over several short runs, which ``report`` merges (same machine,
model and estimate error) into tables that check the goals of the future default policy:

* never more than 1% below max(``longest_first``, ``scalpel-paper``) at any batch size (speedups over
  ``fifo``, geometric means over the batches of that size);
* geometric-mean speedup over ``fifo`` above both on every machine;
* closes at least half of the ``longest_first``-to-search gap (makespan over the search's best,
  geometric means pooled over every batch of a machine).

Machines (``MACHINES``, ``scalpel_executor.experiments.study_machines``: topologies from the package's
presets, ``scalpel_executor.core.machines``):
``paper`` 2x4 cores, 12 MiB per domain, Table II tasks, 8-23 per batch; ``wide`` 8x8, 32 MiB;
``epyc`` 16 domains (2 sockets x 8 CCDs) x 8 cores, 32 MiB per CCD; ``xeon16`` 1x16 cores sharing
one 300 MiB LLC. The last three draw 10x and 25x their cores from the kernel suite sized for their
cache, as ``benchmarks/scale.py`` does. Models: ``default`` (rho 0.5, sigma 1), ``calibrated``
(docs/data/calibration-dev-vm.json) and ``xeon16-fit`` (the ``xeon16`` preset's model, which
``fit-xeon16`` fits to the k-copies surface in docs/data/xeon16-spmv-corun-surface.json).
``--estimate-noise s`` gives the schedulers run-time estimates off by exp(N(0, s)) per distinct
task; the simulator and the search keep the true times. The schedulers are told that spread
(``Task.runtime_spread``, as the profile store's run-time std / mean tells the live executor) unless
``--estimate-spread`` says otherwise; ``scalpel-trusting`` is the default told nothing, so it
plans on its estimates as if they were exact (no robustness check).

Policies
--------
Package policies (``fifo``, ``longest_first``, ``scalpel-paper`` (the published algorithm),
``scalpel-lpt`` and ``scalpel``, the package's default: a dispatch order checked in the contention
model, its tail improved by a seeded local search under a planning allowance) run through the
package's :class:`Scheduler`, which plans
with the simulated machine's LLC size and model. Candidates that
need the scheduler's online state (the footprints running on the freed core's domain, and for some
the clock) subclass Scheduler and override ``_choose`` (:class:`OnlineScheduler`): ``lpt-aware-x``,
``lpt-added-10``, ``finish-time``, ``finish-ratio``, ``net-longest``. They are driven by
:func:`drive`, which runs ``simulate()`` with the scheduler a factory builds, a clock it can read,
and reads the dispatch order from its result; the contention model is the package's ``ContentionModel``.
Model-checked plans simulate candidate orders in the model on what the scheduler knows (estimates)
and dispatch the chosen order first come first served: ``best-of`` (the best predicted of
longest-first, scalpel-paper, scalpel-lpt, lpt-aware-10 and finish-ratio), ``rollout`` (a rollout of
longest-first over the last 2 x cores positions, 8 candidates per position), ``rollout-best`` (the
same rollout from the ``best-of`` order) and ``best-of+ls200`` (``best-of`` then 200 local-search
evaluations).

Search
------
Any schedule a work-conserving policy produces is reproduced by ``fifo`` fed its dispatch order
(the order in which tasks started), so the search runs over dispatch orders under
first-come-first-served, with ``scalpel_executor.experiments.order_search`` on the default policy's
evaluator (``core.orders.FcfsEvaluator``, a fast copy of the simulator specialised to that case, checked
against ``simulate(..., "fifo")`` by ``check`` and by tests/core/test_orders.py):

1. up to ``--bnb-max-tasks`` tasks, branch and bound over dispatch decisions (which waiting task a
   freed core starts), with identical cores of a domain taken once and identical tasks taken
   once, and a bound from solo work (max(core free times), mean
   of core free times plus waiting work, earliest free core plus longest waiting task); a node
   budget per batch, after which the best order found so far is kept (``proven`` says whether the
   search finished);
2. a seeded local search (swap and insert moves, ties accepted) from the best of the policies'
   dispatch orders and the branch and bound's best, ``--ls-evals`` evaluations; above 64 tasks
   the moves are confined to the tail (the last ``--tail-waves`` x cores positions), each
   evaluation resuming from a snapshot taken where the tail starts.

The best makespan is the minimum of the search and of every policy's own makespan.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import random
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

from scalpel_executor.experiments.contention_fit import load_model
from scalpel_executor.core.machines import fit_k_copies as fit_k_copies_points
from scalpel_executor.core.machines import k_copies_points, k_copies_rms, k_copies_slowdown
from scalpel_executor.core.orders import FcfsEvaluator
from scalpel_executor.core.scheduler import Scheduler, Task
from scalpel_executor.core.simulate import ContentionModel, SimTask, simulate
from scalpel_executor.core.domains import Topology
from scalpel_executor.experiments import study_machines
from scalpel_executor.experiments.order_search import branch_and_bound, local_search, rollout_order
from scalpel_executor.experiments.simulated_policies import batch_for, gmean, with_estimates
from scalpel_executor.experiments.study_machines import STUDY_MACHINES as MACHINES
from scalpel_executor.experiments.study_machines import machine_setup

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CALIBRATION = ROOT / "docs" / "data" / "calibration-dev-vm.json"
SURFACE = ROOT / "docs" / "data" / "xeon16-spmv-corun-surface.json"
MiB = 2 ** 20


# --------------------------------------------------------------------------------------------
# Contention models

def fit_k_copies(surface: dict, llc: float, *, max_sensitivity: float = 8.0) -> dict:
    """rho, sigma of ContentionModel fitted to the slowdown of k identical co-running copies.

    The fit is the package's (``scalpel_executor.core.machines.fit_k_copies``, every point with
    k >= 2); this adds what the report prints: the largest error, the default and dev-VM models'
    errors on the same points, and every point's residual.
    """
    points = k_copies_points(surface["slowdown"])
    model, error = fit_k_copies_points(points, llc, max_sensitivity=max_sensitivity)
    calibrated = load_model(json.loads(CALIBRATION.read_text()))
    return {
        "capacity_fraction": model.capacity_fraction, "sensitivity": model.sensitivity, "llc_bytes": llc,
        "effective_capacity_mib": model.capacity_fraction * llc / MiB, "rms_error": error,
        "max_abs_error": max(abs(k_copies_slowdown(model, f, k, llc) - v) for f, k, v in points),
        "default_rms_error": k_copies_rms(ContentionModel(), points, llc),
        "dev_vm_rms_error": k_copies_rms(calibrated, points, llc), "points": len(points),
        "residuals": [[f / MiB, k, v, k_copies_slowdown(model, f, k, llc)] for f, k, v in points],
    }


def model_named(name: str) -> ContentionModel:
    return study_machines.model_named(name, CALIBRATION)


# --------------------------------------------------------------------------------------------
# The driver: simulate() with a scheduler a factory builds and a clock it can read.

class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now

    def set(self, now: float) -> None:
        self.now = now


def drive(tasks: Sequence[SimTask], domains, llc: float, model: ContentionModel,
          make_scheduler: Callable[[Clock], Scheduler]) -> tuple[float, list[int]]:
    """(makespan, dispatch order as indices into ``tasks``) of one batch arriving at time 0: the
    package's simulator driving the scheduler ``make_scheduler`` builds, with a clock it can read."""
    clock = Clock()
    result = simulate(tasks, domains, llc, "fifo", model=model, scheduler=make_scheduler(clock),
                      on_time=clock.set)
    return result.makespan, result.order


# --------------------------------------------------------------------------------------------
# Candidate policies

def kind_of(task: Task, sigma0: float) -> tuple[float, float, float]:
    sigma = task.payload.sensitivity if task.payload is not None and task.payload.sensitivity is not None else sigma0
    return (task.runtime, task.footprint, sigma)


class OnlineScheduler(Scheduler):
    """Longest-first family that decides when a core frees, from what runs on that core's domain.

    ``rule(self, domain, running, kinds)`` returns the kind to start, where ``running`` is the
    tasks running on ``domain`` and ``kinds`` the waiting kinds (runtime, footprint, sigma) with at
    least one task, longest first. Identical tasks (same kind) are interchangeable, so a decision
    costs O(kinds x cores of a domain) model evaluations at most. Priorities are ignored (the
    study's batches have one level).
    """

    def __init__(self, domains, rule, *, llc: float, model: ContentionModel, clock: Clock):
        super().__init__(domains, "longest_first")
        self.rule, self.llc, self.model, self.clock = rule, llc, model, clock
        self.total_cores = len(self.slots)
        self.queues: dict[tuple, deque] = {}
        self.order: list[tuple] = []  # kinds, longest first
        self.started: dict[int, float] = {}  # task seq -> dispatch time
        self.waiting_work = 0.0

    def add(self, tasks):
        tasks = list(tasks)
        super().add(tasks)
        for task in tasks:
            kind = kind_of(task, self.model.sensitivity)
            if kind not in self.queues:
                self.queues[kind] = deque()
                self.order.append(kind)
            self.queues[kind].append(task)
            self.waiting_work += task.runtime
        self.order.sort(key=lambda k: (-k[0], -k[1], k[2]))

    def next_for(self, slot, now=None):
        task = super().next_for(slot, now)
        if task is not None:
            self.started[task.seq] = self.clock()
        return task

    def release(self, slot):
        task = super().release(slot)
        self.started.pop(task.seq, None)
        return task

    def _choose(self, domain):
        kinds = [k for k in self.order if self.queues[k]]
        if not kinds:
            return None
        running = [t for index, t in self._running.items() if self.slots[index].domain == domain]
        kind = self.rule(self, domain, running, kinds) if len(kinds) > 1 else kinds[0]
        task = self.queues[kind].popleft()
        del self._waiting[task.seq]
        self.waiting_work -= task.runtime
        return task

    # helpers for rules
    def slowdowns_with(self, running: list[Task], kind: tuple) -> list[float]:
        """Predicted slowdowns of ``running`` + one task of ``kind`` on one domain (last: the new one)."""
        sig0 = self.model.sensitivity
        fps = [t.footprint for t in running] + [kind[1]]
        sigs = [kind_of(t, sig0)[2] for t in running] + [kind[2]]
        return self.model.slowdowns(fps, sigs, self.llc)


def rule_lpt_aware(share: float, cost: str = "own"):
    """(b) Longest first, but among the waiting kinds within ``share`` of the longest remaining run
    time, the one with the smallest predicted slowdown on the freed core's domain (``cost="own"``:
    the candidate's own slowdown; ``"added"``: the extra core-seconds it and its co-runners incur,
    solo-work estimates). Ties: longest first."""

    def rule(s: OnlineScheduler, domain, running, kinds):
        longest = kinds[0][0]
        best, best_key = None, None
        for kind in kinds:
            if kind[0] < (1.0 - share) * longest:
                break
            factors = s.slowdowns_with(running, kind)
            if cost == "own":
                penalty = factors[-1]
            else:
                before = s.model.slowdowns([t.footprint for t in running],
                                           [kind_of(t, s.model.sensitivity)[2] for t in running], s.llc) if running else []
                now = s.clock()
                penalty = kind[0] * (factors[-1] - 1.0) + sum(
                    max(t.runtime - (now - s.started.get(t.seq, now)), 0.0) * (f - b)
                    for t, f, b in zip(running, factors, before))
            key = (round(penalty, 12), -kind[0])
            if best_key is None or key < best_key:
                best, best_key = kind, key
        return best

    return rule


def rule_finish_time(s: OnlineScheduler, domain, running, kinds):
    """(c) The kind minimising a one-step makespan bound if it starts now on this domain:

    max( its own predicted run time next to the domain's co-runners,
         the next core's free time + the longest task still waiting after it,
         (remaining work + the extra core-seconds it causes) / cores ),
    remaining work from solo estimates (running tasks: run time minus time since start). Ties:
    longest first. Needs the driver's clock.
    """
    now = s.clock()
    rem_all = [max(t.runtime - (now - s.started.get(t.seq, now)), 0.0) for t in s._running.values()]
    work = sum(rem_all) + s.waiting_work
    idle_other = s.total_cores - len(s._running) - 1  # cores besides this one that are idle now
    next_free = 0.0 if idle_other > 0 or not rem_all else min(rem_all)
    sig0 = s.model.sensitivity
    before = s.model.slowdowns([t.footprint for t in running], [kind_of(t, sig0)[2] for t in running], s.llc) if running else []
    rem_here = [max(t.runtime - (now - s.started.get(t.seq, now)), 0.0) for t in running]
    best, best_key = None, None
    for index, kind in enumerate(kinds):
        factors = s.slowdowns_with(running, kind)
        extra = kind[0] * (factors[-1] - 1.0) + sum(r * (f - b) for r, f, b in zip(rem_here, factors, before))
        if len(s.queues[kind]) > 1:
            longest_after = kinds[0][0]
        else:
            longest_after = kinds[1][0] if index == 0 else kinds[0][0]
        bound = max(kind[0] * factors[-1], next_free + longest_after, (work + extra) / s.total_cores)
        key = (round(bound, 9), -kind[0])
        if best_key is None or key < best_key:
            best, best_key = kind, key
    return best


def rule_net_longest(s: OnlineScheduler, domain, running, kinds):
    """(c') The longest task net of the contention it adds: maximise run time minus the extra
    core-seconds (its own and its co-runners', solo-work estimates) it causes on this domain."""
    now = s.clock()
    sig0 = s.model.sensitivity
    before = s.model.slowdowns([t.footprint for t in running], [kind_of(t, sig0)[2] for t in running], s.llc) if running else []
    rem_here = [max(t.runtime - (now - s.started.get(t.seq, now)), 0.0) for t in running]
    best, best_key = None, None
    for kind in kinds:
        factors = s.slowdowns_with(running, kind)
        extra = kind[0] * (factors[-1] - 1.0) + sum(r * (f - b) for r, f, b in zip(rem_here, factors, before))
        key = (-round(kind[0] - extra, 9), -kind[0])
        if best_key is None or key < best_key:
            best, best_key = kind, key
    return best


def rule_finish_ratio(s: OnlineScheduler, domain, running, kinds):
    """(c'') Smallest predicted finish time over run time: (now + run time x slowdown) / run time."""
    now = s.clock()
    best, best_key = None, None
    for kind in kinds:
        factor = s.slowdowns_with(running, kind)[-1]
        key = (round((now + kind[0] * factor) / kind[0], 12), -kind[0])
        if best_key is None or key < best_key:
            best, best_key = kind, key
    return best


# ---- (d) a model-checked plan: simulate a few orders in the model, keep the best ----

BASE_RULES = ("scalpel-paper", "scalpel-lpt", "lpt-aware-10", "finish-ratio")


def planned_best_of(batch: Sequence[SimTask], domains, llc, model, rules: Sequence[str],
                    search_evals: int = 0, seed: int = 0, cache: dict | None = None) -> tuple[float, list[int]]:
    """(d) A model-checked plan: run longest-first and each rule in ``rules`` in the contention
    model on what the scheduler knows (the run-time estimates), keep the dispatch order with the
    shortest predicted makespan, optionally improve it with a ``search_evals``-evaluation local
    search, and dispatch that order first come first served.

    ``longest_first`` is always a candidate, so the plan is never predicted worse than it.
    """
    known = [estimated(t) for t in batch]
    if any(t.runtime_estimate is not None for t in batch):
        cache = None  # the cache holds runs on the true times
    evaluator = FcfsEvaluator.of(known, [len(d) for d in domains], llc, model)
    best_order, best_time = None, math.inf
    for name in dict.fromkeys(["longest_first", *rules]):
        _, order = run_policy(name, known, domains, llc, model, cache=cache)
        predicted = evaluator.run(order)
        if predicted < best_time - 1e-9:
            best_order, best_time = order, predicted
    if search_evals:
        best_order, best_time = local_search(evaluator, best_order, best_time, search_evals, random.Random(seed),
                                             tail_waves=None if len(batch) <= 64 else 2)
    # What the plan does: its order, first come first served, in the package's own simulator.
    makespan = simulate([batch[i] for i in best_order], domains, llc, "fifo", model=model).makespan
    return makespan, list(best_order)


def planned_rollout(batch, domains, llc, model, tail_factor: float | None, window: int | None,
                    passes: int = 1, base_rules: Sequence[str] = (), cache: dict | None = None
                    ) -> tuple[float, list[int]]:
    """Plan ``rollout_order`` on what the scheduler knows (run-time estimates), dispatch it FCFS.

    With ``base_rules``, the base is the best predicted of longest-first and those rules'
    dispatch orders (each run in the model on the estimates)."""
    known = [estimated(t) for t in batch]
    ev = FcfsEvaluator.of(known, [len(d) for d in domains], llc, model)
    cores = sum(len(d) for d in domains)
    tail = None if tail_factor is None else int(tail_factor * cores)
    order = None
    if base_rules:
        best_time = math.inf
        if any(t.runtime_estimate is not None for t in batch):
            cache = None  # the cache holds runs on the true times
        for name in dict.fromkeys(["longest_first", *base_rules]):
            candidate = run_policy(name, known, domains, llc, model, cache=cache)[1]
            predicted = ev.run(candidate)
            if predicted < best_time - 1e-9:
                order, best_time = candidate, predicted
    for _ in range(passes):
        order = rollout_order(ev, tail=tail, window=window, base=order)
    makespan = simulate([batch[i] for i in order], domains, llc, "fifo", model=model).makespan
    return makespan, order


def estimated(task: SimTask) -> SimTask:
    """The task as the scheduler sees it: its run-time estimate as its solo time."""
    if task.runtime_estimate is None:
        return task
    return SimTask(task.name, task.runtime_estimate, task.footprint, task.sensitivity)


def _package(name):
    return lambda domains, llc, model, clock: Scheduler(domains, name, llc=llc, model=model)


class _TrustingScheduler(Scheduler):
    """The package's scheduler told nothing of its estimates' spread (every ``Task.runtime_spread`` = 0)."""

    def add(self, tasks):
        tasks = list(tasks)
        for task in tasks:
            task.runtime_spread = 0.0
        super().add(tasks)


def _online(rule):
    return lambda domains, llc, model, clock: OnlineScheduler(domains, rule, llc=llc, model=model, clock=clock)


POLICY_FACTORIES: dict[str, Callable] = {
    "fifo": _package("fifo"),
    "longest_first": _package("longest_first"),
    "scalpel-paper": _package("scalpel-paper"),
    "scalpel-lpt": _package("scalpel-lpt"),
    "scalpel": _package("scalpel"),  # the package's default (core/planning.py)
    # the same rule without the planning allowance (only the 60,000-start budget): what the
    # allowance costs in simulation, where planning takes no time
    "scalpel-unbounded": lambda domains, llc, model, clock: Scheduler(domains, "scalpel", llc=llc, model=model,
                                                                      plan_rate=math.inf),
    # the default without its robustness check: it plans on its estimates as if they were exact
    "scalpel-trusting": lambda domains, llc, model, clock: _TrustingScheduler(domains, "scalpel", llc=llc, model=model),
    "lpt-aware-5": _online(rule_lpt_aware(0.05)),
    "lpt-aware-10": _online(rule_lpt_aware(0.10)),
    "lpt-aware-25": _online(rule_lpt_aware(0.25)),
    "lpt-added-10": _online(rule_lpt_aware(0.10, "added")),
    "finish-time": _online(rule_finish_time),
    "net-longest": _online(rule_net_longest),
    "finish-ratio": _online(rule_finish_ratio),
}

# Composite candidates: (rules simulated by the planner, local-search evaluations)
COMPOSITES = {
    "best-of": (BASE_RULES, 0),
    "best-of+ls200": (BASE_RULES, 200),
}

DEFAULT_POLICIES = ["fifo", "longest_first", "scalpel-paper", "scalpel-lpt", "lpt-aware-5", "lpt-aware-10", "lpt-aware-25",
                    "lpt-added-10", "finish-time", "finish-ratio", "net-longest", "best-of", "rollout", "rollout-best",
                    "best-of+ls200"]


ROLLOUTS = {
    # name: (tail in waves of the machine's cores, None: every position; window, passes, base rules)
    "rollout": (2, 8, 1, ()),  # from longest-first
    "rollout-best": (2, 8, 1, BASE_RULES),  # from the best-of plan
    "rollout-full": (None, None, 1, ()),  # every position, every distinct task (not in the default set)
}


def run_policy(name: str, batch, domains, llc, model, seed: int = 0, cache: dict | None = None
               ) -> tuple[float, list[int]]:
    """(makespan, dispatch order) of policy ``name`` on ``batch``; ``cache`` (one per batch) keeps results."""
    if cache is not None and name in cache:
        return cache[name]
    if name in ROLLOUTS:
        result = planned_rollout(batch, domains, llc, model, *ROLLOUTS[name], cache=cache)
    elif name in COMPOSITES:
        rules, evals = COMPOSITES[name]
        result = planned_best_of(batch, domains, llc, model, rules, evals, seed, cache)
    else:
        factory = POLICY_FACTORIES[name]
        result = drive(batch, domains, llc, model, lambda clock: factory(domains, llc, model, clock))
    if cache is not None:
        cache[name] = result
    return result


# --------------------------------------------------------------------------------------------
# The study

def study(machine: str, model_name: str, policies: list[str], sizes: list[int] | None, repeats: int, seed: int,
          bnb_max_tasks: int, bnb_budget: int, ls_evals: int, tail_waves: int | None, log=print,
          first_repeat: int = 0, noise: float = 0.0, spread: float | None = None) -> dict:
    domains, llc, pool, default_sizes = machine_setup(machine)
    model = model_named(model_name)
    sizes = sizes or default_sizes
    cores = sum(len(d) for d in domains)
    rows = []
    started_all = time.perf_counter()
    for count in sizes:
        started = time.perf_counter()
        for repeat in range(first_repeat, first_repeat + repeats):
            batch = batch_for(pool, count, repeat, seed)
            batch = with_estimates(batch, noise, random.Random(seed * 8191 + count * 131 + repeat), spread)
            makespans, orders, cache = {}, {}, {}
            seconds = {}
            for policy in policies:
                began = time.perf_counter()
                makespans[policy], orders[policy] = run_policy(policy, batch, domains, llc, model, seed + repeat, cache)
                seconds[policy] = time.perf_counter() - began  # with the cache: beyond the rules already run
            ev = FcfsEvaluator.of(batch, [len(d) for d in domains], llc, model)
            seed_name = min(policies, key=lambda p: (makespans[p], p))
            seed_order, seed_time = orders[seed_name], ev.run(orders[seed_name])
            proven, nodes = False, 0
            if count <= bnb_max_tasks:
                seed_order, seed_time, proven, nodes = branch_and_bound(ev, seed_time, seed_order, bnb_budget)
                replayed = ev.run(seed_order)
                if abs(replayed - seed_time) > 1e-9 * seed_time:
                    raise AssertionError(f"branch and bound order replays to {replayed}, not {seed_time}")
            tail = tail_waves if count > 64 else None
            search_order, search_time = local_search(ev, seed_order, seed_time, 0 if proven else ls_evals,
                                                     random.Random(seed * 7919 + count * 31 + repeat), tail)
            best = min(search_time, *makespans.values())
            rows.append({"tasks": count, "repeat": repeat, "makespans": makespans, "seconds": seconds, "search": search_time,
                         "best": best, "proven": proven, "bnb_nodes": nodes,
                         "lower_bound": max(max(t.solo_time for t in batch), sum(t.solo_time for t in batch) / cores)})
        log(f"  {machine}/{model_name}: {count} tasks x {repeats} batches in {time.perf_counter() - started:.1f} s",
            file=sys.stderr, flush=True)
    return {"machine": machine, "spec": MACHINES[machine]["spec"], "model": model_name,
            "rho": model.capacity_fraction, "sigma": model.sensitivity, "policies": policies,
            "repeats": repeats, "first_repeat": first_repeat, "estimate_noise": noise,
            "estimate_spread": noise if spread is None else spread, "seed": seed, "search": {"bnb_max_tasks": bnb_max_tasks, "bnb_budget": bnb_budget,
                                                         "ls_evals": ls_evals, "tail_waves": tail_waves},
            "seconds": time.perf_counter() - started_all, "command": " ".join(sys.argv), "rows": rows}


def summarise(record: dict) -> dict:
    rows, policies = record["rows"], record["policies"]
    sizes = sorted({r["tasks"] for r in rows})
    per_size = {}
    for size in sizes:
        of = [r for r in rows if r["tasks"] == size]
        speed = {p: gmean([r["makespans"]["fifo"] / r["makespans"][p] for r in of]) for p in policies}
        over = {p: gmean([r["makespans"][p] / r["best"] for r in of]) for p in policies}
        per_size[size] = {"speedup": speed, "over_best": over, "batches": len(of),
                          "proven": sum(r["proven"] for r in of)}
    out = {}
    for p in policies:
        speedups = [per_size[s]["speedup"][p] for s in sizes]
        ratios = [per_size[s]["speedup"][p] / max(per_size[s]["speedup"]["longest_first"], per_size[s]["speedup"]["scalpel-paper"])
                  for s in sizes]
        lf_over = gmean([r["makespans"]["longest_first"] / r["best"] for r in rows])
        p_over = gmean([r["makespans"][p] / r["best"] for r in rows])
        gap = (lf_over - p_over) / (lf_over - 1.0) if lf_over > 1.0 + 1e-12 else float("nan")
        out[p] = {"speedup": gmean(speedups), "worst_ratio": min(ratios),
                  "worst_size": sizes[ratios.index(min(ratios))], "over_best": p_over, "gap_closed": gap}
    gm_lf, gm_sc = out["longest_first"]["speedup"], out["scalpel-paper"]["speedup"]
    for p in policies:
        o = out[p]
        o["meets"] = {"within_1pct": o["worst_ratio"] >= 0.99, "above_both": o["speedup"] > max(gm_lf, gm_sc) + 1e-12,
                      "half_gap": (o["gap_closed"] >= 0.5) if not math.isnan(o["gap_closed"]) else False}
    return {"sizes": sizes, "per_size": per_size, "policies": out}


def plan_seconds(policy: str, seconds: dict) -> float:
    """A policy's own time on a batch plus that of the cached rules it ran (composites)."""
    rules = COMPOSITES[policy][0] if policy in COMPOSITES else ROLLOUTS[policy][3] if policy in ROLLOUTS else ()
    extra = ["longest_first", *rules] if rules else []
    return seconds[policy] + sum(seconds.get(r, 0.0) for r in dict.fromkeys(extra) if r != policy)


def merge_records(records: list[dict]) -> list[dict]:
    """Records of the same machine, model and estimate noise (a study split over runs) as one."""
    merged: dict[tuple, dict] = {}
    for record in records:
        key = (record["machine"], record["model"], record.get("estimate_noise", 0.0))
        if key not in merged:
            merged[key] = {**record, "rows": list(record["rows"]), "commands": [record["command"]]}
            continue
        into = merged[key]
        if into["policies"] != record["policies"] or into["search"] != record["search"]:
            raise SystemExit(f"records of {key} differ in policies or search settings; run them alike")
        have = {(r["tasks"], r["repeat"]) for r in into["rows"]}
        into["rows"] += [r for r in record["rows"] if (r["tasks"], r["repeat"]) not in have]
        into["seconds"] += record["seconds"]
        into["commands"].append(record["command"])
    for record in merged.values():
        sizes = {r["tasks"] for r in record["rows"]}
        record["repeats"] = min(sum(r["tasks"] == x for r in record["rows"]) for x in sizes)
    return list(merged.values())


MACHINE_ORDER = list(MACHINES)
MODEL_ORDER = ["default", "calibrated", "xeon16-fit"]


def print_summary(records: list[dict]) -> None:
    """Cross-machine tables: speedup, worst per-size ratio, gap closed, and per-batch checks."""
    records = sorted(records, key=lambda r: (MACHINE_ORDER.index(r["machine"]), MODEL_ORDER.index(r["model"]),
                                             r.get("estimate_noise", 0.0)))
    columns = [p for p in dict.fromkeys(p for r in records for p in r["policies"]) if p != "fifo"
               and all(p in r["policies"] for r in records)]
    sums = [summarise(r) for r in records]

    def label(r):
        noise = r.get("estimate_noise", 0.0)
        return f"{r['machine']}, {r['model']}" + (f", estimates off by exp(N(0, {noise:g}))" if noise else "")

    def table(title, cell):
        print(f"\n**{title}**\n")
        print("| machine, model | " + " | ".join(f"`{c}`" for c in columns) + " |")
        print("|---" * (len(columns) + 1) + "|")
        for r, s in zip(records, sums):
            print(f"| {label(r)} | " + " | ".join(cell(s["policies"][c]) for c in columns) + " |")

    table("Geometric-mean speedup over `fifo` (geometric mean of the sizes' geometric means)",
          lambda o: f"{o['speedup']:.3f}")
    table("Worst per-size ratio of speedups against max(`longest_first`, `scalpel-paper`)", lambda o: f"{o['worst_ratio']:.3f}")
    table("Share of the `longest_first`-to-search gap closed (makespan / best, geometric mean over all batches)",
          lambda o: "n/a" if math.isnan(o["gap_closed"]) else f"{100 * o['gap_closed']:.0f}%")
    table("Goals met (within 1% / above both / half the gap)",
          lambda o: "".join("Y" if v else "-" for v in o["meets"].values()))
    print("\n**The runs**\n")
    print("| machine, model | `longest_first` / best | batches per size | sizes | search proven optimal | run time |")
    print("|---|---|---|---|---|---|")
    for r, s in zip(records, sums):
        print(f"| {label(r)} | {s['policies']['longest_first']['over_best']:.4f} | {r['repeats']} | "
              f"{', '.join(map(str, s['sizes']))} | {sum(v['proven'] for v in s['per_size'].values())} of "
              f"{len(r['rows'])} | {r['seconds']:.0f} s |")
    checked = [p for p in columns if p in COMPOSITES or p in ROLLOUTS or p.startswith("scalpel") and p != "scalpel-paper"]
    if checked:
        print("\n**Batches on which a model-checked plan ended later than `longest_first` / than `scalpel-paper`**\n")
        print("| machine, model | batches | " + " | ".join(f"`{c}`" for c in checked) + " |")
        print("|---" * (len(checked) + 2) + "|")
        for r in records:
            rows = r["rows"]
            cells = []
            for p in checked:
                lf = sum(x["makespans"][p] > x["makespans"]["longest_first"] * (1 + 1e-9) for x in rows)
                sc = sum(x["makespans"][p] > x["makespans"]["scalpel-paper"] * (1 + 1e-9) for x in rows)
                worst = max(x["makespans"][p] / x["makespans"]["longest_first"] for x in rows)
                cells.append(f"{lf} / {sc} (worst {worst:.3f}x LF)")
            print(f"| {label(r)} | {len(rows)} | " + " | ".join(cells) + " |")
    proven = [(r, [x for x in r["rows"] if x["proven"]]) for r in records]
    proven = [(r, rows) for r, rows in proven if rows]
    if proven:
        print("\n**Batches where the search proved the optimum: makespan over the optimum (geometric mean), and "
              "batches not optimal**\n")
        shown = ["longest_first", "scalpel-paper", *checked]
        print("| machine, model | batches (sizes) | " + " | ".join(f"`{c}`" for c in shown) + " |")
        print("|---" * (len(shown) + 2) + "|")
        for r, rows in proven:
            cells = [f"{gmean([x['makespans'][p] / x['best'] for x in rows]):.4f}, "
                     f"{sum(x['makespans'][p] > x['best'] * (1 + 1e-9) for x in rows)} not optimal" for p in shown]
            sizes = sorted({x["tasks"] for x in rows})
            print(f"| {label(r)} | {len(rows)} ({sizes[0]}-{sizes[-1]}) | " + " | ".join(cells) + " |")


def print_report(records: list[dict]) -> None:
    if len(records) > 1:
        print_summary(records)
    for record in records:
        s = summarise(record)
        search = record["search"]
        proven = sum(v["proven"] for v in s["per_size"].values())
        total = sum(v["batches"] for v in s["per_size"].values())
        noise = record.get("estimate_noise", 0.0)
        print(f"\n### {record['machine']} ({record['spec']}), model {record['model']} "
              f"(rho = {record['rho']:.3f}, sigma = {record['sigma']:.3f})"
              + (f", run-time estimates off by exp(N(0, {noise:g}))" if noise else "") + "\n")
        print(f"{record['repeats']} batches per size, sizes {', '.join(map(str, s['sizes']))}; search: branch and bound "
              f"up to {search['bnb_max_tasks']} tasks ({search['bnb_budget']} nodes), proven optimal in {proven} of "
              f"{total} batches; local search {search['ls_evals']} evaluations"
              + (f" (tail of {search['tail_waves']} waves above 64 tasks)" if search['tail_waves'] else "")
              + f"; run {record['seconds']:.0f} s.\n")
        lf_over = s["policies"]["longest_first"]["over_best"]
        print(f"`longest_first` is {100 * (lf_over - 1):.2f}% above the search's best (geometric mean).\n")
        print("| policy | speedup over fifo (gmean) | worst per-size ratio vs max(LF, scalpel-paper) | makespan / best | "
              "gap closed | goals (1% / above both / half gap) |")
        print("|---|---|---|---|---|---|")
        for p, o in s["policies"].items():
            gap = "n/a" if math.isnan(o["gap_closed"]) else f"{100 * o['gap_closed']:.0f}%"
            meets = " / ".join("yes" if v else "no" for v in o["meets"].values())
            print(f"| `{p}` | {o['speedup']:.4f}x | {o['worst_ratio']:.4f} (at {o['worst_size']}) | "
                  f"{o['over_best']:.4f} | {gap} | {meets} |")
        print("\nPer size, speedup over fifo (gmean); last rows: the search's best and makespan / best of longest_first\n")
        header = "| policy | " + " | ".join(str(x) for x in s["sizes"]) + " |"
        print(header)
        print("|---" * (len(s["sizes"]) + 1) + "|")
        for p in record["policies"]:
            print(f"| `{p}` | " + " | ".join(f"{s['per_size'][x]['speedup'][p]:.3f}" for x in s["sizes"]) + " |")
        best_speed = [gmean([r["makespans"]["fifo"] / r["best"] for r in record["rows"] if r["tasks"] == x])
                      for x in s["sizes"]]
        print("| search best | " + " | ".join(f"{v:.3f}" for v in best_speed) + " |")
        print("| LF / best | " + " | ".join(f"{s['per_size'][x]['over_best']['longest_first']:.4f}" for x in s["sizes"]) + " |")
        print("| LF mean makespan, s | " + " | ".join(
            f"{statistics.fmean(r['makespans']['longest_first'] for r in record['rows'] if r['tasks'] == x):.1f}"
            for x in s["sizes"]) + " |")
        if all("seconds" in r for r in record["rows"]):
            print("\nPlanning and simulation cost, seconds per batch (mean; for `best-of`, `rollout-best` and "
                  "`best-of+ls200` including the rules they run; this script, pure Python)\n")
            print(header)
            print("|---" * (len(s["sizes"]) + 1) + "|")
            for p in record["policies"]:
                costs = []
                for x in s["sizes"]:
                    of = [r for r in record["rows"] if r["tasks"] == x]
                    costs.append(statistics.fmean(plan_seconds(p, r["seconds"]) for r in of))
                print(f"| `{p}` | " + " | ".join(f"{c:.3f}" for c in costs) + " |")
            print()


# --------------------------------------------------------------------------------------------

def rerun(record: dict, policies: list[str], log=print, spread: float | None = None) -> dict:
    """``record`` with ``policies`` simulated again on the same batches (same seeds, same estimate
    errors), e.g. after a policy changed; every other column is kept. The search is not run again:
    each batch's best becomes min(the recorded best, the new makespans), so a gap closed against it
    is what the record's search found, or the new plan where that was better."""
    domains, llc, pool, _ = machine_setup(record["machine"])
    model = model_named(record["model"])
    seed, noise = record["seed"], record.get("estimate_noise", 0.0)
    if spread is None:
        spread = record.get("estimate_spread", noise)
    record["estimate_spread"] = spread
    started = time.perf_counter()
    for row in record["rows"]:
        count, repeat = row["tasks"], row["repeat"]
        batch = with_estimates(batch_for(pool, count, repeat, seed), noise,
                               random.Random(seed * 8191 + count * 131 + repeat), spread)
        for policy in policies:
            began = time.perf_counter()
            row["makespans"][policy] = run_policy(policy, batch, domains, llc, model, seed + repeat)[0]
            row["seconds"][policy] = time.perf_counter() - began
        row["best"] = min(row["best"], *(row["makespans"][p] for p in policies))
    for policy in policies:
        if policy not in record["policies"]:
            record["policies"].append(policy)
    record["seconds"] += time.perf_counter() - started
    record["command"] += f" ; rerun {','.join(policies)}: " + " ".join(sys.argv)
    log(f"  {record['machine']}/{record['model']}: {', '.join(policies)} again on {len(record['rows'])} batches in "
        f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return record


def read_record(path: str) -> dict:
    """A record written by ``run`` or ``rerun``, plain or gzipped (``.gz``, as docs/data keeps them)."""
    data = Path(path).read_bytes()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    return json.loads(data)


def check(machine: str, model_name: str, batches: int) -> int:
    """drive() and FcfsEvaluator agree with simulate(); replayed dispatch orders reproduce makespans."""
    domains, llc, pool, sizes = machine_setup(machine)
    model = model_named(model_name)
    worst = 0.0
    for count in sizes[:3]:
        for repeat in range(batches):
            batch = batch_for(pool, count, repeat, 0)
            ev = FcfsEvaluator.of(batch, [len(d) for d in domains], llc, model)
            for policy in ("fifo", "longest_first", "scalpel-paper", "scalpel"):
                reference = simulate(batch, domains, llc, policy, model=model).makespan
                mine, order = run_policy(policy, batch, domains, llc, model)
                replay = ev.run(order)
                worst = max(worst, abs(mine / reference - 1), abs(replay / reference - 1))
            for policy in ("lpt-aware-10", "finish-time", "scalpel-lpt", "best-of"):
                mine, order = run_policy(policy, batch, domains, llc, model)
                worst = max(worst, abs(ev.run(order) / mine - 1))
            rng = random.Random(repeat)
            shuffled = list(range(count))
            rng.shuffle(shuffled)
            fifo_batch = [batch[i] for i in shuffled]
            reference = simulate(fifo_batch, domains, llc, "fifo", model=model).makespan
            worst = max(worst, abs(ev.run(shuffled) / reference - 1))
    print(f"{machine}/{model_name}: largest relative disagreement {worst:.2e}")
    return 0 if worst < 1e-9 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    fit = sub.add_parser("fit-xeon16", help="fit the contention model to the 16-core k-copies surface")
    fit.add_argument("--out")
    run = sub.add_parser("run", help="simulate the candidates and the search on one machine and model")
    run.add_argument("--machine", choices=list(MACHINES), required=True)
    run.add_argument("--model", default="default", help="default, calibrated (docs/data/calibration-dev-vm.json) or xeon16-fit")
    run.add_argument("--sizes", help="batch sizes, comma-separated (default: the machine's)")
    run.add_argument("--repeats", type=int, default=50)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--policies", default=",".join(DEFAULT_POLICIES))
    run.add_argument("--bnb-max-tasks", type=int, default=12)
    run.add_argument("--bnb-budget", type=int, default=20000)
    run.add_argument("--ls-evals", type=int, default=1000)
    run.add_argument("--tail-waves", type=int, default=2)
    run.add_argument("--first-repeat", type=int, default=0, help="first batch index (to split a study over runs)")
    run.add_argument("--estimate-noise", type=float, default=0.0,
                     help="run-time estimates off by exp(N(0, s)) per distinct task (0: exact)")
    run.add_argument("--estimate-spread", type=float,
                     help="the relative spread the schedulers are told their estimates have (default: the "
                          "--estimate-noise level; 0: none, the plan trusts its estimates)")
    run.add_argument("--out", required=True)
    rep = sub.add_parser("report", help="tables from run records")
    rep.add_argument("records", nargs="+")
    again = sub.add_parser("rerun", help="simulate some policies again on a record's batches (the search is kept)")
    again.add_argument("record")
    again.add_argument("--policies", required=True)
    again.add_argument("--estimate-spread", type=float,
                       help="the spread the schedulers are told (default: the record's, else its noise level)")
    again.add_argument("--out", required=True)
    chk = sub.add_parser("check", help="the fast evaluator and drive() against simulate()")
    chk.add_argument("--machine", choices=list(MACHINES), default="paper")
    chk.add_argument("--model", default="default")
    chk.add_argument("--batches", type=int, default=5)
    args = parser.parse_args(argv)

    if args.command == "fit-xeon16":
        surface = json.loads(SURFACE.read_text())
        llc = float(Topology.from_spec(MACHINES["xeon16"]["spec"]).llc_size)
        result = fit_k_copies(surface, llc)
        print(f"k-copies fit on {result['points']} points (k = 2, 4, 8, 16 copies; 2-128 MiB), LLC {llc / MiB:.0f} MiB: "
              f"rho = {result['capacity_fraction']:.4f}, sigma = {result['sensitivity']:.4f} "
              f"(effective capacity {result['effective_capacity_mib']:.0f} MiB); rms error {result['rms_error']:.4f}, "
              f"largest {result['max_abs_error']:.4f}; default model rms {result['default_rms_error']:.4f}, "
              f"dev-VM calibration rms {result['dev_vm_rms_error']:.4f}")
        print("| footprint MiB | copies | measured | model |\n|---|---|---|---|")
        for f, k, v, m in result["residuals"]:
            print(f"| {f:g} | {k} | {v:.3f} | {m:.3f} |")
        if args.out:
            Path(args.out).write_text(json.dumps(result, indent=1))
        return 0
    if args.command == "check":
        return check(args.machine, args.model, args.batches)
    if args.command == "rerun":
        record = rerun(read_record(args.record), args.policies.split(","),
                       spread=args.estimate_spread)
        Path(args.out).write_text(json.dumps(record))
        print_report([record])
        return 0
    if args.command == "report":
        print_report(merge_records([read_record(p) for p in args.records]))
        return 0
    policies = args.policies.split(",")
    for required in ("fifo", "longest_first", "scalpel-paper"):
        if required not in policies:
            policies.insert(0, required)
    for p in policies:
        if p not in POLICY_FACTORIES and p not in COMPOSITES and p not in ROLLOUTS:
            raise SystemExit(f"unknown policy {p!r}: {', '.join([*POLICY_FACTORIES, *COMPOSITES])}")
    sizes = [int(x) for x in args.sizes.split(",")] if args.sizes else None
    record = study(args.machine, args.model, policies, sizes, args.repeats, args.seed, args.bnb_max_tasks,
                   args.bnb_budget, args.ls_evals, args.tail_waves, log=print, first_repeat=args.first_repeat,
                   noise=args.estimate_noise, spread=args.estimate_spread)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record))
    print_report([record])
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
