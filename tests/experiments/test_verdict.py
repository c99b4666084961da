"""The verdict sentences of ``scalpel demo`` and ``scalpel bench``, from hand-made numbers, and the
other-work figure of a run (no timing is asserted)."""

from __future__ import annotations

import os

from scalpel_executor.experiments.bench.verdict import (
    bench_verdicts,
    busy_runs,
    busy_sentence,
    demo_verdict,
    machine_words,
    outside_noise,
)
from scalpel_executor.experiments.harness import OtherWork, executor_roots, tree_cpu_seconds
from scalpel_executor.learning.host_model import BUSY_OTHERS

MACHINE = machine_words(2, 1, 32 * 2**20, True)


def share(name, ratio, low, high, executor="scalpel:scalpel", reference="scalpel:fifo", runs=3):
    return {"share": name, "reference": reference, "executor": executor, "ratio": ratio, "ci_low": low,
            "ci_high": high, "paired_runs": runs}


def mechanics(ratio, low, high):
    return share("mechanics", ratio, low, high, executor="scalpel:fifo", reference="htex")


def total(ratio, low, high):
    return share("total", ratio, low, high, reference="htex")


def run(executor, repeat, others):
    return {"executor": executor, "repeat": repeat, "other_work_per_core": others}


def test_the_machine_is_named_by_cores_llc_domains_size_and_vm():
    assert MACHINE == "2 cores, one 32.0 MiB LLC, a VM"
    assert machine_words(16, 2, 12 * 2**20, False) == "16 cores, two LLC domains of 12.0 MiB each, not a VM"
    assert machine_words(4, 1, 8 * 2**20, None) == "4 cores, one 8.0 MiB LLC"


def test_an_interval_that_contains_1_is_inside_noise():
    assert not outside_noise(0.8, 3.1)
    assert not outside_noise(1.0, 1.2)
    assert outside_noise(1.05, 1.20)
    assert outside_noise(0.7, 0.95)


def test_every_interval_containing_1_says_no_measurable_difference_whatever_the_point():
    rows = [mechanics(1.5, 0.9, 2.4), share("policy", 1.3, 0.8, 1.9), total(1.957, 0.8, 3.1)]
    sentence = demo_verdict(rows, MACHINE, [])
    assert sentence.startswith("On this machine (2 cores, one 32.0 MiB LLC, a VM): no measurable difference "
                               "from HTEX: every interval contains 1")
    assert "total 1.96x [0.80, 3.10]" in sentence and "mechanics 1.50x" in sentence and "policy 1.30x" in sentence
    assert "faster" not in sentence


def test_a_total_outside_noise_is_named_a_gain_with_the_part_that_carries_it():
    rows = [mechanics(1.11, 1.04, 1.19), share("policy", 1.01, 0.97, 1.04), total(1.12, 1.05, 1.20)]
    sentence = demo_verdict(rows, MACHINE, [])
    assert "Scalpel (scalpel:scalpel) ended the batch 1.12x faster than HTEX [1.05, 1.20]: a measurable gain" \
        in sentence
    assert "of its parts only mechanics is outside noise" in sentence
    assert "mechanics 1.11x [1.04, 1.19], outside noise" in sentence
    assert "policy 1.01x [0.97, 1.04], inside noise" in sentence


def test_a_total_inside_noise_beside_a_part_outside_says_both():
    rows = [mechanics(0.90, 0.85, 0.95), share("policy", 1.15, 1.05, 1.25), total(1.03, 0.95, 1.10)]
    sentence = demo_verdict(rows, MACHINE, [])
    assert "1.03x HTEX's speed [0.95, 1.10]: no measurable difference" in sentence
    assert "both parts are outside noise" in sentence
    assert "mechanics 0.90x [0.85, 0.95], outside noise" in sentence
    assert "policy 1.15x [1.05, 1.25], outside noise" in sentence


