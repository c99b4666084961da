"""The live path: the worker protocol, pinned workers, the worker pool and the Parsl executor.

Data flow: ``ScalpelExecutor.submit`` (Parsl) ─> :class:`~scalpel_executor.runtime.pool.WorkerPool`
(batching + the core scheduler on a dispatch thread) ─> one pinned
:mod:`~scalpel_executor.runtime.worker` per core ─> results back through the pool's completion
thread to the executor, which settles Parsl's futures and records what was measured. Whatever runs
the tasks (that pool, a node manager's client, provider mode's hub) keeps one contract,
:class:`~scalpel_executor.runtime.contract.Pool`, and is told one
:class:`~scalpel_executor.runtime.options.PoolOptions`.
"""
