"""``scalpel report``: a run's report as a sentence, a table of its tasks and a legend of the admission
reasons in it; what RUN may name and the errors when it names nothing; the co-run arithmetic the
sentence rests on, on reports built by hand."""

import json
import shutil
from pathlib import Path

import parsl
import pytest
from parsl import python_app
from parsl.config import Config

from scalpel_executor import ScalpelExecutor
from scalpel_executor.cli.report import HEADERS, describe, fit_table, legend, task_cells, width_legend
from scalpel_executor.core import admission, widths
from scalpel_executor.core.units import format_size
from scalpel_executor.runtime.driver.report import OverCache, over_cache_coruns, run_summary, seconds_covered

MiB = 2**20


@python_app(executors=["scalpel"])
def busy(seconds):
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return seconds


@pytest.fixture(scope="module")
def runinfo(tmp_path_factory):
    """A Parsl ``runinfo`` directory holding one real run of six tasks (``000``)."""
    runinfo = tmp_path_factory.mktemp("workflow") / "runinfo"
    with parsl.load(Config(executors=[ScalpelExecutor(label="scalpel", profiles=False)], run_dir=str(runinfo))):
        assert [future.result(timeout=120) for future in [busy(0.05) for _ in range(6)]] == [0.05] * 6
    return runinfo


def test_a_run_directory_prints_the_sentence_the_tasks_and_the_legend(runinfo, scalpel):
    path = runinfo / "000" / "scalpel-scalpel-report.json"
    report = json.loads(path.read_text())
    code, out, err = scalpel("report", str(runinfo / "000"), "--wide")  # every column, one line each
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == str(path)
    said = run_summary(report, None).splitlines()  # a clause per line, where long
    assert lines[1:1 + len(said)] == said
    assert lines[1].startswith("scalpel: 6 tasks (0 failed) on ")
    header = next(index for index, line in enumerate(lines) if line.split()[:2] == ["task", "profile"])
    rows = lines[header + 2:header + 8]
    assert [int(line.split()[0]) for line in rows] == [row["parsl_task_id"] for row in report["tasks"]] == list(range(6))
    assert all("busy(" in line for line in rows)
    reasons = {row["admission"] for row in report["tasks"]}
    assert "admitted as" in lines[header] and "waited s" in lines[header]
    assert all(row["waited"] is not None and 0 <= row["waited"] < 120 for row in report["tasks"])  # submit to start
    assert all(task_cells(row, 0.0)[HEADERS.index("waited s")] == f"{row['waited']:.2f}"
               for row in report["tasks"])
    assert all(task_cells(row, 0.0)[HEADERS.index("admitted as")] == format_size(row["scheduled_footprint"])
               for row in report["tasks"])  # what its start weighed, beside what the probe measured
    assert all(task_cells(row, 0.0)[HEADERS.index("width")] == "-" for row in report["tasks"])  # none malleable
    assert lines[header + 9].startswith("task: its id in Parsl's log")  # the columns, read
    assert "Times are seconds since the run's first task started" in lines[header + 9]
    assert "admitted as: the footprint its start was decided on" in lines[header + 9]
    assert lines[header + 11] == "admission: why each task started where and when it did"
    for reason in reasons:
        assert any(line.strip().startswith(reason) and admission.REASONS_EXPLAINED[reason] in line
                   for line in lines[header + 12:])
    assert len(lines) == header + 12 + len(reasons)


def test_runinfo_means_its_latest_run_and_a_file_means_itself(runinfo, scalpel):
    _, by_directory, _ = scalpel("report", str(runinfo / "000"))
    assert by_directory
    assert scalpel("report", str(runinfo)) == (0, by_directory, "")
    assert scalpel("report", str(runinfo / "000" / "scalpel-scalpel-report.json")) == (0, by_directory, "")


