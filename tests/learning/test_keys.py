"""Profile keys carry over between runs: upstream results, seeds, inputs=, arrays and files keyed by shape;
small integers split a key only when the store's measurements say so; old stores upgraded."""

import math
import os
import random
import sqlite3
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core.batching import Batching
from scalpel_executor.learning import commands as command_rule
from scalpel_executor.learning import keys as key_rule
from scalpel_executor.learning.estimates import APP_SPREAD, ONE_RUN_SPREAD, PRIOR_SPREAD, SOURCES, Estimator
from scalpel_executor.learning.hints import Hints
from scalpel_executor.learning.keys import SMALL, profile_key, profile_keys, signature
from scalpel_executor.learning.migrate import rekey
from scalpel_executor.learning.refine import Moments, should_split
from scalpel_executor.learning.store import Observation, ProfileStore

MiB = 2**20


def normalise(record, width):
    return record


def simulate(seed, n=2000):
    return seed


def reduce(inputs=()):
    return len(inputs)


def lookup(i):
    return {"cpu": os.sched_getaffinity(0).pop(), "name": f"lookup-{i}", "t0": time.time() + i, "rows": 64}


# -- what a key is made of ------------------------------------------------------------------------


def test_an_upstream_dict_is_keyed_by_its_fields_and_their_kinds_not_their_values():
    first = {"cpu": 0, "name": "lookup-0", "t0": 1805811301.2, "ok": True, "note": None}
    later = {"cpu": 13, "name": "lookup-117", "t0": 1905811399.9, "ok": False, "note": None}
    assert profile_key(normalise, (first, 64)) == profile_key(normalise, (later, 64))
    assert profile_key(normalise, (first, 64)).endswith("normalise({cpu:num,name:str,note:None,ok:bool,t0:num},~64)")
    # a field's kind and an array's shape are shape; a new field is a new shape
    assert profile_key(normalise, ({**first, "t0": "yesterday"}, 64)) != profile_key(normalise, (first, 64))
    assert profile_key(normalise, ({**first, "extra": 1}, 64)) != profile_key(normalise, (first, 64))


def test_seeds_and_cpu_numbers_collapse_into_one_shape_key_and_keep_an_exact_key():
    keys = [profile_keys(simulate, (seed,)) for seed in range(8)]
    assert len({k.shape for k in keys}) == 1 and keys[0].shape.endswith(f"simulate({SMALL})")
    assert len({k.exact for k in keys}) == 8 and keys[3].exact.endswith("simulate(3)")
    assert profile_keys(simulate, (3,), {"n": 7}).shape.endswith(f"simulate({SMALL},n={SMALL})")
    # sizes keep their buckets: 2000 and 200 are different work
    assert profile_key(simulate, (1, 2000)) != profile_key(simulate, (1, 200))
    assert profile_keys(simulate, (2000,)).shape == profile_keys(simulate, (2000,)).exact


def test_inputs_of_upstream_results_are_counted_and_weighed_not_listed():
    results = [{"cpu": i % 4, "name": f"lookup-{i}", "t0": time.time() + i} for i in range(40)]
    again = [{"cpu": 3, "name": f"x{i}", "t0": 1.0 * i} for i in range(40)]
    key = profile_key(reduce, (), {"inputs": results})
    assert key == profile_key(reduce, (), {"inputs": again})
    assert key.endswith("reduce(inputs=~38.1)") and len(key) < 60
    assert profile_key(reduce, (), {"inputs": results[:8]}).endswith("reduce(inputs=8)")


def test_arrays_by_dtype_and_shape_and_lists_of_them_by_total_size():
    numpy = pytest.importorskip("numpy")
    assert signature(numpy.zeros((1000, 3))) == "f8[~1024x3]"
    assert signature(numpy.zeros((1000, 3), dtype=numpy.float32)) == "f4[~1024x3]"
    assert signature(numpy.ones((1000, 3)) * 7) == signature(numpy.zeros((1000, 3)))
    blocks = [numpy.zeros(2**17) for _ in range(8)]  # 8 x 1 MiB
    assert signature(blocks) == "list8[~8.0MiB]"
    assert profile_key(reduce, (), {"inputs": blocks}).endswith("reduce(inputs=8[~8.0MiB])")
    assert signature({"data": numpy.zeros(10), "cpu": 3}) == "{cpu:num,data:f8[10]}"
    assert signature(numpy.int64(2000)) == "~2048" and signature(numpy.int64(3)) == SMALL


