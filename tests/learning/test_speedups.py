"""A malleable key's speed-up kept across runs: the serial fractions its runs at a width read go
into the profile store's ``speedups`` table, the next run's estimate carries them to the
scheduler, and a wide run teaches the key's run time at its narrowest width, not its wall time."""

import math
import sqlite3

import pytest

from scalpel_executor.core.widths import SHRINK, amdahl
from scalpel_executor.learning.estimates import Estimator
from scalpel_executor.learning.hints import Hints
from scalpel_executor.learning.store import Observation, ProfileStore


def _fft(n):
    return n


def test_readings_are_kept_per_key_and_odd_ones_are_not(tmp_path):
    path = tmp_path / "profiles.sqlite"
    with ProfileStore(path) as store:
        store.record([Observation("fft", "fft", runtime=2.0, serial=0.1), Observation("fft", "fft", serial=0.3),
                      Observation("fft", "fft", serial=math.nan), Observation("fft", "fft", serial=1.5),
                      Observation("gemm", "gemm", runtime=1.0)])
    with ProfileStore(path) as store:  # a later run
        [fft] = store.speedups()
        assert (fft.key, fft.readings) == ("fft", 2) and fft.serial_fraction == pytest.approx(0.2)
        assert fft.speedup(4) == pytest.approx(1 / amdahl(0.2, 4))
        assert store.speedup("gemm") is None and store.speedups("ff")[0].key == "fft"
        assert store.delete("fft", exact=True) == 1
        assert store.speedups() == []


def test_a_store_written_before_speedups_were_kept_gets_the_table_when_opened(tmp_path):
    path = tmp_path / "profiles.sqlite"
    with ProfileStore(path) as store:
        store.record([Observation("fft", "fft", runtime=2.0)])
    with sqlite3.connect(path) as connection:
        connection.execute("DROP TABLE speedups")
    with ProfileStore(path) as store:
        assert store.persistent and store.get("fft").runs == 1
        store.record([Observation("fft", "fft", serial=0.25)])
        assert store.speedup("fft").readings == 1


