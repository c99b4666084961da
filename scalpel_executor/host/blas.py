"""BLAS thread caps: a task is one core's work, so the BLAS it calls runs on one thread.

Two levers, for two moments. Before a worker starts, the variables in :data:`THREAD_ENV_VARS`
cap the thread pools that BLAS and OpenMP runtimes create as they load. In a process that has
loaded them already, :func:`limit_blas_threads` resizes the BLAS pools in place, through
threadpoolctl (OpenBLAS, MKL, BLIS and FlexiBLAS alike).
"""

from __future__ import annotations

from threadpoolctl import threadpool_limits

#: Environment variables that cap BLAS and OpenMP thread counts. A runtime reads them once, as it
#: loads, so they take effect only in a process started with them set.
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                   "VECLIB_MAXIMUM_THREADS")


def limit_blas_threads(threads: int = 1) -> None:
    """Make the BLAS libraries loaded in this process, numpy's included, use ``threads`` threads.

    Parameters
    ----------
    threads : int
        Threads per BLAS library; 1 for a task that is one core's work.

    Notes
    -----
    Works after the libraries are loaded, where environment variables no longer can. The limit
    holds for the rest of the process; a BLAS loaded later starts with its own default (cap that
    with :data:`THREAD_ENV_VARS`). Costs a scan of the loaded shared libraries, under a
    millisecond.

    Examples
    --------
    >>> from threadpoolctl import threadpool_info
    >>> limit_blas_threads(1)
    >>> {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"} <= {1}
    True
    """
    import numpy  # noqa: F401  (loads numpy's BLAS, so that the limit reaches it)

    threadpool_limits(limits=int(threads), user_api="blas")
