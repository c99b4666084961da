"""Every ``scalpel`` command that reads a file refuses a malformed one in one line, exit 2, no traceback."""

import json

import pytest

GOOD_CORUN = {"llc_bytes": 8 * 2**20, "cases": [{"label": "a", "footprint_bytes": 2**20},
                                                {"label": "b", "footprint_bytes": 6 * 2**20}],
              "slowdown": [[1.0, 1.2], [1.1, 1.5]]}

# What every file-reading command gets: (name, content); bytes are written as they are, None makes a
# directory, "missing" names no file.
ANY_FILE = [
    ("not-json", "{this is not json"), ("array", "[1, 2, 3]"), ("number", "3"), ("empty", ""), ("blank", " \n"),
    ("binary", b"\xff\xfe\x00garbage\x80"), ("directory", None), ("missing", "missing"),
]

# What each command makes of a JSON object whose fields are missing or of the wrong type.
FIELDS = {
    "simulate --profile": [
        ("wrong-format", {"format": "other", "tasks": []}),
        ("tasks-not-a-list", {"format": "scalpel-profile/1", "tasks": "adi"}),
        ("task-not-an-object", {"format": "scalpel-profile/1", "tasks": [3]}),
        ("runtime-missing", {"format": "scalpel-profile/1", "tasks": [{"name": "a"}]}),
        ("runtime-a-string", {"format": "scalpel-profile/1", "tasks": [{"name": "a", "runtime": "soon"}]}),
        ("footprint-a-list", {"format": "scalpel-profile/1", "tasks": [{"name": "a", "runtime": 1, "footprint": [1]}]}),
        ("machine-a-string", {"format": "scalpel-profile/1", "machine": "2x4", "tasks": [{"name": "a", "runtime": 1}]}),
    ],
    "simulate --model": [
        ("sensitivity-missing", {"capacity_fraction": 0.5}),
        ("rho-a-string", {"capacity_fraction": "big", "sensitivity": 1}),
        ("rho-negative", {"capacity_fraction": -1, "sensitivity": 1}),
        ("sigma-a-list", {"capacity_fraction": 0.5, "sensitivity": [1]}),
    ],
    "bench --report": [
        ("format-missing", {"summary": []}),
        ("summary-missing", {"format": "scalpel-bench/1"}),
        ("summary-not-a-list", {"format": "scalpel-bench/1", "summary": {"mix": "x"}}),
        ("row-not-an-object", {"format": "scalpel-bench/1", "summary": [3]}),
        ("row-fields-missing", {"format": "scalpel-bench/1", "summary": [{"mix": "contention"}]}),
        ("median-a-string", {"format": "scalpel-bench/1", "summary": [
            {"mix": "m", "peer": "p", "runs": 1, "median": "fast", "failed": 0}]}),
    ],
    "profile import": [
        ("format-missing", {"tasks": []}),
        ("tasks-missing", {"format": "scalpel-profile/1"}),
        ("task-not-an-object", {"format": "scalpel-profile/1", "tasks": ["adi"]}),
        ("runtime-missing", {"format": "scalpel-profile/1", "tasks": [{"name": "a"}]}),
        ("runtime-a-list", {"format": "scalpel-profile/1", "tasks": [{"name": "a", "runtime": [1]}]}),
        ("runs-a-string", {"format": "scalpel-profile/1", "tasks": [{"name": "a", "runtime": 1, "runs": "many"}]}),
        ("std-a-string", {"format": "scalpel-profile/1", "tasks": [{"name": "a", "runtime": 1, "runtime_std": "x"}]}),
    ],
    "calibrate": [
        ("cases-missing", {"llc_bytes": 2**23, "slowdown": []}),
        ("footprint-missing", {"llc_bytes": 2**23, "cases": [{"label": "a"}], "slowdown": [[1.0]]}),
        ("footprint-a-word", {"llc_bytes": 2**23, "cases": [{"label": "a", "footprint_bytes": "big"}],
                              "slowdown": [[1.0]]}),
        ("slowdown-a-string", {"llc_bytes": 2**23, "cases": [{"label": "a", "footprint_bytes": 1}],
                               "slowdown": [["slow"]]}),
        ("slowdown-not-square", {"llc_bytes": 2**23, "cases": [{"label": "a", "footprint_bytes": 1}],
                                 "slowdown": [[1.0, 1.0]]}),
        ("slowdown-rows-not-lists", {"llc_bytes": 2**23, "cases": [{"label": "a", "footprint_bytes": 1}],
                                     "slowdown": [1.0]}),
        ("cases-not-objects", {"llc_bytes": 2**23, "cases": ["a"], "slowdown": [[1.0]]}),
        ("llc-a-word", {**GOOD_CORUN, "llc_bytes": "lots"}),
        ("llc-missing", {key: value for key, value in GOOD_CORUN.items() if key != "llc_bytes"}),
        ("no-pairs", {"llc_bytes": 2**23, "cases": [], "slowdown": []}),
    ],
    "calibrate --bench": [
        ("format-missing", {"machine": {}}),
        ("machine-missing", {"format": "scalpel-bench/1", "solo": {}, "mixes": [], "summary": []}),
        ("machine-a-string", {"format": "scalpel-bench/1", "machine": "2x4", "solo": {}, "mixes": [], "summary": []}),
        ("mix-unknown", {"format": "scalpel-bench/1", "machine": {"llc": 2**23, "domains": [[0]]}, "solo": {},
                         "mixes": [], "summary": [{"mix": "x", "peer": "threads", "median": 1.0}]}),
    ],
}


