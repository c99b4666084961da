"""Profile keys, the SQLite profile store, estimates and `scalpel profile`: real files, real processes."""

import json
import logging
import math
import multiprocessing
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from scalpel_executor.cli import main
from scalpel_executor.core.batching import Batching
from scalpel_executor.learning.estimates import Estimator
from scalpel_executor.learning.hints import Hints
from scalpel_executor.learning.keys import app_name, bucket, profile_key, signature
from scalpel_executor.learning.store import Observation, ProfileStore


def matmul(n, dtype="float64"):
    return n


# -- keys ---------------------------------------------------------------------------------------


def test_matmul_sizes_do_not_share_a_profile():
    assert profile_key(matmul, (2000,)) != profile_key(matmul, (200,))
    assert profile_key(matmul, (2000,)) == profile_key(matmul, (2010,))
    assert profile_key(matmul, (2000,)).startswith(f"{__name__}.matmul(")


@given(st.floats(min_value=16, max_value=1e15))
def test_bucket_representative_is_within_a_ninth_of_the_value(value):
    representative = float(bucket(value)[1:])
    assert 2 ** -0.126 <= representative / value <= 2 ** 0.126


@given(st.integers(min_value=16, max_value=10**12), st.integers(min_value=16, max_value=10**12))
def test_buckets_never_merge_values_more_than_a_quarter_octave_and_a_bit_apart(a, b):
    if max(a, b) / min(a, b) > 2 ** 0.26:
        assert bucket(a) != bucket(b)


def test_arrays_files_and_strings_have_size_signatures(tmp_path):
    numpy = pytest.importorskip("numpy")
    assert signature(numpy.zeros((1000, 3))) == "f8[~1024x3]"
    assert signature(numpy.zeros((1000, 3), dtype=numpy.float32)) == "f4[~1024x3]"
    small, large = tmp_path / "small.fits", tmp_path / "large.fits"
    small.write_bytes(b"x" * 2**20)
    large.write_bytes(b"x" * 2**23)
    assert signature(str(small)) != signature(str(large))
    assert signature(str(small)).startswith("file~")
    # unique labels and not-yet-existing output names must not make every task a new key
    assert signature("out/tile_17.fits") == signature("out/tile_18.fits")
    assert signature("gemm") != signature("jacobi-2d")


def test_parsl_files_bash_apps_and_parsl_kwargs(tmp_path):
    from functools import partial

    from parsl.app.bash import remote_side_bash_executor
    from parsl.data_provider.files import File

    data = tmp_path / "in.dat"
    data.write_bytes(b"x" * 2_000_000)
    assert signature(File(str(data))).startswith("file~")

    def mosaic(n, stdout=None):
        return f"mosaic {n}"

    bash = partial(remote_side_bash_executor, mosaic)
    assert app_name(bash).endswith("mosaic")
    direct = profile_key(mosaic, (8,), {"stdout": "a.out"})
    assert profile_key(bash, (8,), {"stdout": "b.out", "walltime": 5, "_parsl_monitoring_task_id": 3}) == direct
    assert profile_key(mosaic, (8,), {"inputs": [File(str(data))]}) != profile_key(mosaic, (8,))


def test_estimator_order_hint_then_store_then_prior(tmp_path):
    store = ProfileStore(tmp_path / "p.sqlite")
    key = profile_key(matmul, (500,))
    store.record([Observation(key, "m", runtime=4.0, footprint=8e6)])
    estimator = Estimator(store, default_footprint=1.0, default_runtime=2.0)
    stored = estimator.estimate(matmul, (500,), {}, Hints())
    assert (stored.footprint, stored.runtime, stored.footprint_source) == (8e6, 4.0, "store")
    hinted = estimator.estimate(matmul, (500,), {}, Hints(footprint=5.0))
    assert (hinted.footprint, hinted.footprint_source, hinted.runtime_source) == (5.0, "hint", "store")
    fresh = estimator.estimate(matmul, (50,), {}, Hints())
    assert (fresh.footprint, fresh.runtime, fresh.runtime_source) == (1.0, 2.0, "prior")
    assert estimator.priors == {fresh.key}
    estimator.observe(fresh, {"wall": 0.5, "footprint": 3e5})
    learned = estimator.estimate(matmul, (50,), {}, Hints())
    assert (learned.runtime, learned.footprint, learned.runtime_source) == (0.5, 3e5, "learned")
    named = estimator.estimate(matmul, (50,), {}, Hints(profile_key="mine"))
    assert named.key == "mine"
    estimator.flush()
    assert store.get(fresh.key).runs == 1


def test_key_function_overrides_and_names_itself_when_it_breaks():
    def by_first_argument(func, args, kwargs):
        return None if args[0] == 0 else f"size-{args[0]}"

    estimator = Estimator(None, 0, 1, key_function=by_first_argument)
    assert estimator.estimate(matmul, (7,), {}, Hints()).key == "size-7"
    assert estimator.estimate(matmul, (0,), {}, Hints()).key == profile_key(matmul, (0,))

    def broken(func, args, kwargs):
        raise KeyError("nope")

    with pytest.raises(ValueError, match="'broken' raised KeyError"):
        Estimator(None, 0, 1, key_function=broken).estimate(matmul, (1,), {}, Hints())