def test_files_by_size_and_names_never(tmp_path):
    from parsl.data_provider.files import File

    small, large = tmp_path / "tile_1.fits", tmp_path / "tile_22.fits"
    small.write_bytes(b"x" * 2**20)
    large.write_bytes(b"x" * 2**23)
    assert signature(str(small)).startswith("file~") and signature(str(small)) != signature(str(large))
    assert signature(File(str(large))) == signature(str(large))
    # a file under FILE_FLOOR keys as the path not yet written does: an output the workflow writes
    # keys the same before it exists (the first run, a retry's first attempt) and after (the next)
    written = tmp_path / "line-0.txt"
    before, before_file = signature(str(written)), signature(File(str(written)))
    written.write_bytes(b"x" * 108)
    assert (signature(str(written)), signature(File(str(written)))) == (before, before_file) == ("str", "file")
    assert signature([str(written)] * 2) == "list2"  # nor does it give a container a size
    # names of files not yet written, labels, timestamps as text: one kind, whatever their length
    assert signature("out/tile_9.fits") == signature("out/tile_10.fits") == signature("2026-10-26T12:00:01") == "str"
    assert signature("x" * 5000) == "str~4871"  # a long string is data: its length counts
    inputs = [File(str(large)) for _ in range(4)]
    assert profile_key(reduce, (), {"inputs": inputs}).endswith("reduce(inputs=4[~32.0MiB])")


def test_words_that_name_a_mode_stay_but_not_inside_a_result():
    assert profile_key(normalise, ("gemm", 64)) != profile_key(normalise, ("jacobi-2d", 64))
    assert signature({"kernel": "gemm"}) == signature({"kernel": "syrk"}) == "{kernel:str}"
    assert signature(("lookup-3", 3, 1805811301.0)) == f"(str,{SMALL},~1805811301)"


values = st.one_of(st.integers(-10**12, 10**12), st.floats(allow_nan=False), st.text(max_size=40), st.booleans(),
                   st.none())


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["cpu", "name", "t0", "host", "rank"]), values, max_size=5), st.data())
def test_a_key_never_holds_a_value_that_varies_between_otherwise_identical_results(record, data):
    """Two upstream results with the same fields and kinds of value get one key, whatever the values."""
    other = {}
    for name, value in record.items():
        kind = type(value)
        strategy = {int: st.integers(-10**12, 10**12), float: st.floats(allow_nan=False), str: st.text(max_size=40),
                    bool: st.booleans(), type(None): st.none()}[kind]
        other[name] = data.draw(strategy)
    assert profile_key(normalise, (record, 64)) == profile_key(normalise, (other, 64))
    assert profile_key(reduce, (), {"inputs": [record] * 3}) == profile_key(reduce, (), {"inputs": [other] * 3})


@settings(max_examples=100, deadline=None)
@given(st.integers(-15, 15), st.integers(-15, 15))
def test_small_integers_never_split_a_shape_key(a, b):
    assert profile_keys(simulate, (a,)).shape == profile_keys(simulate, (b,)).shape
    assert (profile_keys(simulate, (a,)).exact == profile_keys(simulate, (b,)).exact) == (a == b)


# -- when small integers split a key ---------------------------------------------------------------


def _series(*values):
    moments = Moments()
    for value in values:
        moments = moments.add(value)
    return moments


def test_variants_that_differ_split_and_noise_does_not():
    same = _series(1.0, 1.0)
    assert should_split([(same, _series(1 * MiB, 1 * MiB)), (same, _series(12 * MiB, 12 * MiB))])
    assert not should_split([(same, _series(1 * MiB)), (same, _series(12 * MiB))])  # one reading each: not yet
    assert not should_split([(same, _series(1 * MiB, 1 * MiB)), (same, _series(2 * MiB, 2 * MiB))])
    assert should_split([(same, _series(1 * MiB, 1 * MiB, 1.1 * MiB)),
                         (same, _series(3 * MiB, 3.1 * MiB, 2.9 * MiB))])  # 3x, three runs each
    assert not should_split([(_series(0.01, 0.01), _series(0, 0)),
                             (_series(0.05, 0.05), _series(0.5 * MiB, 0.5 * MiB))])  # too small to matter
    # a fresh worker's first task reads its imports too, and is the same seed run after run
    first = (_series(0.45, 0.45, 0.45), _series(25 * MiB, 25 * MiB, 25 * MiB))
    assert not should_split([first] + [(_series(0.25, 0.25, 0.25), _series(2.2 * MiB, 2.2 * MiB, 2.2 * MiB))] * 5)
    # a graded response is not one outlier: 1, 4 and 12 MiB split
    assert should_split([(same, _series(size * MiB, size * MiB)) for size in (1, 4, 12)])


def test_eight_seeds_with_the_same_work_stay_one_profile_under_noise():
    chance = random.Random(7)
    false_splits = 0
    for trial in range(300):
        variants = [(_series(*(math.exp(chance.gauss(0, 0.25)) for _ in range(runs))),
                     _series(*(8 * MiB * math.exp(chance.gauss(0, 0.1)) for _ in range(runs))))
                    for runs in [2 + trial % 4] * 8]
        false_splits += should_split(variants)
    assert false_splits <= 3, false_splits  # ~1 % of workflows; each costs 8 keys, not a wrong estimate


