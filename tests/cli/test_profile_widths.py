"""``scalpel profile run --widths``: a malleable app's speed-up measured beforehand, through real
workers pinned to one and two cores, stored where a run's width rule starts from it."""

import os
import sys

import pytest

from scalpel_executor.cli import build_parser, main
from scalpel_executor.cli.profile_run import widths_domain
from scalpel_executor.core.scheduler import Scheduler, Task
from scalpel_executor.learning.store import ProfileStore
from scalpel_executor.runtime.driver.summary_words import WIDTHS_WHY, width_words, widths_advice

TWO_CORES = len(widths_domain()) >= 2


@pytest.mark.skipif(not TWO_CORES, reason="needs a cache domain of two cores this process may use")
def test_widths_store_one_reading_a_round_and_keep_the_key_s_run_time_its_narrowest(tmp_path, capsys, monkeypatch):
    """Two rounds on one and two cores: two serial fractions stored for the key, each in [0, 1];
    the key's run time counts the two runs on one core only (the wider runs' times are read as
    speed-ups, not folded into it); a worker's first call, which imports, is not read; and a run's
    scheduler seeded from the store is sure of the key (``SURE_AFTER`` readings)."""
    module = tmp_path / "width_kernels.py"
    module.write_text("import time\n\ndef spin(seconds):\n    end = time.perf_counter() + seconds\n"
                      "    while time.perf_counter() < end:\n        pass\n    return seconds\n")
    monkeypatch.chdir(tmp_path)
    store = str(tmp_path / "p.sqlite")
    assert main(["profile", "run", "width_kernels:spin", "0.2", "--repeat", "2", "--widths", "1,2",
                 "--store", store]) == 0
    out = capsys.readouterr().out
    assert "widths round" in out and "stored its speed-up" in out
    with ProfileStore(store) as profiles:
        (profile,) = profiles.profiles()
        speedup = profiles.speedup(profile.key)
    assert profile.runs == 2 and speedup.readings == 2 and 0.0 <= speedup.serial_fraction <= 1.0
    assert "not read" not in out or out.count("widths round") > 2  # a cold round is run again
    scheduler = Scheduler([[0, 1]], "scalpel")
    scheduler.add([Task("t", runtime=0.2, key=profile.key, max_cores=2, serial_fraction=speedup.serial_fraction,
                        serial_readings=speedup.readings)])
    assert scheduler.widths.model.readings(profile.key) == 2


@pytest.mark.parametrize("value, words", [
    ("1", "at least two different core counts"),
    ("2,2", "at least two different core counts"),
    ("0,2", "between 1 and the"),
    (f"1,{len(widths_domain()) + 1}", "between 1 and the"),
    (f"{len(widths_domain()) + 1}", "between 1 and the"),  # one count, out of range: the range is named
    ("0", "between 1 and the"),
    ("1,two", "core counts separated by commas"),
])
def test_a_bad_widths_list_is_refused_naming_it(value, words, capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["profile", "run", "m:f", "--widths", value])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert words in err and repr(value) in err


@pytest.mark.parametrize("command", [["MODULE:FUNCTION", "2000"], ["json:dumps", "ARGS"],
                                     ["json:dumps", "1", "--key", "KEY"]])
def test_the_advice_pasted_as_is_is_refused_naming_the_placeholder(command, tmp_path, capsys):
    """The run summary's advice names placeholders where it cannot tell the app, its arguments or a
    key (``widths_advice``); pasted as is, ``MODULE`` was an import error and ``ARGS`` a string passed
    to the app. Refused before anything runs or is stored."""
    store = tmp_path / "p.sqlite"
    assert main(["profile", "run", *command, "--widths", "1,2", "--store", str(store)]) == 2
    placeholder = next(word for word in command if word in ("MODULE:FUNCTION", "ARGS", "KEY"))
    assert f"{placeholder} stands for " in capsys.readouterr().err
    assert not store.exists()


@pytest.mark.parametrize("args, key", [(("ARGS",), None), ((2000,), "KEY")])
def test_measure_app_refuses_the_advice_pasted_as_is(args, key, tmp_path):
    from scalpel_executor import measure_app

    store = tmp_path / "p.sqlite"
    with pytest.raises(ValueError, match=f"{args[0] if key is None else key} stands for "):
        measure_app(len, *args, key=key, widths=(1, 2), store=store)
    assert not store.exists()