# -- the store ----------------------------------------------------------------------------------

finite = st.floats(min_value=0, max_value=1e9, allow_nan=False)


@settings(max_examples=40, deadline=None)
@given(st.lists(finite, min_size=1, max_size=30))
def test_running_statistics_match_the_textbook(values):
    with ProfileStore(":memory:") as store:
        for value in values:
            store.record([Observation("k", "app", runtime=value, footprint=value)])
        profile = store.get("k")
    assert profile.runs == profile.footprint_runs == len(values)
    assert math.isclose(profile.runtime_mean, statistics.fmean(values), rel_tol=1e-9, abs_tol=1e-6)
    if len(values) > 1:
        assert math.isclose(profile.runtime_std, statistics.stdev(values), rel_tol=1e-6, abs_tol=1e-3)
    ewma = values[0]
    for value in values[1:]:
        ewma = 0.3 * value + 0.7 * ewma
    assert math.isclose(profile.runtime, ewma, rel_tol=1e-9, abs_tol=1e-6)


observations = st.lists(st.builds(
    lambda key, exact, runtime, footprint, rss: Observation(
        key, "app", runtime=runtime, footprint=footprint, peak_rss=rss,
        shape=None if key == "app(n<16)" else "app(n<16)" if key.startswith("app(") else None,
        exact=f"app({exact})" if key == "app(n<16)" else None),
    st.sampled_from(["app(n<16)", "app(3)", "other"]), st.integers(0, 3),
    st.one_of(st.none(), finite), st.one_of(st.none(), st.sampled_from([1e6, 8e6, 64e6])),
    st.one_of(st.none(), finite)), min_size=1, max_size=25)


def _rows(store: ProfileStore) -> dict:
    """Every row of the tables ``record`` writes, without the time it wrote them."""
    with store._lock:
        read = store._connection.execute
        return {table: sorted(tuple(v for c, v in zip(columns, row) if c != "updated")
                              for row in read(f"SELECT {', '.join(columns)} FROM {table}").fetchall())
                for table, columns in (("profiles", [d[1] for d in read("PRAGMA table_info(profiles)")]),
                                       ("variants", [d[1] for d in read("PRAGMA table_info(variants)")]))}


@settings(max_examples=60, deadline=None)
@given(observations)
def test_a_batch_folds_as_its_observations_one_at_a_time(batch):
    """``record`` reads and writes each key's row once per batch: the statistics, variants, parents
    and split marks are those of folding the observations one by one."""
    with ProfileStore(":memory:") as together, ProfileStore(":memory:") as alone:
        together.record(batch)
        for observation in batch:
            alone.record([observation])
        rows = _rows(alone)
        assume(not any(row[-1] for row in rows["profiles"]))  # a split mid-way: a batch splits after its folds
        assert _rows(together) == rows


def test_a_batch_costs_the_store_statements_per_key_not_per_observation(tmp_path):
    """The driver's flush thread folds every task's measurements: 2,000 tasks of two keys (one with
    its variants) cost a handful of statements per key, as 20 tasks do (a read and a write per
    observation cost 20-44 us a task)."""
    def statements(count: int) -> int:
        with ProfileStore(tmp_path / f"p{count}.sqlite") as store:
            executed = []
            store._connection.set_trace_callback(executed.append)
            store.record([Observation("app(n<16)", "app", runtime=1.0 + i % 3, shape=None, exact=f"app({i % 4})")
                          for i in range(count)] +
                         [Observation("other", "other", runtime=2.0, footprint=1e6) for _ in range(count)])
            return sum(1 for text in executed if not text.startswith(("BEGIN", "COMMIT")))
    assert statements(2000) == statements(20) < 40


def test_unmeasured_values_teach_nothing():
    with ProfileStore(":memory:") as store:
        store.record([Observation("k", "a", runtime=1.0, footprint=None), Observation("k", "a", runtime=float("nan"))])
        profile = store.get("k")
    assert (profile.runs, profile.footprint_runs, profile.footprint) == (1, 0, None)


def test_new_store_is_private_to_its_user(tmp_path):
    path = tmp_path / "deep" / "profiles.sqlite"
    with ProfileStore(path) as store:
        store.record([Observation("k", "a", runtime=1.0)])
        assert store.persistent
    assert (path.parent.stat().st_mode & 0o777) == 0o700
    for candidate in path.parent.iterdir():
        assert (candidate.stat().st_mode & 0o077) == 0, candidate
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _hammer(path, worker, count):
    with ProfileStore(path) as store:
        for i in range(count):
            store.record([Observation("shared", "app", runtime=1.0 + worker, footprint=float(i))])
            store.record([Observation(f"own-{worker}", "app", runtime=1.0)])


