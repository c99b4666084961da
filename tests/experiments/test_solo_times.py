"""Solo times kept per machine: distinct cases run alone once, reused by later runs, taught to each
run's fresh profile store, and run again for another machine or when asked."""

from __future__ import annotations

import pytest

from scalpel_executor.core.domains import Topology
from scalpel_executor.experiments import mix_sizing
from scalpel_executor.experiments.apps import timed_kernel
from scalpel_executor.experiments.mix_sizing import machine_fingerprint, steps_timed_here
from scalpel_executor.experiments.solo_times import (SoloTimes, distinct_cases, kept_step_seconds, plan_solo,
                                                     run_solo)
from scalpel_executor.learning.keys import app_name, profile_keys
from scalpel_executor.learning.store import Observation, ProfileStore
from scalpel_executor.workloads.kernels import KernelCase, contention_mix

MiB = 2**20
MACHINE = "AMD EPYC 7763 64-Core Processor; 16 cores in 1 LLC domain(s) of 32.0 MiB"
#: What a solo run of a case measures in the fake pass: 1 ms per step, a footprint of its size.
PER_STEP = 0.001


def batch() -> list[KernelCase]:
    """The demo's batch on 16 cores: 64 spmv tasks, two sizes, run times jittered by ±10%."""
    return contention_mix(32 * MiB, 16, 64, scale="full", seed=0)


class FakePass:
    """The harness's solo pass without Parsl: it counts the cases it ran, and teaches the store
    what the executor's probe would (a run time and a footprint under each case's profile key)."""

    def __init__(self, store: str):
        self.store, self.ran = store, []

    def __call__(self, cases):
        self.ran.extend(cases)
        with ProfileStore(self.store) as profiles:
            for case in cases:
                keys = profile_keys(timed_kernel, (case.kernel, case.size, case.steps))
                profiles.record([Observation(keys.shape, app_name(timed_kernel), case.steps * PER_STEP + 0.2,
                                             float(case.footprint_bytes), shape=keys.shape, exact=keys.exact)])
        return {case.name: case.steps * PER_STEP for case in cases}


def one_run(tmp_path, kept, name, machine=MACHINE, fresh=False, cases=None):
    """One demo's solo pass into its own fresh profile store: (the fake pass, the outcome, the store path)."""
    store = str(tmp_path / f"{name}.sqlite")
    fake = FakePass(store)
    plan = plan_solo(cases or batch(), kept, machine, fresh=fresh)
    return fake, run_solo(plan, kept, store, fake), store


def test_the_batch_has_a_few_distinct_cases_one_per_profile_key():
    cases = batch()
    distinct = distinct_cases(cases)
    keys = {profile_keys(timed_kernel, (c.kernel, c.size, c.steps)).exact for c in cases}
    assert len(distinct) == len(keys) and 2 <= len(distinct) <= 6 < len(set(cases))
    for solo in distinct:  # each stands for the tasks of its key, with their median steps
        members = sorted(c.steps for c in cases if (c.kernel, c.size) == (solo.case.kernel, solo.case.size)
                         and profile_keys(timed_kernel, (c.kernel, c.size, c.steps)).exact == solo.exact)
        assert solo.case.steps == members[(len(members) - 1) // 2]


def test_the_pass_runs_each_distinct_case_once_and_a_second_run_none(tmp_path):
    kept = SoloTimes(tmp_path / "kept.sqlite")
    first, solo, _ = one_run(tmp_path, kept, "first")
    distinct = distinct_cases(batch())
    assert sorted(c.name for c in first.ran) == sorted(s.case.name for s in distinct)  # each once
    assert (solo.measured, solo.reused) == (len(distinct), 0)
    second, again, store = one_run(tmp_path, kept, "second")
    assert second.ran == [] and (again.measured, again.reused) == (0, len(distinct))
    for case in batch():  # every task's solo time: its steps at its kernel and size's seconds per step
        assert again.seconds_of(case) == pytest.approx(case.steps * PER_STEP)
        assert again.seconds_of(case) == pytest.approx(solo.seconds_of(case))
    # the second run's fresh store learned every key's footprint and run time as the first run's did
    with ProfileStore(str(tmp_path / "first.sqlite")) as taught, ProfileStore(store) as reused:
        first_profiles = {p.key: (p.footprint, p.runtime) for p in taught.profiles()}
        assert {p.key: (p.footprint, p.runtime) for p in reused.profiles()} == first_profiles
    assert len(first_profiles) == len({s.shape for s in distinct})


def test_new_cases_are_run_and_kept_ones_reused(tmp_path):
    kept = SoloTimes(tmp_path / "kept.sqlite")
    one_run(tmp_path, kept, "small", cases=batch()[:8])
    fake, solo, _ = one_run(tmp_path, kept, "whole")
    known = {s.ident for s in distinct_cases(batch()[:8])}
    assert {s.ident for s in distinct_cases(fake.ran)}.isdisjoint(known)
    assert solo.reused == len(known) and solo.measured + solo.reused == len(distinct_cases(batch()))


def test_another_machine_or_fresh_solo_runs_every_case_again(tmp_path):
    kept = SoloTimes(tmp_path / "kept.sqlite")
    one_run(tmp_path, kept, "first")
    count = len(distinct_cases(batch()))
    other, solo, _ = one_run(tmp_path, kept, "other", machine=MACHINE.replace("16 cores", "64 cores"))
    assert len(other.ran) == count and solo.reused == 0
    fresh, solo, _ = one_run(tmp_path, kept, "fresh", fresh=True)
    assert len(fresh.ran) == count and (solo.measured, solo.reused) == (count, 0)
    again, solo, _ = one_run(tmp_path, kept, "again")
    assert again.ran == [] and solo.reused == count


def test_kept_times_survive_a_reopened_file(tmp_path):
    path = tmp_path / "kept.sqlite"
    kept = SoloTimes(path)
    one_run(tmp_path, kept, "first")
    kept.close()
    assert len(SoloTimes(path).rows(MACHINE)) == len(distinct_cases(batch()))
    assert SoloTimes(path).rows("another machine") == {}


def test_sizing_times_its_steps_once_per_machine(tmp_path, monkeypatch):
    probes = []

    def probe(case, target, probe_seconds=None):
        probes.append(case)
        return KernelCase(case.kernel, case.size, max(1, round(target / 0.01)))

    monkeypatch.setattr(mix_sizing, "scale_to_seconds", probe)
    kept = SoloTimes(tmp_path / "kept.sqlite")
    mix = batch()
    first = steps_timed_here(mix, kept_step_seconds(kept, MACHINE)(mix))
    assert len(probes) == 3 * len({(c.kernel, c.size) for c in mix})  # three probes per kernel and size
    probes.clear()
    assert steps_timed_here(mix, kept_step_seconds(kept, MACHINE)(mix)) == first and probes == []
    kept_step_seconds(kept, MACHINE, fresh=True)(mix)
    assert len(probes) == 6


def test_the_fingerprint_names_the_cpu_model_cores_and_cache(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC 7763 64-Core Processor\nflags\t\t: fpu\n"
                       "processor\t: 1\nmodel name\t: AMD EPYC 7763 64-Core Processor\n")
    sixteen = Topology.from_cpu_lists([list(range(16))], llc_size=32 * MiB)
    assert machine_fingerprint(sixteen, str(cpuinfo)) == MACHINE
    other = Topology.from_cpu_lists([list(range(8)), list(range(8, 16))], llc_size=32 * MiB)
    assert machine_fingerprint(other, str(cpuinfo)) != MACHINE