def test_a_measurable_loss_is_called_slower():
    sentence = demo_verdict([mechanics(0.8, 0.7, 0.9)], MACHINE, [])
    assert "Scalpel's mechanics ended the batch 0.80x slower than HTEX [0.70, 0.90]: a measurable loss" in sentence


def test_without_htex_the_policy_is_judged_against_the_mechanics():
    sentence = demo_verdict([share("policy", 1.2, 1.1, 1.3)], MACHINE, [])
    assert "Scalpel (scalpel:scalpel) ended the batch 1.20x faster than scalpel:fifo [1.10, 1.30]" in sentence
    assert "no measurable difference from scalpel:fifo" in demo_verdict([share("policy", 1.0, 0.9, 1.1)], MACHINE, [])


def test_busy_runs_are_those_above_the_executors_own_threshold_and_are_named():
    runs = [run("htex", 0, 0.1), run("htex", 1, BUSY_OTHERS + 0.2), run("scalpel:fifo", 0, BUSY_OTHERS),
            run("scalpel:scalpel", 2, 0.9), run("scalpel:scalpel", 0, None)]
    assert [r["repeat"] for r in busy_runs(runs)] == [1, 2]
    sentence = demo_verdict([mechanics(1.0, 0.9, 1.1)], MACHINE, runs)
    assert sentence.endswith(f"2 of 4 runs ran while other work used more than {BUSY_OTHERS:g} of each core: "
                             "HTEX repeat 2, scalpel:scalpel repeat 3.")


def test_no_busy_run_and_no_measurement_are_said_as_such():
    assert busy_sentence([run("htex", 0, 0.0)], str).startswith("None of the 1 runs")
    assert "not measured" in busy_sentence([run("htex", 0, None)], str)


def test_bench_verdicts_name_the_peers_outside_noise_and_those_inside():
    rows = [{"mix": "contention", "peer": "htex-block", "vs_reference": 1.0, "ci_low": 1.0, "ci_high": 1.0,
             "paired_runs": 3},
            {"mix": "contention", "peer": "scalpel:scalpel", "vs_reference": 1.2, "ci_low": 1.1, "ci_high": 1.3,
             "paired_runs": 3},
            {"mix": "contention", "peer": "threads", "vs_reference": 0.98, "ci_low": 0.9, "ci_high": 1.05,
             "paired_runs": 3},
            {"mix": "light", "peer": "threads", "vs_reference": 1.02, "ci_low": 0.97, "ci_high": 1.08,
             "paired_runs": 3}]
    runs = [{"peer": "threads", "mix": "light", "repeat": 1, "other_work_per_core": 0.8}]
    contention, light, busy = bench_verdicts(rows, MACHINE, runs, "htex-block")
    assert contention == ("contention, on this machine (2 cores, one 32.0 MiB LLC, a VM): scalpel:scalpel faster "
                          "than htex-block 1.20x [1.10, 1.30], outside noise; inside noise: threads 0.98x "
                          "[0.90, 1.05].")
    assert "no measurable difference from htex-block: every interval contains 1" in light
    assert busy.startswith("1 of 1 runs") and busy.endswith("threads on light repeat 2.")


def test_the_executors_own_processes_are_not_other_work():
    """A busy child of this process is the executor's own work: its CPU time is in the tree."""

    class NoProvider:
        executor = None

    assert executor_roots(NoProvider()) == [os.getpid()]
    before = sum(tree_cpu_seconds([os.getpid()]).values())
    sum(i * i for i in range(300_000))
    assert sum(tree_cpu_seconds([os.getpid()]).values()) >= before
    meter = OtherWork(NoProvider(), 2)
    meter.start()
    others = meter.stop()
    assert others is None or others >= 0.0


def test_a_providers_launched_process_is_a_root():
    class Provider:
        resources = {"1": {"remote_pid": 4242}, "2": {"remote_pid": None}}

    class Executor:
        provider = Provider()

    class Submitter:
        executor = Executor()

    assert executor_roots(Submitter()) == [os.getpid(), 4242]