def test_json_prints_the_report_and_gantt_draws_the_run(runinfo, scalpel, tmp_path):
    path = runinfo / "000" / "scalpel-scalpel-report.json"
    code, out, err = scalpel("report", str(runinfo), "--json", "--gantt", str(tmp_path / "run.png"))
    assert code == 0 and json.loads(out) == json.loads(path.read_text())
    assert err == f"Gantt chart: {tmp_path / 'run.png'}\n"
    assert (tmp_path / "run.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("name, words", [
    ("run.txt", ".txt is not a format matplotlib draws; use one of"),
    ("run", "no file suffix; use one of"),
    ("missing/run.png", "does not exist"),
])
def test_a_gantt_file_that_cannot_be_drawn_is_refused_before_the_table(runinfo, scalpel, tmp_path, name, words):
    code, out, err = scalpel("report", str(runinfo), "--gantt", str(tmp_path / name))
    assert code == 2 and out == "" and err.startswith(f"scalpel: --gantt {tmp_path / name}: ") and words in err, err


WFBENCH_KEY = "my_workflow.generated.tasks.generic_shell_app[wfbench:blastall](str,inputs=1,outputs=1)"


@pytest.mark.parametrize("admission", [None, "fits", "kept-apart", "co-run: less harm"])
def test_the_table_fits_the_terminal_keeping_what_tells_keys_apart_and_wide_gives_everything(
        runinfo, scalpel, tmp_path, monkeypatch, admission):
    """``admission``: every task's reason set so (None: the run's own), since the reasons' width
    changes the key's: with ten-letter reasons (``kept-apart``, ``backfilled``, as a loaded machine
    gives) the key lost one more letter at its start."""
    report = json.loads((runinfo / "000" / "scalpel-scalpel-report.json").read_text())
    report["tasks"] = [{**row, "profile_key": WFBENCH_KEY.replace("blastall", f"type{row['task_id']}"),
                        **({"admission": admission} if admission else {})} for row in report["tasks"]]
    path = tmp_path / "scalpel-wf-report.json"
    path.write_text(json.dumps(report))
    monkeypatch.setenv("COLUMNS", "100")
    code, out, _ = scalpel("report", str(path))
    lines = out.splitlines()
    header = next(index for index, line in enumerate(lines) if line.split()[:2] == ["task", "profile"])
    table = lines[header:lines.index("", header)]  # a long admission reason wraps onto more lines
    rows = [line for line in table[2:] if line.split()[0].isdigit()]
    assert code == 0 and max(map(len, table)) <= 100 and len(rows) == 6
    # what tells the keys apart is kept whole, what they share is cut at its start
    assert all(f"_shell_app[wfbench:type{i}]" in line and "my_workflow" not in line for i, line in enumerate(rows))
    note = " ".join(lines[lines.index("", header) - 2:lines.index("", header)])
    assert note.startswith("Left out to fit 100 columns: ") and "admitted as" in note and "--wide" in note
    code, out, _ = scalpel("report", str(path), "--wide")
    lines = out.splitlines()
    header = next(index for index, line in enumerate(lines) if line.split()[:2] == ["task", "profile"])
    assert all(name in lines[header] for name in HEADERS if name != "width") and "width" not in lines[header]
    assert all(WFBENCH_KEY.replace("blastall", f"type{i}") in lines[header + 2 + i] for i in range(6))
    assert not any(line.startswith("Left out") for line in lines)


def test_a_report_missing_fields_the_table_reads_is_named_not_a_traceback(runinfo, scalpel, tmp_path):
    path = _write(tmp_path / "r.json", json.dumps({"executor": "x", "topology": {"domains": []}, "sources": {},
                                                   "tasks": [{"task_id": 1}]}))
    code, out, err = scalpel("report", str(path))
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert f"{path} is not a complete scalpel run report" in err and "--json" in err


