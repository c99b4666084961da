"""benchmarks/interference_external.py reads a co-run matrix laid out as Fair-CO2's
``colocation/ref-results`` (built here in tmp_path; nothing is downloaded) and holds its cells out."""

import itertools
import math
from pathlib import Path

import pytest


@pytest.fixture
def external(load_benchmark):
    return load_benchmark("interference_external")


START, END = "2024-11-13 22:49:30.000", "2024-11-13 22:50:30.000"
PCM_HEADER = ("Datetime,Socket 0 L3 Cache Occupancy,Socket 1 L3 Cache Occupancy,"
              "Memory Read Bandwidth (System) (GB/s),Memory Write Bandwidth (System) (GB/s)\n")


def write_run(folder: Path, runtimes: list[tuple[str, float]], occupancy_kib: int = 1000) -> None:
    """One folder of the artifact: workload_data.csv (as pandas writes it, index first) and a
    pcm_processed.csv with one sample before the run, two in it and one after."""
    folder.mkdir()
    (folder / "workload_data.csv").write_text(
        ",workload,cpu,memory,start,end,runtime\n"
        + "".join(f"{i},{name},48,96,{START},{END},{runtime}\n" for i, (name, runtime) in enumerate(runtimes)))
    (folder / "pcm_processed.csv").write_text(
        PCM_HEADER + "2024-11-13 22:49:00.000,9999,9999,99,99\n"
        f"2024-11-13 22:49:40.000,{occupancy_kib},{occupancy_kib},1.0,0.5\n"
        f"2024-11-13 22:50:20.000,{occupancy_kib + 200},{occupancy_kib},3.0,0.5\n"
        "2024-11-13 22:51:00.000,9999,9999,99,99\n")


def artifact(root: Path, solo: dict[str, float], beside: dict[tuple[str, str], float]) -> Path:
    """Solo folders and one folder per unordered pair, named in the order of ``solo``'s keys."""
    names = list(solo)
    for name, runtime in solo.items():
        write_run(root / name, [(name, runtime)])
    for i, j in itertools.combinations_with_replacement(range(len(names)), 2):
        a, b = names[i], names[j]
        # a self-pair's second copy is named as the workload too; the artifact reads the first row
        write_run(root / f"{a}_{b}", [(a, beside[(a, b)]), (b, beside[(b, a)] if a != b else 999.0)])
    return root


def test_the_matrix_is_pair_runtime_over_solo_runtime_in_either_folder_order(tmp_path, external):
    solo = {"pgbench-10": 2.0, "nBody": 10.0, "faiss": 1.0, "x265": 4.0}
    beside = {(a, b): solo[a] * (1 + 0.1 * i + 0.01 * j)
              for i, a in enumerate(solo) for j, b in enumerate(solo)}
    source = artifact(tmp_path, solo, beside)
    workloads = external.workloads_in(source)
    assert workloads == sorted(solo)
    matrix = external.slowdown_matrix(source, workloads)
    assert len(matrix) == 16
    for (a, b), slowdown in matrix.items():
        assert slowdown == pytest.approx(beside[(a, b)] / solo[a])  # the self-pair: its first row, not the 999


def test_a_missing_pair_names_both_folders_it_looked_for(tmp_path, external):
    source = artifact(tmp_path, {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0},
                      {(x, y): 1.0 for x in "abcd" for y in "abcd"})
    (source / "b_d" / "workload_data.csv").unlink()
    with pytest.raises(FileNotFoundError, match="no folder b_d or d_b"):
        external.slowdown_matrix(source, external.workloads_in(source))


def test_solo_counters_average_the_samples_inside_the_run_in_bytes(tmp_path, external):
    write_run(tmp_path / "nBody", [("nBody", 3.0)], occupancy_kib=1000)
    counters = external.solo_counters(tmp_path / "nBody")
    assert counters["samples"] == 2
    assert counters["l3_occupancy_bytes"] == pytest.approx((2000 + 2200) / 2 * 1024)
    assert counters["memory_traffic"] == pytest.approx((1.5 + 3.5) / 2)


def test_the_splits_hold_out_what_they_say(external):
    workloads = [f"w{i}" for i in range(6)]
    pairs = external.leave_one_pair_out(workloads)
    assert len(pairs) == 21 and sorted(c for fold in pairs for c in set(fold)) == sorted(
        itertools.product(workloads, workloads))
    triples = external.held_out_triples(workloads, 5, seed=0)
    assert len(triples) == 5 and triples == external.held_out_triples(workloads, 5, seed=0)
    assert len(external.held_out_triples(workloads, 0, seed=0)) == 20
    assert all(len(fold) == 9 for fold in external.blocks(triples))
    assert all(len(fold) == 36 - 9 for fold in external.new_workloads(workloads, triples))


def test_per_key_recovers_row_and_column_effects_that_footprint_cannot_see(external):
    """Equal footprints, log slowdown 0.3 + s_a + p_b: footprint-only is a constant, per-key learns the rest."""
    workloads = [f"w{i}" for i in range(6)]
    sensitivity = dict(zip(workloads, [0.0, 0.2, -0.1, 0.3, 0.1, -0.2]))
    pressure = dict(zip(workloads, [0.1, -0.1, 0.3, 0.0, -0.2, 0.2]))
    matrix = {(a, b): math.exp(0.3 + sensitivity[a] + pressure[b]) for a in workloads for b in workloads}
    coruns = external.keyed_coruns(matrix, {w: 60 * 2**20 for w in workloads})
    scores = external.summary([external.fold_errors(coruns, fold, 64 * 2**20)
                               for fold in external.leave_one_pair_out(workloads)])
    assert scores["footprint"]["pooled"] == pytest.approx(scores["constant"]["pooled"], abs=0.02)
    assert scores["per_key"]["pooled"] < 0.5 * scores["footprint"]["pooled"]
    assert external.verdict(True, scores)[0]
