"""The node check: what only a real node shows, measured in one command within a time budget.

``python benchmarks/node_check.py`` is its command line; this module is the logic::

    run_node_check(plan, out)
      machine_facts()                     CPU model, cores, LLC domains (host.sysfs), Python, Parsl
      throughput   (share THROUGHPUT_SHARE of the budget)
        round 1, 2, ... while the next round fits its share (each width: htex, scalpel (the defaults),
        threads, scalpel-pin (pin_driver="auto"), scalpel-unpinned (pin_driver=None),
        each sample a fresh interpreter: experiments.interleaved.width_contenders)
      streams_check (one repetition, about a minute on 16 cores; plan.streams False: skipped)
        the streaming mix at full width (experiments.streaming_mix): a stream on every core of
        2 x 64 MiB, past any LLC, listed before as many compute-bound scores; what a crowd of
        streams costs here (pinned processes); then HTEX, Scalpel's first run on an emptied store,
        plan.streams_train more, and the learned run: makespans, stream co-run seconds, what the
        learned run planned with
      demo_check   (plan.demo only) ``scalpel demo`` with its defaults, timed as a whole process, on a
                   profile store of its own under <out>/demo/ (the issue's goal: 4 minutes on 16 cores)
      bench        (the rest of the budget)
        repeats = what fits, from the mixes' estimated seconds (estimate_bench_seconds)
        experiments.bench.run.run_bench: the contention mix and the kernel suite (suite-2x) under
        htex-block, scalpel:longest_first and scalpel, interleaved, at this machine's full width
      <out>/node-check.json (everything), <out>/node-check.md (the tables), <out>/bench/ (bench's own)
      <out>/solo-times.db   the bench's solo times on this machine (SOLO_STORE): a check run again
                            with the same <out> reuses them; the user's profile store is not written

Widths default to 4 and 16 workers, capped at the machine's cores (a 2-core machine measures 2):
the no-op figures of a wider node are what a 2-core development machine cannot give, since its
workers, driver and manager compete for two CPUs. The budget is kept by choosing how many rounds
and repetitions to run, not by cutting a run short: a round that has started finishes, so a
slow machine may overrun it by one throughput round or by the bench estimate's error.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from scalpel_executor.core.domains import Topology
from scalpel_executor.experiments.bench.report import summary_table
from scalpel_executor.experiments.harness import fresh_store
from scalpel_executor.experiments.bench.run import run_bench
from scalpel_executor.experiments.interleaved import (
    machine_cores,
    good_samples,
    machine_facts,
    run_sample,
    width_contenders,
    width_lines,
    width_summary,
)
from scalpel_executor.experiments.mix_sizing import machine_llc
from scalpel_executor.experiments.plans import BENCH, with_given
from scalpel_executor.experiments.records import scratch_folder, write_record
from scalpel_executor.experiments.streaming_mix import (HTEX, StreamingMix, calibrated, crowd_seconds,
                                                        learned_planned_with, one_run, scalpel_runs)
from scalpel_executor.host.sysfs import detect_topology
from scalpel_executor.workloads.kernels import contention_mix, suite

#: The record's format name.
FORMAT = "scalpel-node-check/1"
#: The file under the output folder that keeps the bench's solo times (a benchmark never writes the
#: user's profile store; a check run again into the same folder skips the cases it timed).
SOLO_STORE = "solo-times.db"
#: Share of the budget the no-op rounds may take; the bench takes the rest.
THROUGHPUT_SHARE = 0.4
#: Bench repetitions at most (its bootstrap intervals need a few; more cost minutes).
MAX_REPEATS = 5
#: Seconds a peer takes to start and warm up, before any sample says (a 16-core node: about 2 s).
PEER_START_GUESS = 5.0
#: What the demo's whole process may take on a 16-core node (the goal it is timed against).
DEMO_GOAL_SECONDS = 240.0
#: Lines of the demo's own output the record keeps (its closing table).
DEMO_TAIL_LINES = 40
#: Seconds the streams check waits for the detached refit a Scalpel run starts, before going on.
STREAMS_REFIT_TIMEOUT = 60.0


@dataclass(frozen=True)
class NodeCheckPlan:
    """One node check: the widths and sizes of the no-op rounds, the bench's mixes and peers, the budget."""

    widths: tuple[int, ...]
    budget: float = 420.0  # seconds for the whole check
    tasks: int = 3000  # no-op tasks per throughput sample
    pings: int = 200  # lone tasks per round-trip sample
    max_rounds: int = 5  # no-op rounds at most
    mixes: tuple[str, ...] = ("contention", "suite-2x")
    peers: tuple[str, ...] = ("htex-block", "scalpel:longest_first", "scalpel:scalpel")
    scale: str = "bench"  # run times of the bench's kernel cases (plans.SCALES)
    min_repeats: int = 1
    streams: bool = True  # run the streams check
    streams_mib: int = 128  # each stream's two arrays together: 2 x 64 MiB, past any node's LLC
    stream_seconds: float = 1.0  # a stream's and a score's run time alone
    streams_train: int = 1  # Scalpel runs between the first and the learned one
    demo: bool = False  # time `scalpel demo` with its defaults as a whole process (demo_check)

    def __post_init__(self) -> None:
        if not self.widths or any(not isinstance(w, int) or w < 1 for w in self.widths):
            raise ValueError(f"widths must be positive worker counts, got {self.widths!r}")
        if not self.budget > 0:
            raise ValueError(f"budget must be a positive number of seconds, got {self.budget!r}")
        for name in ("tasks", "pings", "max_rounds", "min_repeats", "streams_mib"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)!r}")
        if not self.stream_seconds > 0 or self.streams_train < 0:
            raise ValueError(f"stream_seconds must be positive and streams_train at least 0, got "
                             f"{self.stream_seconds!r} and {self.streams_train!r}")


