"""One sentence per comparison shown: what the intervals say, on which machine, and which runs
other work disturbed. Pure, apart from :func:`running_in_vm`.

::

    machine_words(cores, domains, llc, in_vm)   "2 cores, one 32.0 MiB LLC, a VM"
    outside_noise(row)                          a ratio whose 95% interval leaves out 1
    busy_runs / busy_sentence                   the runs during which processes outside the
                                                executor under test used more than BUSY_OTHERS
                                                of each core (the executor's own threshold for
                                                not learning from a run)
    demo_verdict(split rows, machine, runs)     the demo's mechanics / policy / total in one sentence
    bench_verdicts(summary rows, machine, runs) per mix, each peer against the reference

A ratio whose interval contains 1 is *inside noise*: the repeats cannot tell the two executors
apart on this machine, however far the point estimate is from 1. The sentence says so before it
says anything else, so "1.957x" with an interval of [0.8, 3.1] is never read as a gain.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from scalpel_executor.core.units import format_size
from scalpel_executor.experiments.mix_sizing import _cpuinfo
from scalpel_executor.learning.host_model import BUSY_OTHERS

_COUNT_WORDS = {1: "one", 2: "two", 3: "three", 4: "four"}


def running_in_vm(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether the CPU flags carry ``hypervisor`` (a guest of a virtual machine)."""
    return any(line.startswith("flags") and " hypervisor" in line for line in _cpuinfo(cpuinfo))


def machine_words(cores: int, domains: int, llc: float, in_vm: bool | None) -> str:
    """The machine as the verdict names it. Pure.

    >>> machine_words(2, 1, 32 * 2**20, True)
    '2 cores, one 32.0 MiB LLC, a VM'
    >>> machine_words(16, 2, 12 * 2**20, False)
    '16 cores, two LLC domains of 12.0 MiB each, not a VM'
    """
    if domains == 1:
        cache = f"one {format_size(llc)} LLC"
    else:
        cache = f"{_COUNT_WORDS.get(domains, domains)} LLC domains of {format_size(llc)} each"
    vm = "" if in_vm is None else (", a VM" if in_vm else ", not a VM")
    return f"{cores} core{'s' if cores != 1 else ''}, {cache}{vm}"


def outside_noise(low: float, high: float) -> bool:
    """Whether a 95% interval of a ratio leaves out 1 (a measurable difference). Pure."""
    return not low <= 1.0 <= high


def busy_runs(runs: Iterable[dict]) -> list[dict]:
    """The runs (dicts with ``other_work_per_core``) during which other work used more than
    :data:`~scalpel_executor.learning.host_model.BUSY_OTHERS` of each core. Pure."""
    return [run for run in runs if (run.get("other_work_per_core") or 0.0) > BUSY_OTHERS]


def busy_sentence(runs: Sequence[dict], name_of) -> str:
    """"2 of 9 runs ran while other work used more than 0.5 of each core: htex repeat 2, ..."; where
    none did, says so; where no run was measured (no ``/proc/stat``), says that. ``name_of``
    gives a run's name for people. Pure.

    >>> runs = [{"executor": "htex", "repeat": 1, "other_work_per_core": 0.7},
    ...         {"executor": "scalpel", "repeat": 1, "other_work_per_core": 0.1}]
    >>> busy_sentence(runs, lambda r: f"{r['executor']} repeat {r['repeat'] + 1}")
    '1 of 2 runs ran while other work used more than 0.5 of each core: htex repeat 2.'
    """
    measured = [run for run in runs if run.get("other_work_per_core") is not None]
    if not measured:
        return "Other work during the runs was not measured (the host's CPU time is unreadable)."
    busy = busy_runs(measured)
    threshold = f"more than {BUSY_OTHERS:g} of each core"
    if not busy:
        return f"None of the {len(measured)} runs ran while other work used {threshold}."
    return (f"{len(busy)} of {len(measured)} runs ran while other work used {threshold}: "
            f"{', '.join(name_of(run) for run in busy)}.")


def _ratio(row: dict) -> str:
    return f"{row['ratio']:.2f}x [{row['ci_low']:.2f}, {row['ci_high']:.2f}]"


def _noise_word(row: dict) -> str:
    if row.get("paired_runs", 2) < 2:
        return "one run: no interval"
    return "outside noise" if outside_noise(row["ci_low"], row["ci_high"]) else "inside noise"


def _measured(row: dict) -> bool:
    return row.get("paired_runs", 2) >= 2 and outside_noise(row["ci_low"], row["ci_high"])


