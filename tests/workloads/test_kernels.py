"""The kernel suite: every kernel against its reference, its checks, sizing, workloads, BLAS threads."""

import dataclasses
import os
import pickle
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_info

from scalpel_executor.workloads.kernels import (
    KERNELS,
    RATES,
    SCALES,
    KernelCase,
    KernelCheckError,
    scale_to_seconds,
    check_kernel,
    contention_mix,
    footprint_bytes,
    limit_blas_threads,
    run_kernel,
    size_for_footprint,
    suite,
)

REPO = Path(__file__).resolve().parents[2]
MiB = 2**20
# Their real-size check is "finite"; the tiny-instance reference is what guards them.
CHECKED_ONLY_FOR_FINITENESS = {"fdtd-2d", "adi"}


def _small_size(name: str) -> int:
    kernel = KERNELS[name]
    return max(kernel.min_size, 3 * kernel.check_size)


@pytest.mark.parametrize("name", list(KERNELS))
def test_kernel_agrees_with_its_plain_loop_reference(name):
    check_kernel(name)
    check_kernel(name, seed=7)


@pytest.mark.parametrize("name", list(KERNELS))
def test_run_kernel_reports_plain_numbers_and_passes_its_checks(name):
    size = _small_size(name)
    result = run_kernel(name, size, steps=2, seed=3)
    assert result["name"] == name and result["size"] == size and result["steps"] == 2
    assert result["footprint_bytes"] == footprint_bytes(name, size)
    assert isinstance(result["seconds"], float) and result["seconds"] >= 0
    assert np.isfinite(result["checksum"])
    assert isinstance(result["cpu_seconds"], float) and result["cpu_seconds"] >= 0
    assert set(result) == {"name", "size", "steps", "footprint_bytes", "seconds", "cpu_seconds", "checksum"}
    assert all(isinstance(value, (int, float, str)) for value in result.values())


def test_the_suite_has_at_least_twelve_kernels_including_an_irregular_one():
    assert len(KERNELS) >= 12
    assert "spmv" in KERNELS
    assert set(RATES) == set(KERNELS)


def test_same_seed_same_checksum_other_seed_other_checksum():
    first = run_kernel("spmv", 4096, steps=3, seed=1)
    again = run_kernel("spmv", 4096, steps=3, seed=1)
    other = run_kernel("spmv", 4096, steps=3, seed=2)
    assert first["checksum"] == again["checksum"]
    assert first["checksum"] != other["checksum"]


def _wrong_everywhere(run):
    def broken(state, steps):
        out = run(state, steps)
        np.negative(out, out=out)
        out -= 1
        return out
    return broken


@pytest.mark.parametrize("name", list(KERNELS))
def test_a_kernel_returning_a_wrong_answer_fails_its_tiny_check(monkeypatch, name):
    kernel = KERNELS[name]
    monkeypatch.setitem(KERNELS, name, dataclasses.replace(kernel, run=_wrong_everywhere(kernel.run)))
    with pytest.raises(KernelCheckError, match=name) as caught:
        run_kernel(name, _small_size(name))
    assert caught.value.kernel == name
    assert "plain-loop reference" in caught.value.mismatch


@pytest.mark.parametrize("name", sorted(set(KERNELS) - CHECKED_ONLY_FOR_FINITENESS))
def test_a_kernel_wrong_only_at_real_sizes_fails_the_check_on_its_real_result(monkeypatch, name):
    kernel = KERNELS[name]
    broken_above_check_size = _wrong_everywhere(kernel.run)

    def run(state, steps):
        big = max(array.size for array in state.values()) > max(a.size for a in kernel.allocate(kernel.check_size, 0).values())
        return broken_above_check_size(state, steps) if big else kernel.run(state, steps)

    monkeypatch.setitem(KERNELS, name, dataclasses.replace(kernel, run=run))
    check_kernel(name)  # the tiny instance is still right
    with pytest.raises(KernelCheckError, match=name):
        run_kernel(name, _small_size(name), steps=2)