def test_a_run_of_several_executors_prints_one_section_each(runinfo, scalpel, tmp_path):
    run = tmp_path / "007"
    shutil.copytree(runinfo / "000", run)
    report = json.loads((run / "scalpel-scalpel-report.json").read_text())
    (run / "scalpel-second-report.json").write_text(json.dumps({**report, "executor": "second"}))
    code, out, _ = scalpel("report", str(run))
    lines = out.splitlines()
    first, second = (lines.index(str(run / name)) for name in ("scalpel-scalpel-report.json", "scalpel-second-report.json"))
    assert code == 0 and first == 0 and lines[second - 1] == ""
    said = run_summary({**report, "executor": "second"}, None).splitlines()
    assert lines[second + 1:second + 1 + len(said)] == said
    code, out, _ = scalpel("report", str(run), "--json")
    assert [document["executor"] for document in json.loads(out)] == ["scalpel", "second"]


def test_a_latest_run_without_a_report_is_named_with_the_latest_that_has_one(runinfo, scalpel, tmp_path):
    shutil.copytree(runinfo, tmp_path / "runinfo")
    (tmp_path / "runinfo" / "001").mkdir()
    code, out, err = scalpel("report", str(tmp_path / "runinfo"))
    assert code == 2 and out == ""
    assert err == (f"scalpel: no scalpel-*-report.json in {tmp_path / 'runinfo' / '001'}, the latest run in "
                   f"{tmp_path / 'runinfo'}: the report is written at dfk.cleanup(), by an executor that ran tasks; "
                   f"the latest run with one is {tmp_path / 'runinfo' / '000'}\n")


@pytest.mark.parametrize("make, expected", [
    (lambda tmp: tmp / "absent", "absent: no such file or directory; expected a run report (scalpel-*-report.json), "
                                 "a Parsl run directory such as runinfo/007, or runinfo"),
    (lambda tmp: tmp, "no scalpel-*-report.json in {tmp}: the report is written at dfk.cleanup()"),
    (lambda tmp: _write(tmp / "parsl.log", "1.0 2026-12-01 MainProcess parsl.dataflow.dflow:1106 add_executors INFO: "
                                          "Adding executor htex of type parsl.executors.HighThroughputExecutor\n").parent,
     "no scalpel-*-report.json in {tmp}: its parsl.log adds no ScalpelExecutor, so the run used other executors"),
    (lambda tmp: _write(tmp / "parsl.log", "add_executors INFO: Adding executor scalpel of type "
                                          "scalpel_executor.runtime.driver.executor.ScalpelExecutor\n").parent,
     "no scalpel-*-report.json in {tmp}: the report is written at dfk.cleanup()"),
    (lambda tmp: _write(tmp / "r.json", "[1, 2]"), "r.json is not a run report: expected a JSON object"),
    (lambda tmp: _write(tmp / "r.json", '{"executor": "x"}'),
     "r.json is not a scalpel run report: it has no 'topology', 'tasks', 'sources'"),
])
def test_a_path_that_holds_no_report_is_named_with_what_was_expected(scalpel, tmp_path, make, expected):
    code, out, err = scalpel("report", str(make(tmp_path)))
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert expected.format(tmp=tmp_path) in err


def _write(path, text):
    path.write_text(text)
    return path


def test_help_says_what_run_may_name(scalpel, capsys):
    with pytest.raises(SystemExit):
        scalpel("report", "--help")
    out = capsys.readouterr().out
    assert "runinfo/007" in out and "--gantt" in out and "--json" in out


def test_every_reason_is_explained_and_the_legend_lists_those_that_occur_in_order():
    assert set(admission.REASONS_EXPLAINED) == set(admission.REASONS)
    assert widths.REASONS == tuple(widths.REASONS_EXPLAINED) and len(set(widths.REASONS)) == 13
    lines = width_legend([widths.TAIL, widths.NO_GAIN, widths.TAIL, "made up"], 60)
    assert lines[1].startswith("  tail     wider: the task's own end") and all(len(line) <= 60 for line in lines)
    assert lines[2].startswith("  no gain  narrow: its key was seen wider")  # the order of REASONS, each once
    assert lines[-2:] == ["  made up  (not a reason this version of scalpel-executor", "           knows)"]
    assert set(admission.ACCEPTED_CORUNS) == {reason for reason in admission.REASONS if reason.startswith("co-run:")}
    lines = legend([admission.KEPT_APART, None, admission.FITS, admission.KEPT_APART, "made up"])
    assert [line[2:12] for line in lines[1:]] == ["fits      ", "kept-apart", "none      ", "made up   "]
    assert lines[1].endswith(admission.REASONS_EXPLAINED[admission.FITS])
    assert "never started" in lines[3] and "not a reason" in lines[4]