def test_two_processes_writing_at_once_lose_no_counts(tmp_path):
    path = tmp_path / "p.sqlite"
    ProfileStore(path).close()
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_hammer, args=(path, worker, 300)) for worker in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
        assert process.exitcode == 0
    with ProfileStore(path) as store:
        assert store.get("shared").runs == 600
        assert store.get("shared").footprint_runs == 600
        assert store.get("own-0").runs == store.get("own-1").runs == 300
        assert math.isclose(store.get("shared").runtime_mean, 1.5)


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_damaged_store_warns_once_and_the_run_goes_on(tmp_path, caplog, damage):
    path = tmp_path / "p.sqlite"
    with ProfileStore(path) as store:
        store.record([Observation(f"k{i}", "a", runtime=float(i)) for i in range(2000)])
    data = path.read_bytes() if path.stat().st_size else b""
    for extra in ("-wal", "-shm"):
        (tmp_path / f"p.sqlite{extra}").unlink(missing_ok=True)
    path.write_bytes(b"this is not a database " * 500 if damage == "garbage" else data[: len(data) // 3])
    with caplog.at_level(logging.WARNING, logger="scalpel_executor"):
        store = ProfileStore(path)
        store.record([Observation("new", "a", runtime=2.0)])
        store.record([Observation("new", "a", runtime=4.0)])
        assert store.get("new").runs == 2
        store.profiles()
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "running without persistence" in warnings[0].getMessage()
    assert not store.persistent and store.problem


def _make_read_only(folder):
    """chattr +i stops even root; plain permissions do for everyone else."""
    if os.geteuid() == 0:
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(folder)], check=False).returncode != 0:
            pytest.skip("cannot make a directory read-only for root here")
        return lambda: subprocess.run(["chattr", "-i", str(folder)], check=True)
    folder.chmod(0o500)
    return lambda: folder.chmod(0o700)


def test_a_read_only_store_keeps_answering_and_stops_saving(tmp_path, caplog):
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "p.sqlite"
    with ProfileStore(path) as store:
        store.record([Observation("known", "a", runtime=3.0, footprint=1e6)])
    for extra in ("-wal", "-shm"):
        (folder / f"p.sqlite{extra}").unlink(missing_ok=True)
    undo = _make_read_only(folder)
    try:
        with caplog.at_level(logging.WARNING, logger="scalpel_executor"):
            store = ProfileStore(path)
            assert store.get("known").runtime == 3.0  # what was stored still answers
            store.record([Observation("fresh", "a", runtime=1.0)])
            assert store.get("fresh").runs == 1
            store.close()
    finally:
        undo()
    assert not ProfileStore(path).get("fresh")  # nothing was written to the read-only file
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1


def test_a_directory_is_refused_with_the_fix(tmp_path):
    with pytest.raises(ValueError, match="is a directory; give a file path such as"):
        ProfileStore(tmp_path)
    from scalpel_executor import ScalpelExecutor

    with pytest.raises(ValueError, match="profiles=False"):
        ScalpelExecutor(profiles=str(tmp_path))


def test_export_import_round_trip_and_bad_documents(tmp_path):
    with ProfileStore(":memory:") as source:
        source.record([Observation("a(1)", "a", runtime=r, footprint=r * 10) for r in (1.0, 2.0, 4.0)])
        document = json.loads(json.dumps(source.export()))
    with ProfileStore(":memory:") as target:
        assert target.import_document(document, prefix="x/") == 1
        imported, original = target.get("x/a(1)"), None
    with ProfileStore(":memory:") as again:
        again.record([Observation("a(1)", "a", runtime=r, footprint=r * 10) for r in (1.0, 2.0, 4.0)])
        original = again.get("a(1)")
    for field in ("runs", "runtime", "runtime_mean", "runtime_std", "footprint", "footprint_std"):
        assert getattr(imported, field) == pytest.approx(getattr(original, field)), field
    with ProfileStore(":memory:") as target:
        with pytest.raises(ValueError, match="format"):
            target.import_document({"tasks": []})
        with pytest.raises(ValueError, match="task #1"):
            target.import_document({"format": "scalpel-profile/1", "tasks": [{"name": "ok", "runtime": 1},
                                                                           {"name": "bad", "runtime": "soon"}]})


def test_the_store_holds_only_numbers_and_strings(tmp_path):
    path = tmp_path / "p.sqlite"
    with ProfileStore(path) as store:
        store.record([Observation("k", "a", runtime=1.0, footprint=2.0, peak_rss=3.0)])
    connection = sqlite3.connect(path)
    types = {row[0] for row in connection.execute("SELECT DISTINCT typeof(value) FROM meta")}
    for column in ("key", "app", "runs", "runtime_ewma", "footprint_ewma", "peak_rss", "llc_miss_rate", "origin"):
        types |= {row[0] for row in connection.execute(f"SELECT DISTINCT typeof({column}) FROM profiles")}
    assert types <= {"text", "integer", "real", "null"}


# -- the command line ---------------------------------------------------------------------------