def test_the_store_splits_a_shape_key_whose_small_integers_change_the_footprint(tmp_path):
    store = ProfileStore(tmp_path / "p.sqlite")
    shape = profile_keys(simulate, (1,)).shape
    for run in range(2):  # two runs: one reading of each is not enough
        estimator = Estimator(store, default_footprint=0, default_runtime=1.0)
        for size in (1, 12, 4):
            estimate = estimator.estimate(simulate, (size,), {}, Hints())
            assert estimate.key == shape and estimate.exact.endswith(f"simulate({size})")
            estimator.observe(estimate, {"wall": 1.0, "footprint": size * MiB})
        estimator.flush()
        assert store.get(shape).split == (run == 1)
    assert {p.key for p in store.profiles()} == {shape} | {profile_keys(simulate, (s,)).exact for s in (1, 4, 12)}
    assert store.get(profile_keys(simulate, (4,)).exact).refines == shape

    again = Estimator(store, default_footprint=0, default_runtime=1.0)
    twelve = again.estimate(simulate, (12,), {}, Hints())
    assert (twelve.key, twelve.footprint_source) == (profile_keys(simulate, (12,)).exact, "store")
    assert twelve.footprint == pytest.approx(12 * MiB)
    new = again.estimate(simulate, (7,), {}, Hints())  # a value never seen: its shape key's profile
    assert new.key.endswith("simulate(7)") and new.footprint_source == new.runtime_source == "shape"
    again.observe(new, {"wall": 2.0, "footprint": 7 * MiB})
    again.flush()
    assert store.get(new.key).runs == 1 and store.get(shape).runs == 7  # the shape key keeps counting


def test_seeds_that_change_nothing_leave_one_key(tmp_path):
    store = ProfileStore(tmp_path / "p.sqlite")
    estimator = Estimator(store, default_footprint=0, default_runtime=1.0)
    for seed in list(range(8)) * 3:
        estimate = estimator.estimate(simulate, (seed,), {}, Hints())
        estimator.observe(estimate, {"wall": 1.0 + 0.02 * seed, "footprint": 4 * MiB + seed * 1000})
    estimator.flush()
    assert [p.key for p in store.profiles()] == [profile_key(simulate, (0,))]
    assert store.get(profile_key(simulate, (0,))).runs == 24


# -- fallback levels -----------------------------------------------------------------------------


def test_estimates_fall_back_from_the_key_to_its_shape_to_its_app_to_the_prior(tmp_path):
    assert set(SOURCES) == {"hint", "learned", "store", "shape", "app", "prior"}
    store = ProfileStore(tmp_path / "p.sqlite")
    store.record([Observation(profile_key(normalise, ({"a": 1}, 2000)), "tests.learning.test_keys.normalise",
                              runtime=r, footprint=8 * MiB) for r in (1.0, 1.1)])
    store.record([Observation(profile_key(normalise, ({"a": 1}, 200)), "tests.learning.test_keys.normalise",
                              runtime=r, footprint=1 * MiB) for r in (0.1, 0.12)])
    estimator = Estimator(store, default_footprint=0, default_runtime=5.0)
    known = estimator.estimate(normalise, ({"a": 2}, 2010), {}, Hints())
    assert (known.runtime_source, known.footprint_source) == ("store", "store")
    assert known.runtime_spread == pytest.approx(Moments().add(1.0).add(1.1).spread)
    other_shape = estimator.estimate(normalise, ({"a": 2}, 50_000), {}, Hints())
    assert (other_shape.runtime_source, other_shape.footprint_source) == ("app", "app")
    assert other_shape.runtime == pytest.approx((1.0 + 1.1 + 0.1 + 0.12) / 4)
    assert other_shape.footprint == pytest.approx(4.5 * MiB)
    pooled = Moments().add(1.0).add(1.1).add(0.1).add(0.12).spread
    assert other_shape.runtime_spread == pytest.approx(max(APP_SPREAD, pooled)) and pooled > APP_SPREAD
    assert other_shape.key not in estimator.priors
    never = estimator.estimate(simulate, (2000,), {}, Hints())
    assert (never.runtime_source, never.runtime, never.runtime_spread) == ("prior", 5.0, PRIOR_SPREAD)
    assert never.key in estimator.priors
    # this run teaches the app level too
    estimator.observe(never, {"wall": 0.5})
    cousin = estimator.estimate(simulate, (9000,), {}, Hints())
    assert (cousin.runtime_source, cousin.runtime, cousin.runtime_spread) == ("app", 0.5, APP_SPREAD)
    assert estimator.estimate(simulate, (2000,), {}, Hints()).runtime_spread == ONE_RUN_SPREAD