def test_the_run_summary_says_why_no_malleable_task_was_tried_wider_and_names_the_key_to_measure():
    key = "__main__.smooth({seed:num,tile:f8[~724x~724]})"
    never = [{"width": 1, "width_reason": "no speed-up learned", "profile_key": key, "runtime_source": "store"}] * 4
    words = width_words({"tasks": never, "script": "tiles"})
    assert words.endswith(widths_advice(never, script="tiles"))
    # estimates from the store: only the cost can have kept them narrow; the key, quoted for a shell,
    # and the app's module to import: the script's, where the report knows which file ran as __main__
    assert f"none tried wider ({WIDTHS_WHY['dear']})" in words and "a guess" not in words
    assert f"`scalpel profile run tiles:smooth ARGS --widths 1,2 --key '{key}'` measures its speed-up beforehand" \
        in words
    # a script run from another folder (python runs/tiles.py): its file, as typed there
    assert "`scalpel profile run runs/tiles.py:smooth ARGS --widths 1,2" in width_words(
        {"tasks": never, "script": "runs/tiles.py"})
    # where no file ran as __main__ (a notebook), the call that measures it from Python
    assert width_words({"tasks": never}).endswith(
        "`scalpel_executor.measure_app(smooth, ARGS, widths=(1, 2))` where smooth is defined measures its "
        "speed-up beforehand")
    # the store the run read, which the measurement must reach; none where the run kept none
    kept = {"path": "/data/my runs.db", "persistent": True}
    assert f"--key '{key}' --store '/data/my runs.db'`" in width_words(
        {"tasks": never, "script": "tiles", "profile_store": kept})
    assert "widths=(1, 2), store='/data/my runs.db')`" in width_words({"tasks": never, "profile_store": kept})
    assert "--store" not in width_words({"tasks": never, "script": "tiles",
                                         "profile_store": {"path": ":memory:", "persistent": False}})
    guessed = [dict(row, runtime_source="prior") for row in never]
    assert "none tried wider (its run time a guess)" in width_words({"tasks": guessed})
    assert f"(its run time a guess, or {WIDTHS_WHY['dear']})" in width_words({"tasks": never[:2] + guessed[:2]})
    # two keys: the command of the key of the most seconds, pasteable but for ARGS, the other named after it
    other = [dict(row, profile_key="__main__.project(n<16)", measured_runtime=9.0) for row in never]
    assert width_words({"tasks": never + other, "script": "tiles"}).endswith(
        "`scalpel profile run tiles:project ARGS --widths 1,2 --key '__main__.project(n<16)'` measures the speed-up "
        f"of the key of the most seconds beforehand, and likewise of '{key}'")
    # two keys: their run times
    assert "none tried wider (their run times a guess)" in width_words({"tasks": guessed + [
        dict(row, profile_key="__main__.project(n<16)") for row in guessed]})
    tried = never + [{"width": 2, "width_reason": "exploring", "profile_key": key}]
    assert "none tried wider" not in width_words({"tasks": tried})


def test_the_run_summary_names_a_key_never_tried_wider_beside_others_that_were_where_it_holds_the_work():
    """Montage's reprojections, all started while many waited, are never tried wider, run after run,
    while its other keys are: the closing sentence names that key where it held a tenth of the
    malleable seconds or more, and not a key of a few short tasks."""
    project = [{"width": 1, "width_reason": "no speed-up learned", "profile_key": "m.project(n<16)",
                "measured_runtime": 10.0, "runtime_source": "store"}] * 6
    diff = [{"width": 2, "width_reason": "exploring", "profile_key": "m.diff(n<16)", "measured_runtime": 2.0},
            {"width": 1, "width_reason": "no gain", "profile_key": "m.diff(n<16)", "measured_runtime": 3.0}]
    tiny = [{"width": 1, "width_reason": "no speed-up learned", "profile_key": "m.tiny(n<16)",
             "measured_runtime": 0.5}]
    words = width_words({"tasks": project + diff + tiny})
    assert words.endswith(f", 6 tasks of a key (92% of the malleable tasks' seconds) not tried wider "
                          f"({WIDTHS_WHY['dear']}): `scalpel profile run m:project ARGS --widths 1,2 "
                          f"--key 'm.project(n<16)'` measures its speed-up beforehand"), words
    assert "m.tiny" not in words
    # under a tenth of the seconds: no advice
    assert "wider (" not in width_words({"tasks": project[:1] + [dict(diff[0], measured_runtime=200.0)] + tiny})


def test_widths_run_on_one_cache_domain_the_largest(monkeypatch, capsys):
    """On a node whose CPU numbers interleave two sockets, the first CPUs by number span both:
    ``--widths`` runs on the largest domain's CPUs, and its bound is that domain's cores."""
    from scalpel_executor.core.domains import Topology
    from scalpel_executor.host import sysfs

    monkeypatch.setattr(sysfs, "detect_topology", lambda: Topology.from_cpu_lists([[0, 2], [1, 3, 5, 7]]))
    assert widths_domain() == (1, 3, 5, 7)
    assert build_parser().parse_args(["profile", "run", "m:f", "--widths", "4,1,2"]).widths == (1, 2, 4)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["profile", "run", "m:f", "--widths", "1,8"])
    assert "between 1 and the 4 cores of this machine's largest cache domain" in capsys.readouterr().err