def _argv(command, path, tmp_path):
    good = tmp_path / "good-corun.json"
    good.write_text(json.dumps(GOOD_CORUN))
    return {
        "simulate --profile": ["simulate", "--profile", path, "--machine", "2x2:8MiB", "--tasks", "4", "--repeats", "1"],
        "simulate --model": ["simulate", "--model", path, "--tasks", "4", "--repeats", "1"],
        "bench --report": ["bench", "--report", path],
        "bench --model": ["bench", "--model", path, "--mixes", "light", "--peers", "threads", "--repeats", "1",
                          "--out", str(tmp_path / "bench-out")],
        "profile import": ["profile", "import", path, "--store", str(tmp_path / "store.sqlite")],
        "calibrate": ["calibrate", path],
        "calibrate --bench": ["calibrate", str(good), "--bench", path],
    }[command]


@pytest.mark.parametrize("command, case, content", [
    *[(command, name, content) for command in ("simulate --profile", "simulate --model", "bench --report",
                                               "bench --model", "profile import", "calibrate", "calibrate --bench")
      for name, content in ANY_FILE],
    *[(command, name, content) for command, cases in FIELDS.items() for name, content in cases],
    ("bench --model", "gzip-not-gzip", ("x.json.gz", b"not gzip at all")),
])
def test_every_command_that_reads_a_file_refuses_a_malformed_one_in_one_line(scalpel, tmp_path, command, case,
                                                                               content):
    path = tmp_path / f"{case}.json"
    if isinstance(content, tuple):
        path, content = tmp_path / content[0], content[1]
    if content is None:
        path.mkdir()
    elif content == "missing":
        pass
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    code, out, err = scalpel(*_argv(command, str(path), tmp_path))
    assert code == 2, (out, err)
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and err.startswith("scalpel: "), err
    assert path.name in err, err  # names the file
    if command == "profile import":
        assert not (tmp_path / "store.sqlite").exists() or "imported" not in out
    assert not (tmp_path / "bench-out").exists()  # nothing ran


def test_calibrate_names_what_is_wrong_with_a_corun_document(scalpel, tmp_path):
    corun = tmp_path / "corun.json"
    for document, message in [
        ([1, 2], "corun.json is not a co-run document: expected a JSON object {...}, got an array"),
        ({"llc_bytes": 2**23, "cases": [{"label": "a", "footprint_bytes": 1}], "slowdown": [["slow"]]},
         "corun.json: slowdown of a next to a must be a finite number > 0, got 'slow'"),
        ({"llc_bytes": 2**23, "cases": [{"label": "spmv", "size": 1}], "slowdown": [[1.0]]},
         "corun.json: case #0 (spmv) has no footprint_bytes; give its size in bytes"),
    ]:
        corun.write_text(json.dumps(document))
        code, _, err = scalpel("calibrate", str(corun))
        assert code == 2 and message in err, err