@pytest.mark.parametrize("name", sorted(CHECKED_ONLY_FOR_FINITENESS))
def test_a_non_finite_result_fails_the_check_on_the_real_result(monkeypatch, name):
    kernel = KERNELS[name]

    def run(state, steps):
        out = kernel.run(state, steps)
        if out.shape[0] > kernel.check_size:
            out[len(out) // 2, len(out) // 2] = np.nan
        return out

    monkeypatch.setitem(KERNELS, name, dataclasses.replace(kernel, run=run))
    with pytest.raises(KernelCheckError, match="not finite"):
        run_kernel(name, _small_size(name))


def test_check_errors_survive_pickling_with_their_fields():
    error = pickle.loads(pickle.dumps(KernelCheckError("gemm", "C x differs")))
    assert (error.kernel, error.mismatch) == ("gemm", "C x differs")
    assert "gemm" in str(error) and "C x differs" in str(error)


def test_bad_arguments_name_the_value_and_the_fix():
    with pytest.raises(ValueError, match="unknown kernel 'gem'.*gemm"):
        run_kernel("gem", 64)
    with pytest.raises(ValueError, match="size must be an integer >= 32, got 3"):
        run_kernel("spmv", 3)
    with pytest.raises(ValueError, match="steps must be an integer >= 1, got 0"):
        KernelCase("gemm", 64, 0)
    with pytest.raises(ValueError, match="scale must be one of"):
        suite(32 * MiB, 2, "slow")
    with pytest.raises(ValueError, match="cores must be an integer >= 1"):
        contention_mix(32 * MiB, 0, 4)


@pytest.mark.parametrize("name", list(KERNELS))
def test_footprint_is_the_bytes_the_kernel_allocates(name):
    for size in (KERNELS[name].min_size, KERNELS[name].check_size, _small_size(name)):
        allocated = KERNELS[name].allocate(size, 0)
        assert footprint_bytes(name, size) == sum(array.nbytes for array in allocated.values())


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(list(KERNELS)), st.integers(0, 5000), st.integers(1, 5000))
def test_footprint_grows_with_size(name, base, extra):
    size = KERNELS[name].min_size + base
    assert footprint_bytes(name, size + extra) > footprint_bytes(name, size)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(list(KERNELS)), st.floats(1e4, 1e9))
def test_size_for_footprint_brackets_the_target(name, target):
    below = size_for_footprint(name, target)
    above = size_for_footprint(name, target, at_least=True)
    if below > KERNELS[name].min_size:
        assert footprint_bytes(name, below) <= target < footprint_bytes(name, below + 1)
    assert footprint_bytes(name, above) >= target
    assert above == KERNELS[name].min_size or footprint_bytes(name, above - 1) < target


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 64), st.integers(1, 16), st.sampled_from(list(SCALES)), st.integers(0, 2**16))
def test_suite_spans_below_a_core_share_to_above_the_llc(llc_mib, cores, scale, seed):
    llc = llc_mib * MiB
    cases = suite(llc, cores, scale, seed)
    footprints = [case.footprint_bytes for case in cases]
    assert min(footprints) <= llc / cores / 8
    assert max(footprints) > llc
    assert {case.kernel for case in cases} == set(KERNELS)
    shortest, longest = SCALES[scale]
    for case in cases:  # predicted from the rate table: nothing runs here
        assert shortest / 2 <= case.estimated_seconds() <= longest * 1.5, case


