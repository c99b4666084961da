"""``scalpel profile run --widths``: a malleable app's speed-up measured beforehand, through real
workers pinned to one and two cores, stored where a run's width rule starts from it."""

import pytest

from scalpel_executor.cli import build_parser, main
from scalpel_executor.cli.profile import widths_domain
from scalpel_executor.core.scheduler import Scheduler, Task
from scalpel_executor.learning.store import ProfileStore
from scalpel_executor.runtime.driver.summary_words import WIDTHS_ADVICE, width_words

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
    ("1,two", "core counts separated by commas"),
])
def test_a_bad_widths_list_is_refused_naming_it(value, words, capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["profile", "run", "m:f", "--widths", value])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert words in err and repr(value) in err


def test_the_run_summary_says_why_no_malleable_task_was_tried_wider():
    never = [{"width": 1, "width_reason": "no speed-up learned"}] * 4
    assert width_words({"tasks": never}).endswith(WIDTHS_ADVICE)
    assert "--widths 1,2" in WIDTHS_ADVICE
    tried = never + [{"width": 2, "width_reason": "exploring"}]
    assert WIDTHS_ADVICE not in width_words({"tasks": tried})


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