def row(task_id, start, end, footprint, reason, domain=0, measured=True):
    return {"task_id": task_id, "domain": domain, "cpu": domain, "started": start, "finished": end + 0.01,
            "measured_runtime": end - start, "measured_footprint": footprint if measured else None,
            "scheduled_footprint": footprint, "admission": reason, "ok": True, "profile_key": "k"}


def report(rows, llc=32 * MiB, domains=1, policy="scalpel"):
    return {"executor": "scalpel", "policy": policy, "tasks_finished": len(rows), "tasks_failed": 0,
            "topology": {"total_cores": 2 * domains,
                         "domains": [{"index": d, "cpus": [d], "llc_size": llc} for d in range(domains)]},
            "sources": {"footprint": {"prior": len(rows)}, "runtime": {"prior": len(rows)}}, "tasks": rows}


def test_an_over_cache_co_run_is_charged_to_the_start_that_made_it():
    rows = [row(0, 0.0, 4.0, 20 * MiB, admission.FITS),
            row(1, 1.0, 2.0, 20 * MiB, admission.CORUN_NOTHING_FITS),  # beside 0: accepted
            row(2, 2.0, 3.0, 2 * MiB, admission.KEPT_APART),  # fits beside 0
            row(3, 3.0, 5.0, 20 * MiB, admission.FITS, measured=False)]  # the estimate missed it
    assert over_cache_coruns(report(rows)) == [OverCache(0, 1.0, 2.0, (0, 1), admission.CORUN_NOTHING_FITS),
                                               OverCache(0, 3.0, 4.0, (0, 3), admission.FITS)]
    assert "co-runs over the LLC lasted 2.00 s, 1.00 s of it accepted at admission" in run_summary(report(rows), None)


def test_co_runs_on_two_domains_at_once_count_their_seconds_once():
    rows = [row(0, 0.0, 2.0, 20 * MiB, admission.FITS, 0), row(1, 0.0, 2.0, 20 * MiB, admission.FORESEEN, 0),
            row(2, 1.0, 3.0, 20 * MiB, admission.FITS, 1), row(3, 1.0, 3.0, 20 * MiB, admission.FITS, 1)]
    stretches = over_cache_coruns(report(rows, domains=2))
    assert [(s.domain, s.start, s.end) for s in stretches] == [(0, 0.0, 2.0), (1, 1.0, 3.0)]
    assert seconds_covered(stretches) == 3.0
    assert "lasted 3.00 s, 2.00 s of it accepted" in run_summary(report(rows, domains=2), None)


def test_the_sentence_without_co_runs_an_llc_or_a_checking_policy():
    apart = [row(0, 0.0, 1.0, 20 * MiB, admission.FITS), row(1, 1.0, 2.0, 20 * MiB, admission.FITS)]
    assert run_summary(report(apart), "runinfo/000/scalpel-scalpel-report.json") == (
        "scalpel: 2 tasks (0 failed) on 2 cores in 1 LLC domain; no co-runs over the LLC; estimates: 2 guessed; "
        "report: runinfo/000/scalpel-scalpel-report.json (scalpel report runinfo/000)")
    together = [row(0, 0.0, 1.0, 20 * MiB, admission.PLANNED), row(1, 0.5, 1.0, 20 * MiB, admission.PLANNED)]
    assert "lasted 0.50 s (policy fifo does not check starts against what runs)" in \
        run_summary(report(together, policy="fifo"), None)
    assert "LLC size unknown, co-runs over it not counted" in run_summary(report(together, llc=None), None)
    mixed = {**report(apart), "sources": {"footprint": {"hint": 1, "store": 1}, "runtime": {"prior": 2}}}
    assert run_summary(mixed, None).endswith("footprints: 1 from hints, 1 from the profile store; run times: 2 guessed")