def test_a_key_whose_tasks_were_never_measured_takes_its_apps_footprint(tmp_path):
    store = ProfileStore(tmp_path / "p.sqlite")
    app = "tests.learning.test_keys.simulate"
    store.record([Observation(profile_key(simulate, (2000,)), app, runtime=1.0, footprint=6 * MiB)])
    store.record([Observation(profile_key(simulate, (20,)), app, runtime=0.01)])  # too short for the probe
    estimate = Estimator(store, 0, 1.0).estimate(simulate, (20,), {}, Hints())
    assert (estimate.runtime_source, estimate.runtime) == ("store", 0.01)
    assert (estimate.footprint_source, estimate.footprint) == ("app", 6 * MiB)


# -- old stores ------------------------------------------------------------------------------------


def _old_signature(value, depth=0):
    """The first key rule's signature (schema 1), kept to check that old keys map onto new ones."""
    if value is None or isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, float)):
        return key_rule.bucket(value)
    if isinstance(value, str):
        if key_rule._WORD.match(value):
            return value
        if ("/" in value or "." in value) and os.path.isfile(value):
            return key_rule._file_signature(value)
        return "str" + key_rule.bucket(len(value))
    filepath = getattr(value, "filepath", None)
    if isinstance(filepath, str) and hasattr(value, "scheme"):
        return key_rule._file_signature(filepath)
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if isinstance(shape, tuple) and dtype is not None:
        return f"{dtype.str.lstrip('<>|=')}[{'x'.join(key_rule.bucket(n) for n in shape)}]"
    if depth < 3 and isinstance(value, tuple) and len(value) <= 4:
        return "(" + ",".join(_old_signature(item, depth + 1) for item in value) + ")"
    if depth < 3 and isinstance(value, dict) and len(value) <= 8:
        items = sorted(value.items(), key=lambda item: str(item[0]))
        return "{" + ",".join(f"{key}:{_old_signature(item, depth + 1)}" for key, item in items) + "}"
    return f"{type(value).__name__}{key_rule.bucket(len(value))}"


def _old_key(func, args=(), kwargs=None):
    parts = [_old_signature(arg) for arg in args]
    for name in sorted(kwargs or {}):
        value = kwargs[name]
        if name == "inputs":
            parts.append("inputs=[" + ",".join(_old_signature(item) for item in list(value)[:16]) + "]")
        elif name == "outputs":
            parts.append(f"outputs={len(value)}")
        else:
            parts.append(f"{name}={_old_signature(value)}")
    return f"{key_rule.app_name(func)}({','.join(parts)})"


def _calls(tmp_path):
    data = tmp_path / "in.dat"
    data.write_bytes(b"x" * 2_000_000)
    record = {"cpu": 3, "name": "lookup-3", "t0": 1805811301.2, "ok": True, "note": None, "tile": (3, "a")}
    return [
        (simulate, (3,), {}), (simulate, (2000,), {"n": 7}), (normalise, (record, 64), {}),
        (normalise, ("gemm", (256, 3)), {}), (normalise, (("lookup-2", 5), "out/tile_9.fits"), {}),
        (reduce, (), {"inputs": [record] * 8}), (reduce, (), {"inputs": [str(data)] * 3}),
        (normalise, ([1, 2, 3], "x" * 300), {}), (normalise, ({"data": [1] * 20}, None), {}),
    ]


def test_old_keys_map_onto_the_keys_the_new_rule_computes(tmp_path):
    for func, args, kwargs in _calls(tmp_path):
        keys = profile_keys(func, args, kwargs)
        assert rekey(_old_key(func, args, kwargs)) == (keys.shape, keys.exact), _old_key(func, args, kwargs)