def default_widths(cores: int) -> tuple[int, ...]:
    """4 and 16 workers, each capped at ``cores``: (4, 16) on 16 cores or more, (2,) on 2.

    >>> default_widths(16), default_widths(8), default_widths(2)
    ((4, 16), (4, 8), (2,))
    """
    return tuple(sorted({min(width, cores) for width in (4, 16)}))


def default_plan(cores: int | None = None, *, quick: bool = False, budget: float | None = None) -> NodeCheckPlan:
    """The check for a machine of ``cores`` cores (None: this one's, one per physical core);
    ``quick``: about a minute on two cores, a smoke test of every piece whose figures mean little
    (one width, small samples, quick kernels)."""
    cores = len(machine_cores()) if cores is None else cores
    if quick:
        return NodeCheckPlan(widths=(min(2, cores),), budget=budget or 60.0, tasks=300, pings=30, max_rounds=1,
                             scale="quick", streams_mib=6, stream_seconds=0.3, streams_train=0)
    return NodeCheckPlan(widths=default_widths(cores), budget=budget or NodeCheckPlan.budget)


def estimate_bench_seconds(plan: NodeCheckPlan, llc: int, cores: int, peer_start: float) -> tuple[float, float]:
    """Seconds of the bench's set-up (timing the contention cases here, the oracle, the solo pass:
    bench runs it once per invocation, and less where this machine kept earlier solo times) and of
    one of its repetitions (every peer's start and mixes), from the cases' estimated solo times: a
    mix is taken to last its work over the cores, 1.3 times for contention, plus a second. Coarse:
    the cases are sized from a rate table, not from this machine."""
    seconds: dict[str, list[float]] = {}
    for name in plan.mixes:
        if name == "contention":
            cases = contention_mix(llc, cores, 4 * cores, scale=plan.scale, seed=BENCH.seed)
            seconds[name] = [case.estimated_seconds() for case in cases]
        elif name.startswith("suite-"):
            pool = suite(llc, cores, plan.scale, seed=BENCH.seed)
            factor = int(name.split("-")[1].rstrip("x"))
            mean = sum(case.estimated_seconds() for case in pool) / len(pool)
            seconds[name] = [mean] * min(factor * cores, len(pool))
    solo = sum(sum(values) for values in seconds.values())
    mixes = sum(1.3 * sum(values) / cores + 1.0 for values in seconds.values())
    setup = sum(seconds.get("contention", ())) / 4 + 10.0 + solo
    return setup, len(plan.peers) * (peer_start + mixes)