def test_the_readme_explains_every_reason_as_the_legend_does():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    for reason, explained in admission.REASONS_EXPLAINED.items():
        assert f"| `{reason}` | {explained} |" in readme, reason


def test_the_closing_sentence_counts_one_task_as_one_and_says_what_shutdown_cut_short():
    rows = [{"task_id": 1, "domain": 0, "measured_footprint": 1e6, "started": 0.0, "finished": 1.0,
             "admission": "fits"}]
    one = report(rows)
    assert run_summary({**one, "tasks_finished": 1, "tasks_failed": 0}, None).startswith("scalpel: 1 task (0 failed) on")
    cut = run_summary({**one, "tasks_finished": 4, "tasks_failed": 3, "tasks_cut_short": 2}, None)
    assert cut.startswith("scalpel: 4 tasks (3 failed, 2 of them unfinished when the executor shut down: wait for "
                          "results before dfk.cleanup() or the end of `with parsl.load()`) on "), cut
    interrupted = run_summary({**one, "tasks_finished": 4, "tasks_failed": 3, "tasks_cut_short": 2,
                               "shut_down_by": "a Ctrl-C"}, None)
    assert interrupted.startswith("scalpel: 4 tasks (3 failed, 2 of them unfinished when a Ctrl-C ended the script) on ")
    assert "wait for results" not in interrupted  # the advice is for a script that left too early, not for a Ctrl-C


def test_a_report_that_cannot_be_written_is_said_in_the_closing_line(tmp_path, caplog):
    from scalpel_executor.runtime.driver.report import save_report

    rows = [{"task_id": 1, "domain": 0, "measured_footprint": 1e6, "started": 0.0, "finished": 1.0,
             "admission": "fits"}]
    missing = tmp_path / "gone"  # the run directory removed (or unwritable) after parsl.load()
    with caplog.at_level("INFO", logger="scalpel_executor.summary"):
        save_report({**report(rows), "tasks_finished": 1, "tasks_failed": 0, "mixed_keys": []}, str(missing), "scalpel")
    closing = [record.getMessage() for record in caplog.records if record.name == "scalpel_executor.summary"]
    assert len(closing) == 1 and "the run report could not be written to" in closing[0]
    assert "scalpel-scalpel-report.json (FileNotFoundError" in closing[0]


CTRL_C = """
import sys, time, parsl
from parsl import python_app
from parsl.config import Config
from scalpel_executor import ScalpelExecutor

@python_app
def wait(seconds):
    import time
    time.sleep(seconds)
    return seconds

with parsl.load(Config(executors=[ScalpelExecutor(label="scalpel", profiles=False)], run_dir=sys.argv[1])):
    futures = [wait(0.2), wait(60), wait(60)]
    futures[0].result(timeout=60)
    raise KeyboardInterrupt  # as a Ctrl-C in the middle of the workflow
"""


