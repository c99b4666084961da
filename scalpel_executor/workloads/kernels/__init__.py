"""Compute kernels modelled on Polybench, with footprint and run time set apart.

A *case* is ``KernelCase(kernel, size, steps)``: the problem ``size`` fixes which arrays the kernel
keeps live, hence its memory footprint; ``steps`` (time steps, pivot rounds or repetitions) fixes
how long it runs. The moving parts::

    suite(llc_bytes, cores) / contention_mix(...)        pure: no clock, no process
        footprint targets (fractions of the LLC) ─> size_for_footprint ─> size
        RATES (seconds per unit of work, measured once) ─> steps for a target run time
        └─> [KernelCase(kernel, size, steps), ...]
                │   scale_to_seconds(case, target_seconds): one short timed run rescales steps
                v
    run_kernel(name, size, steps, seed, check)           the task body, e.g. a Parsl python_app
        KERNELS[name].arrays(size) ─> allocate ─> init(rng) ─> run(state, steps) ─> output
        check: run and a naive loop version agree on a tiny instance, and
               verify(state, output) holds on the real result (Freivalds' test, a maximum
               principle, a conserved sum, ...) ─> KernelCheckError otherwise
        └─> {"name", "size", "steps", "footprint_bytes", "seconds", "cpu_seconds", "checksum"}

``footprint_bytes`` is the summed size of every array the kernel allocates, scratch buffers
included: the kernels write into preallocated buffers (``out=``) so that numpy creates no hidden
array of the problem's size while they run. Every step touches all of it, so this is also the
working set a step cycles through.

Linear-algebra kernels run on one BLAS thread (a task is one core's work); stencils and dynamic
programs are vectorised with numpy where the dependences allow and loop in Python only along the
dimension that carries a dependence (trisolv's rows, adi's sweeps, seidel-2d's wavefronts,
nussinov's diagonals).

The irregular kernel ``spmv`` (gathers at random column indices into a vector that is most of
its footprint) is the most sensitive to a co-runner: on a 2-core machine with a 32 MiB L3, two
random-gather tasks of 20 MiB each run about 1.4x slower together than alone.
``benchmarks/corun.py`` measures such pairs for any cases.

Modules:

- :mod:`~scalpel_executor.workloads.kernels.base` — :class:`Kernel`, :class:`KernelCheckError`, shared helpers
- the kernels by family: :mod:`~scalpel_executor.workloads.kernels.linear_algebra`,
  :mod:`~scalpel_executor.workloads.kernels.stencils`,
  :mod:`~scalpel_executor.workloads.kernels.dynamic_programs` and
  :mod:`~scalpel_executor.workloads.kernels.irregular` (spmv)
- :mod:`~scalpel_executor.workloads.kernels.registry` — :data:`KERNELS` by name, :func:`footprint_bytes`
- :mod:`~scalpel_executor.workloads.kernels.sizing` — :func:`size_for_footprint`, :data:`RATES`,
  :func:`step_seconds`, :func:`steps_for_seconds`
- :mod:`~scalpel_executor.workloads.kernels.task` — :func:`check_kernel`, :func:`run_kernel`
- :mod:`~scalpel_executor.workloads.kernels.cases` — :class:`KernelCase`, :func:`scale_to_seconds`, :func:`suite`,
  :func:`contention_mix`

BLAS threads are set by :func:`scalpel_executor.host.blas.limit_blas_threads`, re-exported here.
"""

from scalpel_executor.host.blas import limit_blas_threads
from scalpel_executor.workloads.kernels.base import ArraySpec, Kernel, KernelCheckError, State
from scalpel_executor.workloads.kernels.cases import SCALES, KernelCase, scale_to_seconds, contention_mix, suite
from scalpel_executor.workloads.kernels.linear_algebra import ALPHA, BETA
from scalpel_executor.workloads.kernels.registry import KERNELS, footprint_bytes, get_kernel
from scalpel_executor.workloads.kernels.sizing import CALL_SECONDS, RATES, size_for_footprint, step_seconds
from scalpel_executor.workloads.kernels.task import check_kernel, run_kernel

# A task's profile key, and a pickle by reference, name its function by module and qualified name:
# run_kernel keeps the name it had before this package was split, so stored profiles still match.
run_kernel.__module__ = __name__

__all__ = [
    "ALPHA",
    "BETA",
    "CALL_SECONDS",
    "KERNELS",
    "RATES",
    "SCALES",
    "ArraySpec",
    "Kernel",
    "KernelCase",
    "KernelCheckError",
    "State",
    "scale_to_seconds",
    "check_kernel",
    "contention_mix",
    "footprint_bytes",
    "get_kernel",
    "limit_blas_threads",
    "run_kernel",
    "size_for_footprint",
    "step_seconds",
    "suite",
]