def run_node_check(plan: NodeCheckPlan, out: Path, *, printer: Callable[[str], None] = print) -> dict:
    """Run ``plan`` (see the module docstring), write ``<out>/node-check.json`` and
    ``<out>/node-check.md``; returns the record."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    machine = machine_facts()
    printer(f"machine: {machine['cpu_model']}; {machine['cpus']} CPUs, {machine['cores']} cores; "
            f"{len(machine['llc_domains'])} LLC domain(s); Python {machine['python']}, Parsl {machine['parsl']}; "
            f"budget {plan.budget:.0f} s")
    record: dict = {"format": FORMAT, "machine": machine, "plan": asdict(plan)}
    record["throughput"] = throughput_rounds(plan, plan.budget * THROUGHPUT_SHARE, printer)
    _save(record, out, started)
    if plan.streams:
        try:
            record["streams"] = streams_check(plan, printer)
        except Exception as error:  # noqa: BLE001 - a lent node's minutes are few: the bench still runs
            record["streams"] = {"error": f"{type(error).__name__}: {error}"[-3000:]}
            printer(f"streams: FAILED ({record['streams']['error'].splitlines()[-1]}); the bench goes on")
        _save(record, out, started)
    if plan.demo:
        record["demo"] = demo_check(out / "demo", printer)
        _save(record, out, started)

    topology = detect_topology()
    cores = len(topology.cpus)
    llc, llc_note = machine_llc(topology, None)
    starts = [s["start_seconds"] for width in record["throughput"]["widths"].values()
              for name, samples in width["samples"].items() if name != "threads" for s in good_samples(samples)]
    peer_start = max(starts) if starts else PEER_START_GUESS
    setup, per_repeat = estimate_bench_seconds(plan, llc, cores, peer_start)
    left = plan.budget - (time.monotonic() - started)
    repeats = max(plan.min_repeats, min(MAX_REPEATS, math.floor((left - setup) / per_repeat)))
    printer(f"bench: {', '.join(plan.mixes)} under {', '.join(plan.peers)} on {cores} cores, {repeats} "
            f"repetition(s) (estimated {setup:.0f} s set-up and {per_repeat:.0f} s each; {max(left, 0):.0f} s left)")
    bench_plan = with_given(BENCH, mixes=plan.mixes, peers=plan.peers, repeats=repeats, scale=plan.scale,
                            resamples=2000)
    bench_started = time.monotonic()
    bench = run_bench(bench_plan, out=out / "bench", printer=printer, solo_store=out / SOLO_STORE)
    record["bench"] = {"repeats": repeats, "estimated_seconds": setup + repeats * per_repeat,
                       "seconds": time.monotonic() - bench_started, "llc": llc, "llc_note": llc_note,
                       "summary": bench["summary"], "files": bench["files"]}
    _save(record, out, started)
    return record


def demo_check(folder: Path, printer: Callable[[str], None] = print, *,
               command: Sequence[str] | None = None) -> dict:
    """``scalpel demo`` with its defaults, timed as a whole process (interpreter start to exit), its
    output and profile store in ``folder`` (``SCALPEL_PROFILE_STORE`` points there: the user's store
    is not written). ``command``: another command line in its place (tests). Returns ``{"wall_seconds",
    "returncode", "estimated_seconds", "took_seconds", "tail"}``, the demo's own figures from its
    ``scalpel-demo.json`` (None where it wrote none)."""
    folder.mkdir(parents=True, exist_ok=True)
    command = list(command or [sys.executable, "-m", "scalpel_executor.cli", "demo", "--out", str(folder)])
    printer(f"demo: {' '.join(command[-4:])}, timed as a whole process (goal {DEMO_GOAL_SECONDS:.0f} s on 16 cores)")
    env = dict(os.environ, SCALPEL_PROFILE_STORE=str(folder / "profiles.sqlite"))
    began = time.monotonic()
    run = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - began
    try:
        seconds = json.loads((folder / "scalpel-demo.json").read_text()).get("seconds") or {}
    except (OSError, ValueError):
        seconds = {}
    output = (run.stdout + run.stderr).splitlines()
    result = {"wall_seconds": wall, "returncode": run.returncode, "estimated_seconds": seconds.get("estimated"),
              "took_seconds": seconds.get("took"), "tail": output[-DEMO_TAIL_LINES:]}
    printer(f"demo: {'took' if run.returncode == 0 else f'FAILED (exit {run.returncode}) after'} {wall:.0f} s "
            f"as a whole process" + (f" (its own estimate {result['estimated_seconds']:.0f} s)"
                                     if result["estimated_seconds"] is not None else ""))
    return result


def throughput_rounds(plan: NodeCheckPlan, share: float, printer: Callable[[str], None] = print) -> dict:
    """Interleaved no-op rounds over every width (each round: every width's HTEX, Scalpel, Scalpel
    with ``pin_driver="auto"`` and ThreadPool samples), as many as fit ``share`` seconds (at least
    one, at most ``max_rounds``):
    ``{"rounds": n, "seconds": s, "widths": {width: {"samples": ..., "summary": ...}}}``."""
    contenders = {width: width_contenders(width, pin_driver=True) for width in plan.widths}
    samples: dict[int, dict[str, list[dict]]] = {width: {name: [] for name in c} for width, c in contenders.items()}
    started = time.monotonic()
    rounds = 0
    with scratch_folder("scalpel-node-check-") as folder:
        while rounds < plan.max_rounds:
            round_started = time.monotonic()
            for width, by_name in contenders.items():
                for name, contender in by_name.items():
                    try:
                        sample = run_sample(contender, plan.tasks, plan.pings, os.path.join(folder, str(width)))
                    except (RuntimeError, subprocess.TimeoutExpired) as error:  # kept, reported, the rest go on
                        sample = {"error": str(error)[-3000:]}
                        printer(f"  round {rounds + 1} {width:4d} workers {name:8s} FAILED: "
                                f"{sample['error'].strip().splitlines()[-1]}")
                    else:
                        printer(f"  round {rounds + 1} {width:4d} workers {name:8s} {sample['throughput']:7.0f} "
                                f"tasks/s  round trip {sample['round_trip_median'] * 1e3:6.2f} ms")
                    samples[width][name].append(sample)
            rounds += 1
            spent, last = time.monotonic() - started, time.monotonic() - round_started
            if spent + last > share:
                break
    widths = {str(width): {"samples": by_name, "summary": width_summary(by_name)} for width, by_name in samples.items()}
    return {"rounds": rounds, "seconds": time.monotonic() - started, "widths": widths}


def streams_check(plan: NodeCheckPlan, printer: Callable[[str], None] = print) -> dict:
    """The streaming mix at this machine's full width, one repetition (see the module docstring):
    ``{"mix", "crowd", "runs", "summary", "seconds"}``; the runs' store is a temporary one."""
    started = time.monotonic()
    detected = detect_topology()
    llc, llc_note = machine_llc(detected, None)
    topology = Topology.from_cpu_lists([d.cpus for d in detected.domains], llc_size=llc)
    cpus = topology.cpus
    if len(cpus) < 2:
        printer("streams: skipped, it needs at least two cores")
        return {"skipped": "fewer than two cores"}
    mix = calibrated(StreamingMix(streams=len(cpus), scores=len(cpus), stream_mib=plan.streams_mib),
                     plan.stream_seconds)
    crowd = crowd_seconds(mix, cpus)
    printer(f"streams: {mix.streams} streams of {mix.stream_mib} MiB ({mix.passes} passes) listed before "
            f"{mix.scores} scores ({mix.spectra} spectra); a stream alone {crowd['stream_alone']:.2f} s, one on "
            f"each of {len(cpus)} cores {crowd['slowdown']['streams_together']:.2f}x, a score among them "
            f"{crowd['slowdown']['score_among_streams']:.2f}x")
    runs = []
    with scratch_folder("scalpel-node-streams-") as folder:
        store = fresh_store(Path(folder) / "store")
        for number, (peer, kind) in enumerate([(HTEX, "htex"), *scalpel_runs(plan.streams_train)]):
            try:
                runs.append(one_run(peer, kind, 0, Path(folder) / f"{number}-{kind}", len(cpus), topology, store,
                                    mix, refit_timeout=STREAMS_REFIT_TIMEOUT, printer=printer))
            except (RuntimeError, TimeoutError, OSError) as error:  # kept, reported, the rest go on
                printer(f"  {kind:8s} FAILED: {str(error).strip().splitlines()[-1] if str(error).strip() else error!r}")
                runs.append({"peer": peer, "kind": kind, "error": str(error)[-3000:]})
    done = [r for r in runs if "error" not in r]
    summary = {r["kind"]: {"makespan": r["makespan"], "stream_corun_seconds": r["stream_corun_seconds"]}
               for r in done if r["kind"] != "train"}
    return {"mix": asdict(mix), "llc": llc, "llc_note": llc_note, "crowd": crowd, "runs": runs,
            "summary": summary, "learned_planned_with": learned_planned_with(done),
            "seconds": time.monotonic() - started}