def test_after_a_ctrl_c_the_closing_line_names_it_and_gives_no_advice(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "ctrl_c.py"
    script.write_text(CTRL_C)
    run = subprocess.run([sys.executable, str(script), str(tmp_path / "runinfo")], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert run.returncode != 0 and "KeyboardInterrupt" in run.stderr
    closing = [line for line in run.stderr.splitlines() if line.startswith("scalpel: 3 tasks")]
    assert closing and "2 of them unfinished when a Ctrl-C ended the script" in closing[0], run.stderr[-2000:]
    assert "wait for results" not in closing[0]
    report_file = json.loads(next((tmp_path / "runinfo").glob("*/scalpel-scalpel-report.json")).read_text())
    assert report_file["shut_down_by"] == "a Ctrl-C"


def test_gantt_bars_name_their_task_where_the_name_fits_and_colours_read_in_mib():
    from scalpel_executor.experiments.charts import bar_label, footprint_scale

    row = {"label": "12 generic_shell_app[wfbench:blastall]"}
    assert bar_label(row, 10.0, 10.0) == row["label"]  # a bar across the whole axis: the whole name
    cut = bar_label(row, 0.5, 10.0)
    assert cut is not None and cut.endswith("…") and row["label"].startswith(cut[:-1]) and len(cut) < len(row["label"])
    assert bar_label(row, 0.05, 10.0) is None  # too narrow for three characters: no label spills over
    assert bar_label({"case": "matmul-l"}, 10.0, 10.0) == "matmul-l"  # the demo's rows name their case
    by_cache = footprint_scale([2**20, 2 * 2**20], 32 * 2**20)  # with an LLC: 1/64 of it to twice it, in MiB
    assert (by_cache.vmin, by_cache.vmax) == (0.5, 64.0)
    close = footprint_scale([9.2 * 2**20, 9.9 * 2**20], None)  # 1 MiB of noise is not the whole palette
    assert close(9.9) - close(9.2) < 0.05


def test_a_workers_cold_first_call_makes_no_key_mixed():
    from scalpel_executor.runtime.driver.report import TaskRecord, mixed_keys

    def record(task_id, wall, cold):
        return TaskRecord(task_id=task_id, slot=0, domain=0, cpu=0, started=0.0, finished=wall, footprint=0.0,
                          runtime=1.0, ok=True, stats={"wall": wall, "cold": cold},
                          profile_key="montage.make_tile(n<16)")

    warm = [record(i, 0.3, False) for i in range(6)]
    assert mixed_keys(warm + [record(9, 1.6, True)]) == []  # the first call paid 1.3 s of imports: no advice
    assert [entry["profile_key"] for entry in mixed_keys(warm + [record(9, 1.6, False)])] == ["montage.make_tile(n<16)"]


def test_the_closing_line_says_what_the_run_learned_and_whether_it_is_kept():
    rows = [{"task_id": i, "domain": 0, "started": 0.0, "finished": 1.0, "admission": "fits", "ok": True,
             "profile_key": key, "measured_runtime": 0.5, "runtime_source": source, "measured_footprint": footprint}
            for i, (key, source, footprint) in enumerate([("a(~64)", "prior", 2e6), ("a(~64)", "learned", None),
                                                          ("b(~8)", "store", None)])]
    base = {**report(rows), "tasks_finished": 3, "tasks_failed": 0}
    kept = run_summary({**base, "profile_store": {"path": "p.sqlite", "persistent": True, "problem": None}}, None)
    assert "learned the run times of 2 keys, 1 of them new, and the footprints of 1, kept in the profile store" in kept
    assert "kept for this run only (profiles=False)" in run_summary({**base, "profile_store": None}, None)
    assert "learned" not in run_summary(base, None)  # a report from before the clause: nothing claimed


def test_a_fitted_table_cuts_the_keys_of_one_module_alike():
    """Cut one by one, the keys of one app read ``__main__.simulate_plot(n<16)`` beside
    ``simulate_plot(~22.6)``, as if two apps ran: the keys of one module lose the same components,
    the most any of them must; a module whose keys fit keeps its path."""
    cells = [["1", "__main__.simulate_plot(n<16)", "0.10"], ["2", "__main__.simulate_plot(~22.6)", "0.20"],
             ["3", "__main__.smooth({field:f8[~431x~431],mean:num})", "0.30"], ["4", "lab.kernels.fit(~64)", "0.40"]]
    _, rows, _, _ = fit_table(["task", "profile key", "end s"], cells, 45)  # room for the first key whole
    assert [row[1] for row in rows] == ["simulate_plot(n<16)", "simulate_plot(~22.6)", "smooth({field:f8[~431x~431]…",
                                        "lab.kernels.fit(~64)"]


def summary_of(calls):
    """The closing line of a run whose finished tasks were ``calls``: (profile key, run time) pairs."""
    rows = [{"task_id": i, "domain": 0, "started": 0.0, "finished": 1.0, "admission": "fits", "ok": True,
             "profile_key": key, "measured_runtime": seconds, "runtime_source": "store"}
            for i, (key, seconds) in enumerate(calls)]
    return run_summary({**report(rows), "tasks_finished": len(rows), "tasks_failed": 0,
                        "profile_store": {"path": "p.sqlite", "persistent": True, "problem": None}}, None)


def test_an_apps_calls_told_apart_by_a_seed_alone_are_named_with_the_hint_that_keeps_them_as_one():
    """Seeds 0 to 40 of one app, bucketed like a size from 16 on, went under five keys whose run
    times are alike (a worker's first call, with its imports, the slowest): the closing line says so,
    naming the argument and the hint; seeds 100 to 139 by keyword, two keys, too. A size, whose run
    times spread at least as its values do (a linear scan, an FFT), keys told apart by two
    arguments, keys a user named and strings are not said."""
    seeds = [("lab.plot(n<16)", 0.31), ("lab.plot(n<16)", 1.9), ("lab.plot(~16)", 0.30), ("lab.plot(~22.6)", 0.33),
             ("lab.plot(~32)", 0.29), ("lab.plot(~40.3)", 0.32)]
    said = summary_of(seeds)
    assert ("plot's calls went under 5 profile keys told apart by its argument 1 alone (n<16 to ~40.3), their run "
            "times alike (0.29 s to 0.33 s): if it is a seed or an index, not a size, name it in "
            "`@app_hints(size_free=(...))` to keep them under one (docs/profiles.md)") in said
    named = summary_of([("lab.walk(~2097152,seed=~108)", 0.0274), ("lab.walk(~2097152,seed=~128)", 0.0275)])
    assert "walk's calls went under 2 profile keys told apart by seed= alone (~108 to ~128)" in named
    assert '`@app_hints(size_free=("seed",))` keeps them under one' in named
    for calls in ([(f"lab.fft(~{n})", n / 64) for n in (64, 128, 256, 512)],
                  [("lab.scan(~1024)", 1.0), ("lab.scan(~1448)", 1.41)],
                  [("lab.fit(~512,~16)", 1.0), ("lab.fit(~1024,~19)", 1.0), ("lab.fit(~2048,~22.6)", 1.0)],
                  [("plot-16", 1.0), ("plot-19", 1.0), ("plot-22", 1.0)],
                  [("lab.plot(str)", 1.0), ("lab.plot(str~16)", 1.0), ("lab.plot(bytes)", 1.0)]):
        assert "profile keys told apart" not in summary_of(calls), calls


def test_a_malleable_tasks_row_says_its_width_and_why(runinfo):
    row = {"task_id": 3, "profile_key": "app.fft(~512)", "domain": 0, "cpu": 2, "cpus": [2, 3], "started": 1.0,
           "finished": 2.0, "measured_runtime": 1.0, "measured_footprint": 2**20, "estimated_footprint": 2**20,
           "scheduled_footprint": 2**20, "ok": True, "admission": "fits", "waited": 0.1, "width": 2,
           "width_reason": "tail"}
    cells = task_cells(row, 0.0)
    assert cells[HEADERS.index("width")] == "2: tail" and cells[HEADERS.index("domain/cpu")] == "0/2-3"
    report = json.loads((runinfo / "000" / "scalpel-scalpel-report.json").read_text())
    report["tasks"][0].update(width=2, width_reason="tail")
    lines = describe(report)
    header = next(index for index, line in enumerate(lines) if line.split()[:2] == ["task", "profile"])
    assert "width" in lines[header] and "2: tail" in lines[header + 2]
    # fitted to a terminal of 120 columns, the widths and their reasons stay; timings go first
    for row in report["tasks"]:
        row.update(width=2, width_reason="no speed-up learned", profile_key="__main__.covariance(n<16)")
    lines = describe(report, width=120)
    header = next(index for index, line in enumerate(lines) if line.split()[:2] == ["task", "profile"])
    assert "width" in lines[header] and "2: no speed-up learned" in lines[header + 2]
    assert max(map(len, lines[header:lines.index("", header)])) <= 120
    # the legend says what each width reason in the run means, after the admission reasons'
    title = lines.index("width: the cores each malleable task started on, and why")
    assert title > lines.index("admission: why each task started where and when it did")
    assert lines[title + 1:] == ["  no speed-up learned  " + widths.REASONS_EXPLAINED[widths.NO_SPEEDUP]]
    report["tasks"][0]["width"] = None  # no malleable task: no width legend
    assert all(not line.startswith("width:") for line in describe({**report, "tasks": report["tasks"][:1]}))


def test_the_closing_line_says_the_widths_malleable_tasks_started_on_and_why():
    """A run whose malleable tasks all ran at their narrowest says so, and why: the width rule
    changed nothing; tasks of fixed cores are not counted, and a run without malleable tasks says
    nothing of widths."""
    fixed = {"task_id": 0, "domain": 0, "started": 0.0, "finished": 1.0, "admission": "fits", "width": None}
    narrow = [{**fixed, "task_id": i, "width": 1, "width_reason": "no speed-up learned"} for i in (1, 2, 3)]
    base = {"tasks_finished": 5, "tasks_failed": 0}
    assert "widths of 3 malleable tasks: 3 at 1 core (no speed-up learned)" in run_summary(
        {**report([fixed, *narrow]), **base}, None)
    wide = {**fixed, "task_id": 4, "width": 2, "width_reason": "exploring, planned"}
    assert "widths of 4 malleable tasks: 3 at 1 core (no speed-up learned), 1 at 2 cores (exploring, planned)" in (
        run_summary({**report([fixed, *narrow, wide]), **base}, None))
    assert "widths" not in run_summary({**report([fixed]), **base}, None)


def test_a_long_closing_sentence_is_said_a_clause_per_line_and_a_short_one_on_one():
    """A run with malleable tasks never tried wider adds the widths and the command that measures
    them: on one line it ran past 1,000 characters. Past SUMMARY_WIDTH each clause has a line, the
    first as before and the rest indented, nothing lost; a short sentence stays one line."""
    from scalpel_executor.runtime.driver.summary_words import SUMMARY_WIDTH

    fixed = {"task_id": 0, "domain": 0, "started": 0.0, "finished": 1.0, "admission": "fits", "width": None}
    key = "__main__.smooth({seed:num,tile:f8[~724x~724]})"
    narrow = [{**fixed, "task_id": i, "width": 1, "width_reason": "no speed-up learned", "profile_key": key,
               "runtime_source": "store"} for i in (1, 2, 3)]
    base = {"tasks_finished": 4, "tasks_failed": 0}
    short = run_summary({**report([fixed]), **base}, None)
    assert "\n" not in short and len(short) <= SUMMARY_WIDTH
    long = run_summary({**report([fixed, *narrow]), **base}, "runinfo/000/scalpel-scalpel-report.json")
    lines = long.split("\n")
    assert len(lines) > 2 and lines[0].startswith("scalpel: 4 tasks (0 failed) on") and lines[0].endswith(";")
    assert all(line.startswith("  ") and not line.startswith("   ") for line in lines[1:])
    assert lines[-1] == "  report: runinfo/000/scalpel-scalpel-report.json (scalpel report runinfo/000)"
    assert any(line.startswith("  widths of 3 malleable tasks: 3 at 1 core") for line in lines)


def test_the_table_lists_tasks_by_parsl_task_id_the_executors_own_numbers_after():
    """The report holds the tasks as they ended; the table reads as Parsl's log numbers them."""
    rows = [{**row(i, i, i + 1.0, MiB, admission.FITS), "parsl_task_id": parsl_id}
            for i, parsl_id in enumerate((14, None, 12, 13))]
    lines = describe(report(rows))
    header = next(index for index, line in enumerate(lines) if line.split()[:2] == ["task", "profile"])
    assert [line.split()[0] for line in lines[header + 2:header + 6]] == ["12", "13", "14", "1*"]