def test_clear_speedup_removes_a_keys_readings_and_keeps_its_profile(tmp_path, capsys):
    """``scalpel profile clear KEY --speedup`` (or ``--prefix``, ``--all``): a key's speed-up read
    badly (a loaded host) is forgotten, its run time and footprint kept; other keys untouched."""
    from scalpel_executor.cli import main
    path = tmp_path / "profiles.sqlite"
    with ProfileStore(path) as store:
        store.record([Observation(key, "app", runtime=2.0, footprint=1e6, serial=0.9)
                      for key in ("lab.fft(~64)", "lab.fft(~128)", "lab.qr(~64)")])
    assert main(["profile", "clear", "lab.fft(~64)", "--speedup", "--store", str(path)]) == 0
    assert capsys.readouterr().out == "removed the speed-up readings of 1 key, their profiles kept\n"
    with ProfileStore(path) as store:
        assert store.speedup("lab.fft(~64)") is None and store.get("lab.fft(~64)").runtime == 2.0
        assert store.speedup("lab.fft(~128)").readings == store.speedup("lab.qr(~64)").readings == 1
    assert main(["profile", "clear", "--prefix", "lab.fft", "--speedup", "--store", str(path)]) == 0
    assert main(["profile", "clear", "--all", "--speedup", "--store", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "removed the speed-up readings of 1 key, their profiles kept"
    with ProfileStore(path) as store:
        assert store.speedups() == [] and len(store.profiles()) == 3


def test_the_estimate_of_a_malleable_call_carries_its_keys_speed_up_and_a_fixed_ones_does_not(tmp_path):
    with ProfileStore(tmp_path / "profiles.sqlite") as store:
        store.record([Observation("fft", "fft", runtime=8.0, serial=0.1), Observation("fft", "fft", serial=0.3)])
        estimator = Estimator(store, default_footprint=1.0, default_runtime=1.0)
        malleable = estimator.estimate(_fft, (1,), {}, Hints(profile_key="fft", max_cores=4))
        assert malleable.speedup == pytest.approx((0.2, 2))
        assert estimator.estimate(_fft, (1,), {}, Hints(profile_key="fft")).speedup is None
        assert estimator.estimate(_fft, (1,), {}, Hints(profile_key="new", max_cores=4)).speedup is None


def test_a_wide_run_teaches_the_run_time_at_the_narrowest_width_and_its_reading(tmp_path):
    with ProfileStore(tmp_path / "profiles.sqlite") as store:
        estimator = Estimator(store, default_footprint=1.0, default_runtime=1.0)
        estimate = estimator.estimate(_fft, (1,), {}, Hints(profile_key="fft", max_cores=4))
        estimator.observe(estimate, {"wall": 3.0, "width": 4, "serial_reading": 0.1}, narrowest=1)
        serial = (0.1 + SHRINK) / (1 + SHRINK)
        narrow = 3.0 * amdahl(serial, 1) / amdahl(serial, 4)
        assert estimator.estimate(_fft, (1,), {}, Hints(profile_key="fft", max_cores=4)).runtime == pytest.approx(narrow)
        estimator.observe(estimate, {"wall": 5.0}, narrowest=1)  # a run at its narrowest width: as it is
        estimator.flush()
        assert store.get("fft").runtime_mean == pytest.approx((narrow + 5.0) / 2)
        assert store.speedup("fft").readings == 1 and store.speedup("fft").serial_fraction == pytest.approx(0.1)


def test_profile_show_says_a_keys_learned_speed_up(tmp_path, capsys):
    import json

    from scalpel_executor.cli import main
    path = str(tmp_path / "p.sqlite")
    with ProfileStore(path) as store:
        store.record([Observation("fft", "fft", runtime=2.0)])
    assert main(["profile", "show", "fft", "--store", path]) == 0
    assert "speed-up: none learned" in capsys.readouterr().out
    with ProfileStore(path) as store:
        store.record([Observation("fft", "fft", serial=0.1), Observation("fft", "fft", serial=0.1)])
    assert main(["profile", "show", "fft", "--store", path]) == 0
    out = capsys.readouterr().out
    assert "serial fraction 0.100 over 2 readings" in out and f"{1 / amdahl(0.1, 4):.2f}x on 4" in out
    assert main(["profile", "show", "fft", "--store", path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["speedup"]["readings"] == 2


def test_a_chain_counts_a_malleable_keys_task_at_its_widest_by_the_speed_up_so_far(tmp_path):
    with ProfileStore(tmp_path / "profiles.sqlite") as store:
        store.record([Observation("fft", "fft", runtime=8.0, serial=0.2)] * 3)
        estimator = Estimator(store, default_footprint=1.0, default_runtime=1.0)
        estimate = estimator.estimate(_fft, (1,), {}, Hints(profile_key="fft", max_cores=4))
        serial = (0.6 + SHRINK) / (3 + SHRINK)  # shrunk as the scheduler shrinks it
        assert estimator.at_widest("fft", 6.0, 1, 4) == pytest.approx(6.0 * amdahl(serial, 4))
        assert estimator.at_widest("fft", 6.0, 4, 4) == 6.0
        estimator.observe(estimate, {"wall": 2.0, "width": 4, "serial_reading": 0.5}, narrowest=1)
        serial = (1.1 + SHRINK) / (4 + SHRINK)  # the run's reading joins the store's
        assert estimator.at_widest("fft", 6.0, 2, 4) == pytest.approx(6.0 * amdahl(serial, 4) / amdahl(serial, 2))
        assert estimator.at_widest("never", 6.0, 1, 4) == 6.0  # no speed-up learned: no gain


def relax(n, alpha):
    return n * alpha


def test_a_new_key_of_a_swept_app_borrows_the_speed_up_its_other_keys_read(tmp_path):
    """A parameter sweep makes one key per value; the estimate of a malleable call of a value never
    run carries its family (the key before its arguments) with the store's readings of every key of
    it, and a chain counts it at their mean, worth up to two readings, until it reads its own."""
    with ProfileStore(tmp_path / "profiles.sqlite") as store:
        estimator = Estimator(store, default_footprint=1.0, default_runtime=1.0)
        first = [estimator.estimate(relax, (4096, alpha), {}, Hints(max_cores=4)) for alpha in (0.3, 0.6)]
        assert first[0].key != first[1].key and first[0].family == (f"{__name__}.relax", 0.0, 0)
        for estimate, reading in zip(first, (0.1, 0.3)):
            estimator.observe(estimate, {"wall": 2.0, "width": 4, "serial_reading": reading}, narrowest=1)
        estimator.flush()
    with ProfileStore(tmp_path / "profiles.sqlite") as store:  # a later run sweeps other values
        estimator = Estimator(store, default_footprint=1.0, default_runtime=1.0)
        new = estimator.estimate(relax, (4096, 1.2), {}, Hints(max_cores=4))
        assert new.speedup is None and new.family == pytest.approx((f"{__name__}.relax", 0.2, 2))
        serial = (0.4 + SHRINK) / (2 + SHRINK)  # the family's mean, worth two readings (BORROWED), shrunk
        assert estimator.at_widest(new.key, 6.0, 1, 4) == pytest.approx(6.0 * amdahl(serial, 4))
        estimator.observe(new, {"wall": 2.0, "width": 4, "serial_reading": 0.9}, narrowest=1)
        serial = (0.9 + SHRINK) / (1 + SHRINK)  # its own reading, not the family's
        assert estimator.at_widest(new.key, 6.0, 1, 4) == pytest.approx(6.0 * amdahl(serial, 4))
        assert estimator.estimate(relax, (4096, 1.2), {}, Hints()).family is None  # not malleable
        assert estimator.estimate(relax, (4096, 1.2), {}, Hints(profile_key="mine", max_cores=4)).family is None