def markdown_lines(record: dict) -> list[str]:
    """The check as Markdown: the machine, each width's no-op table, the bench's table."""
    machine = record["machine"]
    domains = "; ".join(f"CPUs {_cpus(d['cpus'])}: {_mib(d['llc_bytes'])}" for d in machine["llc_domains"])
    lines = ["# Node check", "",
             f"- machine: {machine['cpu_model']}, {machine['cpus']} CPUs, {machine['cores']} cores, "
             f"{machine['memory_bytes'] / 2**30:.0f} GiB",
             f"- LLC domains (as the executor detects them): {domains}",
             f"- Python {machine['python']}, Parsl {machine['parsl']}, {machine['platform']}",
             f"- load average at start: {machine['load_average'][0]:.1f}",
             f"- total time: {record.get('seconds', 0):.0f} s of a {record['plan']['budget']:.0f} s budget", ""]
    throughput = record.get("throughput")
    if throughput:
        lines += [f"## No-op throughput and round trip ({throughput['rounds']} interleaved round(s), "
                  f"{record['plan']['tasks']} tasks and {record['plan']['pings']} lone tasks a sample)", ""]
        for width, entry in throughput["widths"].items():
            lines += [*width_lines(int(width), entry["summary"], markdown=True), ""]
    streams = record.get("streams")
    if streams and "error" in streams:
        lines += ["## Streams beside compute", "", f"Failed: {streams['error'].splitlines()[-1]}", ""]
    if streams and "mix" in streams:
        mix, crowd = streams["mix"], streams["crowd"]
        lines += [f"## Streams beside compute ({mix['streams']} streams of {mix['stream_mib']} MiB listed before "
                  f"{mix['scores']} scores, one repetition)", "",
                  f"A stream alone {crowd['stream_alone']:.2f} s; one on each of {crowd['cpus']} cores together "
                  f"**{crowd['slowdown']['streams_together']:.2f}x**; a score among them "
                  f"{crowd['slowdown']['score_among_streams']:.2f}x.", "",
                  "| run | makespan s | streams together s | planned with |", "|---|---|---|---|"]
        for run in streams["runs"]:
            if "error" in run:
                lines.append(f"| {run['kind']} | failed | | |")
                continue
            planned = ((run.get("contention_model") or {}).get("interference") or {}).get("planned_with") or ""
            lines.append(f"| {run['kind']} | {run['makespan']:.2f} | {run['stream_corun_seconds']:.2f} | {planned} |")
        lines.append("")
    demo = record.get("demo")
    if demo:
        estimate = (f"; its own estimate {demo['estimated_seconds']:.0f} s" if demo.get("estimated_seconds") is not None
                    else "")
        lines += ["## `scalpel demo` with its defaults", "",
                  (f"The whole process took **{demo['wall_seconds']:.0f} s**{estimate} on "
                   f"{machine['cores']} cores (the goal on a 16-core node: {DEMO_GOAL_SECONDS:.0f} s)."
                   if demo["returncode"] == 0 else
                   f"Failed (exit {demo['returncode']}) after {demo['wall_seconds']:.0f} s."),
                  "", "```", *demo["tail"], "```", ""]
    bench = record.get("bench")
    if bench:
        lines += [f"## Kernel mixes (`scalpel bench`, {bench['repeats']} repetition(s), LLC {_mib(bench['llc'])}: "
                  f"{bench['llc_note']})", "", *summary_table(bench["summary"], markdown=True), ""]
    return lines


def _save(record: dict, out: Path, started: float) -> None:
    record["seconds"] = time.monotonic() - started
    write_record(record, out / "node-check.json")
    (out / "node-check.md").write_text("\n".join(markdown_lines(record)) + "\n")


def _mib(size: float | None) -> str:
    return "size unknown" if not size else f"{size / 2**20:.1f} MiB"


def _cpus(cpus: Sequence[int]) -> str:
    return f"{cpus[0]}-{cpus[-1]}" if list(cpus) == list(range(cpus[0], cpus[-1] + 1)) else ",".join(map(str, cpus))


def load_record(path: str | os.PathLike) -> dict:
    """A node check's JSON record, read back (``--report``)."""
    record = json.loads(Path(path).read_text())
    if record.get("format") != FORMAT:
        raise ValueError(f"{path} is not a node check record: it needs \"format\": \"{FORMAT}\"")
    return record