def _schema_1_store(path, rows):
    connection = sqlite3.connect(path)
    connection.executescript("""
        CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('schema', '1');
        CREATE TABLE profiles (key TEXT PRIMARY KEY, app TEXT NOT NULL, runs INTEGER NOT NULL DEFAULT 0,
            runtime_mean REAL, runtime_m2 REAL, runtime_ewma REAL, footprint_runs INTEGER NOT NULL DEFAULT 0,
            footprint_mean REAL, footprint_m2 REAL, footprint_ewma REAL, peak_rss REAL, llc_miss_rate REAL,
            origin TEXT NOT NULL, updated REAL NOT NULL);""")
    connection.executemany("INSERT INTO profiles VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
    connection.commit()
    connection.close()


def _row(key, app, runtime, footprint, runs=2):
    return (key, app, runs, runtime, 0.0, runtime, runs, footprint, 0.0, footprint, None, None, "measured", 1.0)


def _old_workflow_rows():
    app = "tests.learning.test_keys"
    rows = [_row(_old_key(simulate, (seed,)), f"{app}.simulate", 1.0, 4 * MiB) for seed in range(8)]
    rows += [_row(_old_key(normalise, ({"cpu": cpu, "t0": 1805811301.0 + cpu}, 64)), f"{app}.normalise", 0.5, MiB)
             for cpu in range(4)]
    rows += [_row("pb/adi", "pb/adi", 41.5, 2 * MiB, runs=1)]  # an imported name: not a call's key
    return rows


def test_a_schema_1_store_is_upgraded_once_its_keys_merged(tmp_path, caplog):
    path = tmp_path / "old.sqlite"
    _schema_1_store(path, _old_workflow_rows())
    with caplog.at_level("INFO", logger="scalpel_executor.learning.store"):
        store = ProfileStore(path)
    assert store.persistent
    assert [p.key for p in store.profiles()] == sorted([
        "pb/adi", profile_key(simulate, (0,)), profile_key(normalise, ({"cpu": 0, "t0": 1.5}, 64))])
    seeds = store.get(profile_key(simulate, (0,)))
    assert (seeds.runs, seeds.runtime_mean, seeds.footprint) == (16, 1.0, 4 * MiB) and not seeds.split
    assert "13 profiles from before the key rule changed became 3" in caplog.text
    store.close()
    assert sqlite3.connect(path).execute("SELECT value FROM meta").fetchone() == ("2",)
    with ProfileStore(path) as again:  # once: nothing left to rewrite
        assert len(again.profiles()) == 3
        estimate = Estimator(again, 0, 9.0).estimate(simulate, (5,), {}, Hints())
        assert (estimate.runtime_source, estimate.runtime) == ("store", 1.0)


def test_an_upgrade_splits_old_keys_whose_small_integers_differed(tmp_path):
    app = "tests.learning.test_keys.simulate"
    path = tmp_path / "old.sqlite"
    _schema_1_store(path, [_row(_old_key(simulate, (size,)), app, 1.0, size * MiB, runs=3) for size in (1, 4, 12)])
    with ProfileStore(path) as store:
        assert store.get(profile_key(simulate, (1,))).split
        assert store.get(_old_key(simulate, (12,))).footprint == 12 * MiB  # the old key is an exact key again
        assert store.get(_old_key(simulate, (12,))).refines == profile_key(simulate, (1,))


def test_a_schema_1_store_that_cannot_be_written_is_upgraded_in_memory(tmp_path, monkeypatch):
    path = tmp_path / "old.sqlite"
    _schema_1_store(path, _old_workflow_rows())

    def read_only(self):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(ProfileStore, "_open_file", read_only)
    store = ProfileStore(path)
    assert not store.persistent
    assert store.get(profile_key(simulate, (0,))).runs == 16
    assert len(store.profiles()) == 3
    assert sqlite3.connect(path).execute("SELECT value FROM meta").fetchone() == ("1",)  # the file is untouched


# -- the command line ------------------------------------------------------------------------------


def test_profile_list_cuts_long_keys_unless_wide(tmp_path, capsys):
    from scalpel_executor.cli import main

    long_key = "mypkg.normalise(" + ",".join(f"field{i}:num" for i in range(30)) + ")"
    with ProfileStore(tmp_path / "p.sqlite") as store:
        store.record([Observation(long_key, "mypkg.normalise", runtime=1.0)])
    assert main(["profile", "list", "--store", str(tmp_path / "p.sqlite")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 120 and any("…" in line for line in lines)
    assert main(["profile", "list", "--wide", "--store", str(tmp_path / "p.sqlite")]) == 0
    assert long_key in capsys.readouterr().out


# -- bash apps: keyed by the program their command runs ---------------------------------------------


def generic_shell_app(cmd: str, inputs=None, outputs=None, stdout="logs/stdout.txt", stderr="logs/stderr.txt"):
    """WfCommons' WfBench translator makes every task this one bash app."""
    return cmd


def align(fasta, stdout=None):
    return f"bwa mem ref.fa {fasta}"


def shell(cmd):  # a python app that happens to take a command
    return cmd


GENERIC = "tests.learning.test_keys.generic_shell_app"


def _submitted(func):
    """What Parsl's DataFlowKernel hands the executor for a bash app: the wrapper, not ``func``."""
    from parsl.app.bash import BashApp

    return BashApp(func).wrapped_remote_function


def _shell_key(command, inputs=1, outputs=1, bash=True, **kwargs):
    """The key of a WfBench task; ``bash=False``: of the same call to the plain function, as keyed
    before bash apps were keyed by their program."""
    from parsl.data_provider.files import File

    files = {"inputs": [File(f"data/in_{i}.fa") for i in range(inputs)],
             "outputs": [File(f"output/out_{i}.txt") for i in range(outputs)],
             "stdout": "logs/t_stdout.txt", "stderr": "logs/t_stderr.txt", **kwargs}
    args = () if "cmd" in kwargs else (command,)
    return profile_key(_submitted(generic_shell_app) if bash else generic_shell_app, args, files)


def test_a_bash_app_is_keyed_by_the_program_its_command_runs():
    blastall = _shell_key("/opt/blast/bin/blastall -p blastn -d nt -i query_17.fa -o out_17.txt")
    assert blastall == f"{GENERIC}[blastall](str,inputs=1,outputs=1)"
    assert _shell_key("split_fasta --in input.fa --parts 40") == f"{GENERIC}[split_fasta](str,inputs=1,outputs=1)"
    # the same program on other files, with other options, or a command of another length: one key
    assert _shell_key("blastall -p blastn -i q_3.fa " + "-v " * 200) == blastall
    assert _shell_key(None, cmd="blastall -p blastx") == f"{GENERIC}[blastall](cmd=str,inputs=1,outputs=1)"
    # the arguments' shape still counts
    assert _shell_key("blastall -i q.fa", inputs=3) == f"{GENERIC}[blastall](str,inputs=3,outputs=1)"


@pytest.mark.parametrize("command, program", [
    ("env OMP_NUM_THREADS=4 blastall -i q.fa", "blastall"),
    ("/usr/bin/env -i -u HOME PATH=/bin blastall", "blastall"),
    ("OMP_NUM_THREADS=4 LC_ALL=C blastall", "blastall"),
    ("time blastall", "blastall"),
    ("time -p blastall", "blastall"),
    ("nice blastall", "blastall"),
    ("nice -n 10 blastall", "blastall"),
    ("nice -5 blastall", "blastall"),
    ("timeout 600 blastall", "blastall"),
    ("timeout -s KILL --preserve-status 10m blastall", "blastall"),
    ("exec blastall", "blastall"),
    ("stdbuf -oL -e 0 blastall", "blastall"),
    ("stdbuf --output=L blastall", "blastall"),
    ("nohup blastall", "blastall"),
    ("cd work/run_3 && blastall -i q.fa", "blastall"),
    ("cd work; blastall", "blastall"),
    ("cd work&&blastall", "blastall"),
    ("export BLASTDB=/db && module load blast; blastall", "blastall"),
    ("#!/bin/bash\nset -e\nblastall -i q.fa", "blastall"),
    ("env A=1 time nice -n 5 timeout 60 stdbuf -oL ./bin/blastall", "blastall"),
    ("python3 scripts/merge.py --in a b", "merge.py"),
    ("python -u -W ignore merge.py", "merge.py"),
    ("/usr/bin/env python3.11 /opt/tools/merge.py", "merge.py"),
    ("python3 -m tools.merge a", "tools.merge"),
    ("python3 -c 'import sys; print(sys.argv)'", "python3"),
    ("bash run_split.sh 40", "run_split.sh"),
    ("sh -e ./run_split.sh", "run_split.sh"),
    ("bash -c 'cd work && blastall -i q.fa'", "blastall"),
    ("Rscript --vanilla plots/summary.R", "summary.R"),
    ("Rscript -e 'summary(x)'", "Rscript"),
    ("perl -I lib -w bin/trim.pl", "trim.pl"),
    # WfBench's generated tasks: one runner, named by their task type
    ("bin/wfbench --name blastall_00000017 --percent-cpu 0.6 --cpu-work 100 --out x.out", "wfbench:blastall"),
    ("bin/wfbench --name=split_fasta_ID0000001 --percent-cpu 0.6", "wfbench:split_fasta"),
    ("bin/wfbench --percent-cpu 0.6 --cpu-work 100", "wfbench"),
    ("bin/wfbench --name no_number_here", "wfbench"),
])
def test_words_before_the_program_are_skipped(command, program):
    assert command_rule.command_program(command) == program
    assert _shell_key(command) == f"{GENERIC}[{program}](str,inputs=1,outputs=1)"


@pytest.mark.parametrize("command", ["", "   \n\t", "'", '"blastall', "\\", "$BLAST -p blastn", "cd work", "env",
                                     "timeout 10", "&&", "a,b(c)[d]"])
def test_a_command_without_a_program_keeps_the_app_key(command):
    assert _shell_key(command) == _shell_key(command, bash=False)
    assert _shell_key(command).startswith(f"{GENERIC}(")


def test_an_unbalanced_quote_after_the_program_does_not_hide_it():
    assert command_rule.command_program("blastall -d 'nt") == "blastall"
    assert command_rule.command_program("env A='1 blastall") == "blastall"  # split at whitespace: "A='1" is an assignment
    assert command_rule.command_program("env A=1 blastall 'x") == "blastall"


def test_an_app_that_builds_its_command_and_python_apps_keep_their_keys():
    # the string is the app's data (a file name), not its command: keying by it would key by the data
    assert profile_key(_submitted(align), ("sample_17.fa",)) == "tests.learning.test_keys.align(str)"
    assert profile_key(_submitted(align), ("sample_17.fa",)) == profile_key(align, ("sample_17.fa",))
    assert profile_key(shell, ("blastall -i q.fa",)) == "tests.learning.test_keys.shell(str)"
    assert profile_key(normalise, ("gemm", 64)) == "tests.learning.test_keys.normalise(gemm,~64)"


commands = st.one_of(
    st.text(),
    st.lists(st.sampled_from(["env", "-i", "-u", "A=1", "time", "-p", "nice", "-n", "5", "timeout", "-s", "10", "exec",
                              "stdbuf", "-oL", "cd", "dir", "&&", ";", "|", "(", ")", "{", "!", "python3", "-c", "-m",
                              "-W", "bash", "-ec", "Rscript", "-e", "perl", "-I", "script.py", "/bin/prog", "'", '"',
                              "\\", "\n", "#", "--", "-", "$X", "`", "'bash -c \"x", "module", "<"])
             | st.text(max_size=8), max_size=12).map(" ".join),
)


@settings(max_examples=500, deadline=None)
@given(commands)
def test_a_key_is_made_from_any_command_text(command):
    program = command_rule.command_program(command)
    assert program is None or command_rule._PROGRAM.match(program)
    key = _shell_key(command)
    assert key == (f"{GENERIC}[{program}](str,inputs=1,outputs=1)" if program else _shell_key(command, bash=False))
    assert key.partition("(")[0] in (GENERIC, f"{GENERIC}[{program}]")  # a program never adds a parenthesis


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(list("ab -=/\t\r\n'\"\\#;&|()<>\xa0") + ["&&", "cd", "env"]), max_size=20).map("".join)
       | st.text())
def test_the_cheap_word_split_reads_a_command_as_shlex_does(command):
    """Words are split at whitespace up to the first with shell syntax, then by shlex: the same words."""
    def words(split):
        try:
            return list(split(command))
        except ValueError:
            return "unbalanced"

    assert words(command_rule._words) == words(command_rule._shell_words)


def test_a_store_of_app_level_bash_keys_gives_each_programs_first_task_the_old_profile(tmp_path):
    """Keys written before bash apps were keyed by their program cannot be split into programs: they
    stay as they are, and a program's key with no history of its own takes the app's pooled profile,
    which holds them."""
    path = tmp_path / "p.sqlite"
    old = f"{GENERIC}(str,inputs=1,outputs=1)"
    with ProfileStore(path) as store:
        store.record([Observation(old, GENERIC, runtime=r, footprint=f * MiB) for r, f in ((2.0, 30), (4.0, 50))])
    submitted = _submitted(generic_shell_app)

    def estimate(estimator, command):
        return estimator.estimate(submitted, (command,), {"inputs": [None], "outputs": [None]}, Hints())

    with ProfileStore(path) as store:
        estimator = Estimator(store, default_footprint=0, default_runtime=1.0)
        blastall = estimate(estimator, "blastall -i q.fa")
        assert blastall.key == f"{GENERIC}[blastall](str,inputs=1,outputs=1)" and blastall.app == GENERIC
        assert (blastall.runtime_source, blastall.footprint_source) == ("app", "app")
        assert (blastall.runtime, blastall.footprint) == (pytest.approx(3.0), pytest.approx(40 * MiB))
        assert blastall.key not in estimator.priors
        estimator.observe(blastall, {"wall": 10.0, "footprint": 80 * MiB})
        estimator.flush()
        # blastall now has its own profile; split_fasta still starts from the app's, which blastall joined
        again = estimate(estimator, "blastall -i other.fa")
        assert (again.runtime_source, again.runtime) == ("learned", 10.0)
        split = estimate(estimator, "split_fasta --in x")
        assert (split.runtime_source, split.runtime) == ("app", pytest.approx((2.0 + 4.0 + 10.0) / 3))
    with ProfileStore(path) as store:
        assert store.get(old).runs == 2  # the old profile is kept, unchanged
        assert store.get(f"{GENERIC}[blastall](str,inputs=1,outputs=1)").runs == 1
        fresh = estimate(Estimator(store, default_footprint=0, default_runtime=1.0), "split_fasta --in y")
        assert (fresh.runtime_source, fresh.runtime) == ("app", pytest.approx((2.0 + 4.0 + 10.0) / 3))


# -- one unchanged workflow, three runs, through Parsl -------------------------------------------------


def _busy(mib, seconds=0.25):
    """Touch ``mib`` MiB for ``seconds``: long enough for the probe's first window."""
    data = bytearray(mib << 20)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        data[::4096] = bytes(len(data) // 4096)


def _apps():
    from parsl import python_app

    @python_app(executors=["scalpel"])
    def lookup_app(i):
        _busy(2)
        return {"cpu": min(os.sched_getaffinity(0)), "name": f"lookup-{i}", "t0": time.time(), "rows": 64}

    @python_app(executors=["scalpel"])
    def normalise_app(record, width):
        _busy(2)
        return {**record, "width": width, "t1": time.time()}

    @python_app(executors=["scalpel"])
    def seeded_app(seed):
        _busy(2)
        return random.Random(seed).random()

    @python_app(executors=["scalpel"])
    def reduce_app(inputs=()):
        _busy(2)
        return len(inputs)

    return lookup_app, normalise_app, seeded_app, reduce_app


def _run_workflow(tmp_path, store, run):
    import parsl
    from parsl.config import Config

    from scalpel_executor import ScalpelExecutor

    lookup_app, normalise_app, seeded_app, reduce_app = _apps()
    executor = ScalpelExecutor(label="scalpel", topology="1x2:32MiB", profiles=str(store), batching=Batching(window=0.0))
    dfk = parsl.load(Config(executors=[executor], run_dir=str(tmp_path / f"run-{run}")))
    try:
        normalised = [normalise_app(lookup_app(i), 64) for i in range(6)]
        seeded = [seeded_app(seed) for seed in range(6)]
        assert reduce_app(inputs=normalised + seeded).result(timeout=120) == 12
        report = executor.run_report()
    finally:
        dfk.cleanup()
        parsl.clear()
    return report


def test_rerunning_an_unchanged_workflow_adds_no_keys_and_reads_its_footprints_from_the_store(tmp_path):
    store = tmp_path / "profiles.sqlite"
    counts, reports = [], []
    for run in range(3):
        reports.append(_run_workflow(tmp_path, store, run))
        with ProfileStore(store) as opened:
            keys = [profile.key for profile in opened.profiles()]
        counts.append(len(keys))
    assert counts == [4, 4, 4], keys  # lookup, normalise, seeded, reduce: one key each
    assert max(len(key) for key in keys) < 100, keys
    for report in reports[1:]:
        sources = [row["footprint_source"] for row in report["tasks"]]
        assert sources.count("store") >= 0.9 * len(sources), report["sources"]
        assert report["priors"] == []


def test_a_size_free_argument_does_not_split_a_key_by_position_or_by_name():
    from scalpel_executor.learning.hints import app_hints

    def fft_peak(n, seed):
        return n

    undeclared = {profile_key(fft_peak, (512, seed)) for seed in range(100, 120)}
    assert len(undeclared) == 2  # seeds 100-119 fall into two buckets: the split a user would not make
    app_hints(size_free=("seed",))(fft_peak)
    declared = {profile_key(fft_peak, (512, seed)) for seed in range(100, 120)}
    assert declared == {f"{key_rule.app_name(fft_peak)}(~512,*)"}
    assert profile_key(fft_peak, (512,), {"seed": 7}).endswith("(~512,seed=*)")
    assert profile_key(fft_peak, (4096, 101)) != profile_key(fft_peak, (512, 101))  # sizes still split
    small = profile_keys(fft_peak, (512, 3))
    assert small.shape == small.exact  # a small seed no longer makes an exact key to split by
    assert profile_keys(fft_peak, (3, 5)).exact.endswith("(3,*)")


def test_size_free_arguments_reach_through_parsl_wrappers_and_bash_apps():
    import functools

    from scalpel_executor.learning.hints import app_hints

    @app_hints(size_free=("label",))
    def render(cmd, label, stdout=None):
        return cmd

    @functools.wraps(render)
    def monitored(*args, **kwargs):  # as Parsl's monitoring and timeout wrappers wrap an app
        return render(*args, **kwargs)

    def remote_side_bash_executor(func, *args, **kwargs):
        return func(*args, **kwargs)

    bash = functools.partial(remote_side_bash_executor, render)  # as Parsl binds a bash app
    assert profile_key(monitored, ("bin/convert a.png", "tile-17")) == profile_key(monitored, ("bin/convert b.png", "x"))
    key = profile_key(bash, ("bin/convert a.png", "tile-17"))
    assert "[convert]" in key and key.endswith("(str,*)")


@pytest.mark.parametrize("flagged", [True, False])
def test_a_workers_cold_first_calls_do_not_split_a_key_by_their_small_integers(tmp_path, flagged):
    """Each worker's first call of an app pays for its imports; in an unchanged workflow those are
    the same tile numbers run after run. Flagged ``cold`` by the worker, they count for the key but
    not as variants; unflagged (as before the flag), they split it."""
    store = ProfileStore(tmp_path / "p.sqlite")
    shape = profile_keys(simulate, (1,)).shape
    for _ in range(3):
        estimator = Estimator(store, default_footprint=0, default_runtime=1.0)
        for tile in range(8):
            estimate = estimator.estimate(simulate, (tile,), {}, Hints())
            cold = tile < 4  # the first tile each of four workers took
            estimator.observe(estimate, {"wall": 1.2 if cold else 0.2, "footprint": MiB, "cold": cold and flagged})
        estimator.flush()
    assert store.get(shape).split is not flagged
    assert store.get(shape).runs == 24  # every call counts for the key either way
