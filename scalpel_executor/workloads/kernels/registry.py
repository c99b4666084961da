"""The registry: every kernel by name, in the order workloads list them, and argument checks."""

from __future__ import annotations

import numpy as np

from scalpel_executor.workloads.kernels.base import Kernel
from scalpel_executor.workloads.kernels.dynamic_programs import DYNAMIC_PROGRAMS
from scalpel_executor.workloads.kernels.irregular import IRREGULAR
from scalpel_executor.workloads.kernels.linear_algebra import LINEAR_ALGEBRA
from scalpel_executor.workloads.kernels.stencils import STENCILS

# suite() draws its run times kernel by kernel in this order: reordering it changes its cases.
KERNELS: dict[str, Kernel] = {k.name: k for k in (*LINEAR_ALGEBRA, *STENCILS, *DYNAMIC_PROGRAMS, *IRREGULAR)}


def get_kernel(name: str) -> Kernel:
    """The kernel called ``name``; a ValueError lists the known names otherwise."""
    try:
        return KERNELS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown kernel {name!r}; choose one of {', '.join(KERNELS)}") from None


def _validated(name: str, size: int, steps: int) -> Kernel:
    kernel = get_kernel(name)
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < kernel.min_size:
        raise ValueError(f"kernel {name!r}: size must be an integer >= {kernel.min_size}, got {size!r}")
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"kernel {name!r}: steps must be an integer >= 1, got {steps!r}")
    return kernel


def footprint_bytes(name: str, size: int) -> int:
    """Bytes of every array kernel ``name`` keeps live at problem size ``size``.

    Parameters
    ----------
    name : str
        A key of :data:`KERNELS`.
    size : int
        The problem size n (matrices are n x n; doitgen's tensor n x n x n; spmv's vector has n
        entries).

    Returns
    -------
    int
        The summed ``nbytes`` of the arrays :meth:`Kernel.allocate` creates, scratch included.

    Examples
    --------
    >>> footprint_bytes("jacobi-2d", 1024)  # two 1024 x 1024 grids of float64
    16777216
    """
    return _validated(name, size, 1).footprint_bytes(size)