def test_cli_import_list_show_export_clear(tmp_path, capsys):
    store = str(tmp_path / "p.sqlite")
    assert main(["profile", "import", "polybench-xeon-e5620", "--prefix", "pb/", "--store", store]) == 0
    assert "imported 23 profiles" in capsys.readouterr().out
    assert main(["profile", "list", "--store", store, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert len(listed) == 23 and listed[0]["key"].startswith("pb/")
    assert main(["profile", "show", "pb/adi", "--store", store, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["runtime"] == 41.47
    assert main(["profile", "show", "pb/nope", "--store", store]) == 2
    assert "no profile with key 'pb/nope'" in capsys.readouterr().err
    out = tmp_path / "export.json"
    assert main(["profile", "export", "--store", store, "-o", str(out)]) == 0
    assert len(json.loads(out.read_text())["tasks"]) == 23
    assert main(["profile", "clear", "--store", store]) == 2  # says what to clear
    assert main(["profile", "clear", "pb/adi", "--store", store]) == 0
    assert main(["profile", "clear", "--prefix", "pb/2", "--store", store]) == 0
    capsys.readouterr()
    assert main(["profile", "list", "--store", store, "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 23 - 1 - 1  # adi and 2mm
    # an exported store is also a profile the simulator reads
    assert main(["simulate", "--profile", str(out), "--machine", "2x4:12MiB", "--tasks", "8", "--repeats", "1",
                 "--json"]) == 0


def test_cli_run_measures_every_repeat_not_a_sample(tmp_path, capsys, monkeypatch):
    """The executor measures a sample of a key's tasks (first 3, then one in 20); profiling asks for all."""
    module = tmp_path / "fill_kernels.py"
    module.write_text("import time\n\ndef fill(n):\n    data = bytearray(n)\n    end = time.monotonic() + 0.3\n"
                      "    while time.monotonic() < end:\n        data[::4096] = bytes(len(range(0, n, 4096)))\n"
                      "    return len(data)\n")
    monkeypatch.chdir(tmp_path)
    store = str(tmp_path / "p.sqlite")
    assert main(["profile", "run", "fill_kernels:fill", "20000000", "--repeat", "5", "--store", store, "--json"]) == 0
    profile = json.loads(capsys.readouterr().out)
    assert profile["runs"] == 5
    assert profile["footprint_runs"] == 5, profile  # sampling would have measured the first 3 only


def test_cli_run_stores_no_call_that_timed_imports_and_runs_it_again(tmp_path, capsys, monkeypatch):
    """A worker's first call imported a slow module: run again, so --repeat 2 stores two calls that
    timed the app alone; a function importing something new on every call is refused, nothing stored."""
    (tmp_path / "slow_import.py").write_text("import time\ntime.sleep(0.6)\n")
    (tmp_path / "lazy_kernels.py").write_text(
        "import sys, types\n\ndef f():\n    import slow_import\n    return 1\n\n"
        "def fresh():\n    sys.modules[f'fresh_{len(sys.modules)}'] = types.ModuleType('x')\n    return 1\n")
    monkeypatch.chdir(tmp_path)
    store = str(tmp_path / "p.sqlite")
    assert main(["profile", "run", "lazy_kernels:f", "--repeat", "2", "--store", store]) == 0
    out = capsys.readouterr().out
    assert "it imported modules (a worker's first call of the app): not stored, run again" in out
    assert "run 1/2" in out and "run 2/2" in out
    with ProfileStore(store) as opened:
        (profile,) = opened.profiles()
    assert profile.runs == 2 and profile.runtime_mean < 0.3, profile  # the 0.6 s import left out
    assert main(["profile", "run", "lazy_kernels:fresh", "--repeat", "2", "--store", store]) == 1
    assert "imported modules on each of its 3 calls" in capsys.readouterr().err
    with ProfileStore(store) as opened:
        assert [p.key for p in opened.profiles()] == [profile.key]


def test_show_prints_seconds_sizes_a_local_time_and_what_a_footprint_of_none_means(tmp_path, capsys):
    store = tmp_path / "p.sqlite"
    with ProfileStore(store) as profiles:
        profiles.record([Observation("short", "m.short", 0.0015, 0.0), Observation("short", "m.short", 0.0017, 0.0),
                         Observation("long", "m.long", 2.5, 24 * 2**20, 80 * 2**20, 0.125)])
    assert main(["profile", "show", "short", "--store", str(store)]) == 0
    lines = dict(line.strip().split(": ", 1) for line in capsys.readouterr().out.splitlines())
    assert lines["footprint"].startswith("0 B (none held: its tasks ended before the probe's first window")
    assert lines["runtime_mean"] == "0.0016 s" and lines["llc_miss_rate"] == "-" and lines["refines"] == "-"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+", lines["updated"]), lines["updated"]
    assert main(["profile", "show", "long", "--store", str(store)]) == 0
    lines = dict(line.strip().split(": ", 1) for line in capsys.readouterr().out.splitlines())
    assert (lines["footprint"], lines["peak_rss"], lines["llc_miss_rate"]) == ("24.0 MiB", "80.0 MiB", "12.5%")
    assert lines["runtime"] == "2.5 s"


def test_cli_run_and_show_point_a_user_at_what_they_meant(tmp_path, capsys, monkeypatch):
    """A file for a module, NAME=VALUE as an argument, a key by its app's name or misspelt: each
    refused with what to type; a script's function stored with the key its workflow will use said."""
    (tmp_path / "pipeline.py").write_text("def generate(seed, n=3):\n    return [seed] * n\n\n"
                                          "if __name__ == '__main__':\n    print(generate(1))\n")
    monkeypatch.chdir(tmp_path)
    store = str(tmp_path / "p.sqlite")
    assert main(["profile", "run", "pipline.py:generate", "3", "--store", store]) == 2
    assert f"no file 'pipline.py' (from 'pipline.py:generate') in {tmp_path}" in capsys.readouterr().err
    assert main(["profile", "run", "pipeline:generate", "n=3", "--store", store]) == 2
    assert "argument 'n=3' would be passed as the string 'n=3'; for the keyword argument n, give --kw n=3" in \
        capsys.readouterr().err
    assert main(["profile", "run", "pipeline:generate", "3", "--store", store]) == 0
    assert ("note: pipeline is a script; run as `python pipeline.py` its tasks' key is __main__.generate(n<16): "
            "add --key '__main__.generate(n<16)' to store this there") in capsys.readouterr().out
    for wanted in ("generate", "pipeline.generat(n<16)"):
        assert main(["profile", "show", wanted, "--store", store]) == 2
        assert "did you mean 'pipeline.generate(n<16)'?" in capsys.readouterr().err
    assert main(["profile", "show", "nothing-like-it", "--store", store]) == 2
    assert "did you mean" not in capsys.readouterr().err


def test_show_takes_a_key_as_list_prints_it_where_that_names_one(tmp_path, capsys):
    """``list`` cuts a long key, and every key of its module loses the module as it does
    (``__main__.``); ``show`` takes a key as printed there, and a key printed alike for two is
    refused with both named."""
    store = tmp_path / "p.sqlite"
    long = "__main__.reduce_all(" + ",".join(["dict"] * 30) + ")"
    with ProfileStore(store) as profiles:
        profiles.record([Observation(key, key.partition("(")[0], runtime=1.0) for key in
                         ("__main__.covariance(~1218,*)", long, "a.fit(n<16)", "b.fit(n<16)")])
    assert main(["profile", "list", "--store", str(store)]) == 0
    listed = capsys.readouterr().out
    assert "\ncovariance(~1218,*) " in listed and "__main__" not in listed
    assert main(["profile", "show", "covariance(~1218,*)", "--store", str(store), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["key"] == "__main__.covariance(~1218,*)"
    assert main(["profile", "show", "fit(n<16)", "--store", str(store)]) == 2  # a part of two keys: not one
    assert "did you mean 'a.fit(n<16)' or 'b.fit(n<16)'?" in capsys.readouterr().err


def test_cli_run_imports_a_script_by_its_path_from_its_own_folder(tmp_path, capsys, monkeypatch):
    """``scripts/stage.py:fit`` typed outside the script's folder: imported from that folder, as
    ``python scripts/stage.py`` runs it (its import of a module beside it works), measured, and the
    key its workflow's tasks have said with the command that runs it; a file that is not a module
    name is refused naming it."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "stage_helpers.py").write_text("def twice(x):\n    return 2 * x\n")
    (scripts / "stage.py").write_text("from stage_helpers import twice\n\ndef fit(n):\n    return twice(n)\n\n"
                                      "if __name__ == '__main__':\n    print(fit(1))\n")
    (scripts / "my-stage.py").write_text("def fit(n):\n    return n\n")
    monkeypatch.chdir(tmp_path)
    store = str(tmp_path / "p.sqlite")
    assert main(["profile", "run", "scripts/stage.py:fit", "3", "--store", store]) == 0
    out = capsys.readouterr().out
    assert "stored stage.fit(n<16)" in out
    assert ("run as `python scripts/stage.py` its tasks' key is __main__.fit(n<16): "
            "add --key '__main__.fit(n<16)'") in out
    assert main(["profile", "run", "scripts/my-stage.py:fit", "3", "--store", store]) == 2
    assert "a file named 'my-stage.py' cannot be imported as a module" in capsys.readouterr().err


def test_cli_run_measures_an_app_once_and_stores_it(tmp_path, capsys, monkeypatch):
    module = tmp_path / "sample_kernels.py"
    module.write_text("def square_sum(n):\n    return sum(i * i for i in range(n))\n")
    monkeypatch.chdir(tmp_path)
    store = str(tmp_path / "p.sqlite")
    assert main(["profile", "run", "sample_kernels:square_sum", "20000", "--repeat", "2", "--store", store, "--json"]) == 0
    profile = json.loads(capsys.readouterr().out)
    assert profile["key"] == "sample_kernels.square_sum(~2e+04)" or profile["key"].startswith("sample_kernels.square_sum(")
    assert profile["runs"] == 2 and profile["runtime"] > 0
    assert main(["profile", "run", "sample_kernels:nothing", "--store", store]) == 2
    assert "has no attribute 'nothing'" in capsys.readouterr().err


# -- learning across runs, through real workers and the real probe -------------------------------


def _warm():
    import numpy  # noqa: F401

    return 0


def _touch(kib, seconds=1.2):
    import time

    import numpy as np

    hot = np.ones(int(kib * 2**10) // 8)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        hot += 1.0
    return kib


def _run_batch(store_path, sizes):
    from scalpel_executor import ScalpelExecutor

    executor = ScalpelExecutor(profiles=str(store_path), topology="2x2:8MiB", batching=Batching(window=0.0))
    executor.start()
    try:
        for future in [executor.submit(_warm, {"profile_key": "warm-up"}) for _ in range(8)]:
            future.result()
        futures = [executor.submit(_touch, {}, kib) for kib in sizes]
        assert [future.result() for future in futures] == list(sizes)
    finally:
        executor.shutdown()
    by_key = {record.profile_key: record for record in executor.records if record.profile_key != "warm-up"}
    return executor, [by_key[profile_key(_touch, (kib,))] for kib in sizes]


def test_a_second_run_groups_by_what_the_first_measured(tmp_path):
    from scalpel_executor.core.grouping import group_tasks

    sizes = (1024, 24 * 1024, 4 * 1024, 12 * 1024)  # KiB: sizes (an argument below 16 would share a key)
    store = tmp_path / "p.sqlite"
    first, records = _run_batch(store, sizes)
    assert {r.footprint_source for r in records} == {"prior"}
    assert len(first.run_report()["priors"]) == len(sizes) + 1  # the four sizes and the warm-up key
    measured = [r.stats.get("footprint") for r in records]
    assert all(m is not None for m in measured), [r.stats.get("footprint_source") for r in records]

    second, records = _run_batch(store, sizes)
    assert {r.footprint_source for r in records} == {"store"}
    assert {r.runtime_source for r in records} == {"store"}
    assert second.run_report()["priors"] == []
    estimated = [r.footprint for r in records]
    true = [kib * 2**10 for kib in sizes]
    assert group_tasks(estimated, 2, 2) == group_tasks(true, 2, 2)


def test_a_run_on_a_garbage_store_completes_and_says_so(tmp_path, caplog):
    from scalpel_executor import ScalpelExecutor

    store = tmp_path / "p.sqlite"
    store.write_bytes(b"\x00garbage" * 1000)
    executor = ScalpelExecutor(profiles=str(store), batching=Batching(window=0.0))
    with caplog.at_level(logging.WARNING, logger="scalpel_executor"):
        executor.start()
        try:
            assert [executor.submit(pow, {}, 2, n).result() for n in range(20)] == [2**n for n in range(20)]
        finally:
            executor.shutdown()
    report = executor.run_report()
    assert report["profile_store"]["persistent"] is False and "not a database" in report["profile_store"]["problem"]
    assert report["tasks_finished"] == 20 and report["tasks_failed"] == 0
    assert len([r for r in caplog.records if "running without persistence" in r.getMessage()]) == 1


# -- commands that write refuse a store they cannot write ------------------------------------------


def _garbage_store(folder):
    path = folder / "p.sqlite"
    path.write_bytes(b"this is not a database " * 500)
    return path, lambda: None


def _read_only_store(folder):
    path = folder / "p.sqlite"
    with ProfileStore(path) as store:
        store.record([Observation("known", "a", runtime=3.0)])
    for extra in ("-wal", "-shm"):
        (folder / f"p.sqlite{extra}").unlink(missing_ok=True)
    return path, _make_read_only(folder)


@pytest.mark.parametrize("make", [_garbage_store, _read_only_store], ids=["corrupt", "read-only"])
def test_import_clear_and_run_refuse_a_store_they_cannot_write(tmp_path, capsys, make):
    folder = tmp_path / "store"
    folder.mkdir()
    path, undo = make(folder)
    before = path.read_bytes()
    commands = {
        "import": ["profile", "import", "polybench-xeon-e5620", "--store", str(path)],
        "clear": ["profile", "clear", "--all", "--store", str(path)],
        "clear key": ["profile", "clear", "known", "--store", str(path)],
        "run": ["profile", "run", "math:sqrt", "4", "--store", str(path)],
    }
    try:
        for name, argv in commands.items():
            assert main(argv) == 2, name
            captured = capsys.readouterr()
            assert captured.out == "", name  # no "imported 23 profiles", no "removed 0 profiles"
            assert len(captured.err.strip().splitlines()) == 1, captured.err  # the store's warning is folded in
            assert captured.err.startswith("scalpel: cannot ") and f"the profile store {path} cannot be written" in captured.err
            assert "nothing was saved" in captured.err and "--store" in captured.err
    finally:
        undo()
    assert path.read_bytes() == before  # nothing was written
    if make is _read_only_store:
        with ProfileStore(path) as store:
            assert [p.key for p in store.profiles()] == ["known"]


def test_import_and_clear_still_report_what_they_did_on_a_good_store(tmp_path, capsys):
    store = str(tmp_path / "p.sqlite")
    assert main(["profile", "import", "polybench-xeon-e5620", "--store", store]) == 0
    assert capsys.readouterr().out.startswith("imported 23 profiles")
    assert main(["profile", "clear", "--all", "--store", store]) == 0
    assert capsys.readouterr().out == "removed 23 profiles\n"


def test_import_of_a_malformed_file_names_the_file_and_touches_no_store(tmp_path, capsys):
    document = tmp_path / "profiles.json"
    document.write_text(json.dumps({"format": "scalpel-profile/1", "tasks": [{"name": "ok", "runtime": 1},
                                                                             {"name": "bad", "runtime": [2]}]}))
    store = tmp_path / "p.sqlite"
    assert main(["profile", "import", str(document), "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"scalpel: {document}: task #1") and "runtime must be a number, got [2]" in err
    assert not store.exists()


@pytest.mark.parametrize("number, body, message", [
    (0, "import sys\n\ndef f():\n    sys.exit(3)\n", "called sys.exit(3) instead of returning (run 1 of 1)"),
    (1, "import sys\n\ndef f():\n    sys.exit()\n", "called sys.exit() instead of returning"),
    (2, "def f():\n    raise RuntimeError('kaboom')\n", "raised RuntimeError: kaboom at "),
    (3, "def f():\n    raise ValueError('bad\\nvalue')\n", "raised ValueError: bad value at "),
])
def test_cli_run_of_a_function_that_fails_or_exits_says_so_in_one_line(tmp_path, capsys, monkeypatch, number, body,
                                                                       message):
    module = f"sample_failing_{number}"  # a name of its own: workers keep the modules they imported
    (tmp_path / f"{module}.py").write_text(body)
    monkeypatch.chdir(tmp_path)
    code = main(["profile", "run", f"{module}:f", "--store", str(tmp_path / "p.sqlite")])
    captured = capsys.readouterr()
    assert code == 1  # the function failed; 2 is for bad usage
    assert len(captured.err.strip().splitlines()) == 1 and "Traceback" not in captured.err, captured.err
    assert captured.err.startswith(f"scalpel: {module}:f {message}"), captured.err
    if " at " in message:
        assert f"{module}.py:" in captured.err  # where in the user's code


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_store_deleted_or_replaced_while_in_use_is_written_again_with_what_the_run_held(tmp_path, caplog, how):
    path = tmp_path / "profiles.sqlite"
    store = ProfileStore(path)
    store.record([Observation("before", "app", runtime=1.0, footprint=2e6)])
    for name in ("profiles.sqlite", "profiles.sqlite-wal", "profiles.sqlite-shm"):
        if (tmp_path / name).exists():
            os.remove(tmp_path / name)
    if how == "replaced":
        path.write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="scalpel_executor"):
        store.record([Observation("after", "app", runtime=2.0, footprint=4e6)])
    store.close()
    assert f"{how} while in use; wrote it again with the 1 profiles this run held" in caplog.text
    reopened = ProfileStore(path)  # a later run sees both: nothing measured after the deletion was lost
    assert reopened.persistent and {p.key for p in reopened.profiles()} == {"before", "after"}
    reopened.close()


def test_reading_a_store_that_is_not_there_names_the_path_and_creates_nothing(tmp_path, capsys):
    missing = tmp_path / "mistyped.sqlite"
    for command in (["profile", "list"], ["profile", "show", "k"], ["profile", "export"]):
        assert main([*command, "--store", str(missing)]) == 2
        assert f"no profile store at {missing}" in capsys.readouterr().err
    assert not missing.exists()


def test_cli_run_under_a_workflows_key_counts_it_as_one_of_the_workflows_app(tmp_path, capsys, monkeypatch):
    """``--key`` names the key a script's tasks have (``__main__.relax(...)``): the measured runs count
    as that app's, so the script's calls of other values fall back to them (their run time is
    the app's, not the prior's guess); a key naming no app keeps the function's."""
    from scalpel_executor.learning.estimates import Estimator
    from scalpel_executor.learning.hints import Hints
    (tmp_path / "sweep_kernels.py").write_text("def relax(n, alpha):\n    return sum(range(n)) * alpha\n")
    monkeypatch.chdir(tmp_path)
    store = str(tmp_path / "p.sqlite")
    assert main(["profile", "run", "sweep_kernels:relax", "200000", "0.5", "--repeat", "2", "--store", store,
                 "--key", "__main__.relax(~194723,~0.5)"]) == 0
    assert main(["profile", "run", "sweep_kernels:relax", "200000", "2.0", "--store", store, "--key", "mine"]) == 0
    capsys.readouterr()
    with ProfileStore(store) as opened:
        assert opened.get("__main__.relax(~194723,~0.5)").app == "__main__.relax"
        assert opened.get("mine").app == "sweep_kernels.relax"
        assert opened.app_profile("__main__.relax").runs == 2

        def relax(n, alpha):  # the script's own function, as its tasks call it
            return n * alpha
        relax.__module__, relax.__qualname__ = "__main__", "relax"
        estimate = Estimator(opened, default_footprint=1.0, default_runtime=1.0).estimate(relax, (200000, 3.0), {},
                                                                                           Hints())
    assert estimate.runtime_source == "app" and estimate.key != "__main__.relax(~194723,~0.5)"


def test_cli_run_refuses_a_module_that_runs_its_workflow_when_imported(tmp_path, capsys, monkeypatch):
    """A script with no ``if __name__ == "__main__":`` runs its workflow when ``profile run``
    imports it: serialising its first task imports the module its import holds, and the command
    waited forever. Its first task is refused (an ``except Exception:`` of its own does not swallow
    that), in a line that says what to change; its DataFlowKernel is cleaned up and Parsl left as
    it was. A module that only loads a configuration at import is measured as before."""
    import sys
    import parsl
    from parsl.dataflow.dflow import DataFlowKernel
    (tmp_path / "notebook_script.py").write_text(
        "import parsl\nfrom parsl import python_app\nfrom parsl.config import Config\n"
        "from scalpel_executor import ScalpelExecutor\n\n"
        "@python_app\ndef square(x):\n    return x * x\n\n"
        "parsl.load(Config(executors=[ScalpelExecutor(profiles=False)]))\n"
        "try:\n    print(square(3).result())\nexcept Exception as error:\n    print('swallowed', error)\n"
        "parsl.dfk().cleanup()\n")
    message = ("importing module 'notebook_script' runs a Parsl workflow (it submits a task), whose tasks would "
               "wait for the import forever: put the workflow under 'if __name__ == \"__main__\":'")
    command = [sys.executable, "-c", "import sys; from scalpel_executor.cli import main; sys.exit(main(sys.argv[1:]))",
               "profile", "run", "notebook_script:square", "3", "--store", str(tmp_path / "p.sqlite")]
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr[-2000:]
    assert message in run.stderr and "swallowed" not in run.stdout
    monkeypatch.chdir(tmp_path)
    submit = DataFlowKernel.submit
    assert main(["profile", "run", "notebook_script:square", "3", "--store", str(tmp_path / "p.sqlite")]) == 2
    assert message in capsys.readouterr().err
    assert DataFlowKernel.submit is submit
    with parsl.load(parsl.config.Config(executors=[parsl.executors.ThreadPoolExecutor()])):  # Parsl works as before
        assert parsl.python_app(lambda: 7)().result() == 7
    (tmp_path / "loads_only.py").write_text(  # a tutorial's layout: the configuration loaded at import
        "import parsl\nfrom parsl.config import Config\nfrom parsl.executors import ThreadPoolExecutor\n"
        "parsl.load(Config(executors=[ThreadPoolExecutor()]))\n\ndef double(x):\n    return 2 * x\n")
    run = subprocess.run([*command[:5], "loads_only:double", "3", "--store", str(tmp_path / "p.sqlite")],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "stored loads_only.double" in run.stdout, run.stderr[-2000:]


def test_cli_run_of_a_bash_app_times_its_command_not_the_line(tmp_path, capsys, monkeypatch):
    """A bash app's function returns its command line: ``profile run`` runs that line as Parsl's
    bash app does (its defaults, ``stdout`` and the like, passed too), and stores the command's run
    time under the key a workflow's call has; a command that fails is said in one line."""
    (tmp_path / "shell_steps.py").write_text(
        "from parsl import bash_app\n\n"
        "@bash_app\ndef pause(seconds, stdout=None):\n    return f'sleep {seconds}'\n\n"
        "@bash_app\ndef broken(stdout=None):\n    return 'exit 3'\n\n"
        "import parsl\n\n@bash_app\ndef logged(stdout=parsl.AUTO_LOGNAME, stderr=parsl.AUTO_LOGNAME):\n"
        "    return 'echo hello'\n")
    monkeypatch.chdir(tmp_path)
    store = str(tmp_path / "p.sqlite")
    assert main(["profile", "run", "shell_steps:pause", "0.4", "--repeat", "2", "--store", store]) == 0
    out = capsys.readouterr().out
    with ProfileStore(store) as opened:
        (key,) = [profile.key for profile in opened.profiles()]
        assert key.startswith("shell_steps.pause(") and opened.get(key).runtime >= 0.35, out
    assert main(["profile", "run", "shell_steps:broken", "--store", store]) == 1
    assert "shell_steps:broken raised BashExitFailure: bash_app broken failed with unix exit code 3" in \
        capsys.readouterr().err
    # its logs named by Parsl (AUTO_LOGNAME): no run directory here, so none kept, and it runs
    assert main(["profile", "run", "shell_steps:logged", "--store", store]) == 0
    assert "stored shell_steps.logged(" in capsys.readouterr().out


def test_measure_app_measures_a_notebooks_app_under_the_key_its_workflow_computes(tmp_path, capsys):
    """A notebook's app lives in ``__main__``, which ``scalpel profile run`` cannot import:
    ``measure_app`` takes the app itself, runs it in a worker as the command does, prints a line a
    run, and stores it under the key the executor gives the notebook's own calls, with its
    speed-up where ``widths`` are given; bad arguments are refused by name."""
    import parsl
    from scalpel_executor import measure_app

    cell = {"__name__": "__main__"}  # a notebook cell's namespace
    exec("def relax(n, sweeps=3):\n    total = 0\n    for _ in range(sweeps):\n"
         "        total += sum(i * i for i in range(n))\n    return total\n", cell)
    relax = cell["relax"]
    app = parsl.python_app(relax, executors=["all"])
    store = tmp_path / "p.sqlite"
    measured = measure_app(app, 300000, repeat=2, widths=(1, 2), store=store, sweeps=2)
    out = capsys.readouterr().out
    assert "run 2/2:" in out and "stored __main__.relax(" in out and "widths round" in out, out
    assert "is a script" not in out  # a notebook's function: no --key to add
    assert measured["key"].startswith("__main__.relax(") and measured["runs"] == 2
    assert measured["speedup"] is not None and measured["speedup"]["readings"] >= 1
    with ProfileStore(str(store)) as opened:
        assert opened.get(measured["key"]).runs == 2 and opened.speedup(measured["key"]) is not None
    assert measure_app(relax, 1000, store=store, quiet=True)["runs"] >= 1 and capsys.readouterr().out == ""
    for bad, words in (({"repeat": 0}, "repeat must be a whole number of runs, at least 1, got 0"),
                       ({"widths": (2, 2)}, "widths: "), ({"repeat": 1.5}, "got 1.5")):
        with pytest.raises(ValueError, match=re.escape(words)):
            measure_app(relax, 10, store=store, **bad)
    with pytest.raises(ValueError, match="needs an app or a function, got 3"):
        measure_app(3)
    with pytest.raises(ValueError, match=re.escape("stor= is not an argument of relax; did you mean measure_app's "
                                                   "store=?")):
        measure_app(relax, 10, stor=store)
