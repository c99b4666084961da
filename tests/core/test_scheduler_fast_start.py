"""A start beside tasks that cannot overflow their LLC together is decided without the co-run model.

``Scheduler._cannot_harm`` answers what :func:`admission.decide` would answer (``FITS``) when the
head's footprint is no bet, no task carries per-key terms and every footprint together stays within
the model's capacity: a node's worth of small tasks then costs a start a sum over what runs. The
property below drives one scheduler with the shortcut and one without on the same random tasks and
completions, and every start must be the same; the count shows the model is not consulted.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core import admission
from scalpel_executor.core.scheduler import Scheduler
from scalpel_executor.core.tasks import Task

MiB = 2**20


def task_strategy():
    return st.builds(
        lambda i, footprint, runtime, key, known, terms: Task(
            i, footprint * MiB, runtime, runtime_spread=0.3 if key == "guess" else 0.1, key=key,
            footprint_known=known, interference=terms),
        st.integers(), st.sampled_from([0.05, 0.5, 2.0, 6.0, 14.0]), st.sampled_from([0.01, 0.1, 1.0]),
        st.sampled_from(["a", "b", "guess", None]), st.booleans(),
        st.sampled_from([None, None, None, (0.1, 0.2, 0.0)]))


def run(tasks: list[Task], cores: int, domains: int, seed: int, shortcut: bool) -> list[tuple]:
    """Every start (slot, task, reason) with completions drawn from ``seed``."""
    per = cores // domains
    s = Scheduler([list(range(d * per, (d + 1) * per)) for d in range(domains)], "scalpel", llc=16 * MiB)
    if not shortcut:
        s._cannot_harm = lambda head, here: False
    s.add(Task(i, t.footprint, t.runtime, runtime_spread=t.runtime_spread, key=t.key,
               footprint_known=t.footprint_known, interference=t.interference) for i, t in enumerate(tasks))
    draw, clock, starts, running = random.Random(seed), 0.0, [], []
    while True:
        for a in s.dispatch(clock):
            starts.append((a.slot.index, a.task.id, a.reason))
            running.append(a.slot.index)
        if not running:
            return starts
        clock += 0.01
        s.release(running.pop(draw.randrange(len(running))), clock)


@settings(max_examples=60, deadline=None)
@given(st.lists(task_strategy(), min_size=1, max_size=40), st.sampled_from([(2, 1), (8, 2), (16, 1)]),
       st.integers(0, 1000))
def test_the_shortcut_starts_what_the_co_run_model_starts(tasks, shape, seed):
    cores, domains = shape
    assert run(tasks, cores, domains, seed, True) == run(tasks, cores, domains, seed, False)


def test_a_node_of_small_known_tasks_starts_without_consulting_the_model(monkeypatch):
    calls = []
    decide = admission.decide
    monkeypatch.setattr(admission, "decide", lambda *a, **k: calls.append(1) or decide(*a, **k))
    s = Scheduler([list(range(128))], "scalpel", llc=32 * MiB)
    s.add(Task(i, 64 * 1024, 0.001, key="noop") for i in range(1000))
    running = [a.slot.index for a in s.dispatch(0.0)]
    for step in range(200):
        s.release(running.pop(0), 0.001 * (step + 1))
        running += [a.slot.index for a in s.dispatch(0.001 * (step + 1))]
    assert len(running) == 128 and not calls  # 200 starts beside 127 running, none weighed
    s.add([Task("large", 20 * MiB, 1.0, key="large")])  # 20 MiB beside them passes half of 32 MiB: weighed
    s.release(running.pop(0), 1.0)
    s.dispatch(1.0)
    assert calls