def test_an_app_marked_malleable_is_profiled_at_each_width_it_is_given(tmp_path, capsys, monkeypatch):
    """``@app_hints(max_cores=64)``, more cores than this machine's domains have: the narrow runs
    take the app's narrowest width and each ``--widths`` run exactly its count (the hint set
    aside, not refused, and not widened by the width rule); the CPUs each run may use say so."""
    module = tmp_path / "hinted_kernels.py"
    module.write_text("import os, time\nfrom scalpel_executor import app_hints\n\n@app_hints(max_cores=64)\n"
                      "def spin(seconds, log):\n    with open(log, 'a') as out:\n"
                      "        out.write(f'{len(os.sched_getaffinity(0))}\\n')\n"
                      "    end = time.perf_counter() + seconds\n    while time.perf_counter() < end:\n        pass\n"
                      "    return seconds\n")
    monkeypatch.chdir(tmp_path)
    store, log = str(tmp_path / "p.sqlite"), tmp_path / "cpus.txt"
    widths = ["--widths", "1,2"] if TWO_CORES else []
    assert main(["profile", "run", "hinted_kernels:spin", "0.05", repr(str(log)), "--repeat", "2", *widths,
                 "--store", store]) == 0
    out = capsys.readouterr().out
    cpus = [int(line) for line in log.read_text().split()]
    narrow = 2 + out.count("not stored, run again")  # the worker's first call imported the module: run again
    assert narrow == 3 and cpus[:narrow] == [1] * narrow, (cpus, out)  # the narrow runs
    if TWO_CORES:
        assert "stored its speed-up" in out
        rounds = cpus[narrow:]
        assert rounds == [1, 2] * (len(rounds) // 2) and len(rounds) >= 4, cpus  # the rounds, interleaved
    with ProfileStore(store) as profiles:
        (profile,) = profiles.profiles()
    assert profile.runs == 2


@pytest.mark.skipif(not TWO_CORES, reason="needs a cache domain of two cores this process may use")
def test_widths_say_when_a_wider_run_took_longer_and_only_then(tmp_path, capsys, monkeypatch):
    """A wider run slower than the narrowest (other processes on the cores, or threads that only
    cost) reads no gain; the command says in how many rounds, and not when every wider run was faster."""
    module = tmp_path / "slow_kernels.py"
    module.write_text("import os, time\n\ndef nap(base):\n"
                      "    time.sleep(base * len(os.sched_getaffinity(0)))  # longer on more cores\n    return base\n\n"
                      "def quick(base):\n    time.sleep(base / len(os.sched_getaffinity(0)))\n    return base\n")
    monkeypatch.chdir(tmp_path)
    for function, slower in (("nap", True), ("quick", False)):
        assert main(["profile", "run", f"slow_kernels:{function}", "0.05", "--repeat", "2", "--widths", "1,2",
                     "--store", str(tmp_path / f"{function}.sqlite")]) == 0
        out = capsys.readouterr().out
        assert ("note: in 2 of 2 rounds a wider run took longer than the narrowest" in out) is slower, out
        assert ("took longer" in out) is slower


def test_the_report_names_the_script_a_run_was_started_from_only_where_its_apps_can_be_imported(tmp_path,
                                                                                               monkeypatch):
    """``script``: the module ``scalpel profile run`` imports for an app of ``__main__``: the file run
    as ``python FILE`` where it has an ``if __name__ == "__main__":`` (else its import runs the
    workflow, and the advice is ``measure_app``), the module of ``python -m``; none for a notebook."""
    import types
    from scalpel_executor.runtime.driver.report import script_module

    def main_of(**attributes):
        module = types.ModuleType("__main__")
        module.__dict__.update({"__spec__": None, **attributes})
        monkeypatch.setitem(sys.modules, "__main__", module)

    guarded, bare = tmp_path / "fit.py", tmp_path / "loose.py"
    guarded.write_text("def fit(x):\n    return x\n\nif __name__ == '__main__':\n    fit(1)\n")
    bare.write_text("def fit(x):\n    return x\n\nfit(1)\n")
    monkeypatch.chdir(tmp_path)
    main_of(__file__=str(guarded))
    assert script_module() == "fit"
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # python ../fit.py: the file, as typed from here
    assert script_module() == os.path.join("..", "fit.py")
    monkeypatch.chdir(tmp_path)
    main_of(__file__=str(bare))
    assert script_module() is None
    main_of(__file__=str(tmp_path / "my-script.py"))  # no module can have that name
    assert script_module() is None
    main_of(__spec__=types.SimpleNamespace(name="lab.fit"))
    assert script_module() == "lab.fit"
    main_of()  # a notebook's kernel, a REPL, python -c
    assert script_module() is None