def test_suite_levels_for_one_kernel_on_this_machine():
    small, medium, large = suite("32MiB", 2, "quick", kernels=["spmv"])
    assert small.footprint_bytes <= 1 * MiB < medium.footprint_bytes <= 0.6 * 32 * MiB < large.footprint_bytes
    assert large.footprint_bytes >= 48 * MiB


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 64), st.integers(1, 8), st.integers(0, 20), st.integers(0, 2**16))
def test_contention_mix_puts_every_large_case_before_every_small_one(llc_mib, cores, tasks, seed):
    llc = llc_mib * MiB
    mix = contention_mix(llc, cores, tasks, scale="quick", seed=seed)
    assert len(mix) == tasks
    large, small = mix[: (tasks + 1) // 2], mix[(tasks + 1) // 2:]
    for case in large:  # fits the LLC alone, not next to another like it
        assert case.footprint_bytes <= llc < 2 * case.footprint_bytes
    for case in small:
        assert case.footprint_bytes <= llc / cores / 8 or case.size == KERNELS[case.kernel].min_size
    if mix:
        times = [case.estimated_seconds() for case in mix]
        assert max(times) <= 1.5 * min(times)


def test_contention_mix_cycles_through_the_kernels_given():
    mix = contention_mix("32MiB", 2, 6, kernels=("spmv", "jacobi-2d"))
    assert [case.kernel for case in mix] == ["spmv", "jacobi-2d"] * 3


def test_calibrate_keeps_kernel_and_size_and_sets_steps():
    case = KernelCase("jacobi-2d", 128, 1)
    calibrated = scale_to_seconds(case, 0.05, probe_seconds=0.01)
    assert (calibrated.kernel, calibrated.size) == ("jacobi-2d", 128)
    assert calibrated.steps >= 1
    with pytest.raises(ValueError, match="target_seconds must be a positive number"):
        scale_to_seconds(case, 0)


def test_kernel_case_is_a_frozen_value():
    case = KernelCase("spmv", 4096, 2)
    assert case == KernelCase("spmv", 4096, 2) and hash(case) == hash(KernelCase("spmv", 4096, 2))
    assert case.footprint_bytes == footprint_bytes("spmv", 4096)
    assert case.name == "spmv-n4096x2"
    with pytest.raises(dataclasses.FrozenInstanceError):
        case.steps = 3  # type: ignore[misc]


def test_run_kernel_works_in_a_process_pool():
    cases = [KernelCase("spmv", 8192, 2), KernelCase("jacobi-2d", 96, 3), KernelCase("gemm", 48, 2)]
    with ProcessPoolExecutor(max_workers=2) as pool:
        remote = list(pool.map(run_kernel, *zip(*((c.kernel, c.size, c.steps) for c in cases))))
    for case, result in zip(cases, remote):
        assert result["checksum"] == case.run()["checksum"]
        assert result["footprint_bytes"] == case.footprint_bytes


def test_run_kernel_keeps_its_public_name_for_pickles_and_profile_keys():
    assert f"{run_kernel.__module__}.{run_kernel.__qualname__}" == "scalpel_executor.workloads.kernels.run_kernel"
    assert pickle.loads(pickle.dumps(run_kernel)) is run_kernel


def _blas_threads() -> set[int]:
    return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}


def test_limit_blas_threads_resizes_every_loaded_blas():
    from scalpel_executor.host import blas

    assert limit_blas_threads is blas.limit_blas_threads
    if not _blas_threads():
        pytest.skip("numpy's BLAS is not one threadpoolctl controls")
    limit_blas_threads(2)
    assert _blas_threads() == {2}
    limit_blas_threads(1)  # what run_kernel leaves behind anyway
    assert _blas_threads() == {1}


def test_limit_blas_threads_reaches_numpy_when_called_before_numpy_is_imported():
    code = (
        "import sys\n"
        "from scalpel_executor.host.blas import limit_blas_threads\n"
        "assert 'numpy' not in sys.modules, 'importing host.blas imported numpy'\n"
        "limit_blas_threads(1)\n"
        "from threadpoolctl import threadpool_info\n"
        "print(sorted({p['num_threads'] for p in threadpool_info() if p['user_api'] == 'blas'}))\n"
    )
    env = dict(os.environ, OPENBLAS_NUM_THREADS="2", OMP_NUM_THREADS="2")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    child = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() in ("[1]", "[]"), child.stdout