def demo_verdict(split: Sequence[dict], machine: str, runs: Sequence[dict], htex: str = "htex") -> str:
    """The demo's verdict: per total (HTEX / a policy), whether Scalpel ended the batch measurably
    sooner or later than HTEX, and how much of it mechanics and policy carry; every ratio is
    marked inside or outside noise; then the busy runs. ``split``: the rows of
    :func:`scalpel_executor.experiments.demo.split`; ``runs``: the record's runs. Pure.

    >>> rows = [{"share": "mechanics", "reference": "htex", "executor": "scalpel:fifo", "ratio": 1.1,
    ...          "ci_low": 0.9, "ci_high": 1.3, "paired_runs": 3}]
    >>> print(demo_verdict(rows, "2 cores, one 32.0 MiB LLC, a VM", []))  # doctest: +NORMALIZE_WHITESPACE
    On this machine (2 cores, one 32.0 MiB LLC, a VM): no measurable difference from HTEX:
    every interval contains 1 (mechanics 1.10x [0.90, 1.30]).
    """
    head = f"On this machine ({machine}): "
    if not split:
        return head + "no comparison was run." + _busy_tail(runs, htex)
    mechanics = next((row for row in split if row["share"] == "mechanics"), None)
    policies = {row["executor"]: row for row in split if row["share"] == "policy"}
    # the comparisons the verdict leads with: each policy against HTEX; without the policies, the
    # mechanics; without HTEX (--no-htex), each policy against the mechanics
    totals = [row for row in split if row["share"] == "total"] or ([mechanics] if mechanics else []) \
        or list(policies.values())
    against = "HTEX" if totals[0]["reference"] == htex else totals[0]["reference"]
    if not any(_measured(row) for row in split):
        listed = ", ".join(f"{row['share']} {_ratio(row)}" for row in split)
        return head + f"no measurable difference from {against}: every interval contains 1 ({listed})." + \
            _busy_tail(runs, htex)
    sentences = []
    for total in totals:
        name = "Scalpel's mechanics" if total is mechanics else f"Scalpel ({total['executor']})"
        other = "HTEX" if total["reference"] == htex else total["reference"]
        interval = f"[{total['ci_low']:.2f}, {total['ci_high']:.2f}]"
        if _measured(total):
            faster = total["ratio"] > 1
            words = (f"{name} ended the batch {total['ratio']:.2f}x {'faster' if faster else 'slower'} than {other} "
                     f"{interval}: a measurable {'gain' if faster else 'loss'}")
        else:
            words = f"{name} ended the batch {total['ratio']:.2f}x {other}'s speed {interval}: no measurable difference"
        parts = [row for row in (mechanics, policies.get(total["executor"]))
                 if row is not None and row is not total and total["share"] == "total"]
        if parts:
            shown = "; ".join(f"{row['share']} {_ratio(row)}, {_noise_word(row)}" for row in parts)
            words += f"; {_parts_lead(parts)} ({shown})"
        sentences.append(words)
    return head + ". ".join(sentences) + "." + _busy_tail(runs, htex)


def _parts_lead(parts: Sequence[dict]) -> str:
    """Which of a total's parts (mechanics, policy) the repeats can tell from 1."""
    measured = [row["share"] for row in parts if _measured(row)]
    if not measured:
        return "neither part alone is outside noise"
    if len(measured) == len(parts) and len(parts) > 1:
        return "both parts are outside noise"
    return f"of its parts only {measured[0]} is outside noise"


def _busy_tail(runs: Sequence[dict], htex: str) -> str:
    if not runs:
        return ""
    return " " + busy_sentence(runs, lambda run: f"{'HTEX' if run['executor'] == htex else run['executor']} "
                                                f"repeat {run['repeat'] + 1}")


def bench_verdicts(summary: Sequence[dict], machine: str, runs: Sequence[dict], reference: str) -> list[str]:
    """``scalpel bench``'s verdicts: per mix, one sentence naming which peers differ measurably
    from ``reference`` and which are inside noise, then one on the busy runs. ``summary``: the
    rows of :func:`~scalpel_executor.experiments.bench.stats.summarise`; ``runs``: the record's runs
    (dicts with ``peer``, ``mix``, ``repeat``, ``other_work_per_core``). Pure.

    >>> rows = [{"mix": "light", "peer": "threads", "vs_reference": 1.02, "ci_low": 0.97, "ci_high": 1.08,
    ...          "paired_runs": 3}]
    >>> print(bench_verdicts(rows, "2 cores, one 32.0 MiB LLC, a VM", [], "htex-block")[0])
    ... # doctest: +NORMALIZE_WHITESPACE
    light, on this machine (2 cores, one 32.0 MiB LLC, a VM): no measurable difference from
    htex-block: every interval contains 1 (threads 1.02x [0.97, 1.08]).
    """
    sentences = []
    for mix in dict.fromkeys(row["mix"] for row in summary):
        compared = [row for row in summary if row["mix"] == mix and row["peer"] != reference and "vs_reference" in row]
        if not compared:
            continue
        rows = [{**row, "ratio": row["vs_reference"]} for row in compared]
        head = f"{mix}, on this machine ({machine}): "
        measured = [row for row in rows if _measured(row)]
        noise = [row for row in rows if not _measured(row)]
        if not measured:
            listed = ", ".join(f"{row['peer']} {_ratio(row)}" for row in noise)
            sentences.append(head + f"no measurable difference from {reference}: every interval contains 1 "
                                    f"({listed}).")
            continue
        said = "; ".join(f"{row['peer']} {'faster' if row['ratio'] > 1 else 'slower'} than {reference} "
                         f"{_ratio(row)}, outside noise" for row in measured)
        if noise:
            said += f"; inside noise: {', '.join(row['peer'] + ' ' + _ratio(row) for row in noise)}"
        sentences.append(head + said + ".")
    if runs:
        sentences.append(busy_sentence(runs, lambda run: f"{run['peer']} on {run['mix']} repeat {run['repeat'] + 1}"))
    return sentences
