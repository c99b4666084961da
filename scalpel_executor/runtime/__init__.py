"""The live path, one package per process a module runs in.

- :mod:`~scalpel_executor.runtime.driver`: the driver's process (the Parsl executor, its learning,
  its report, its view of the node managers);
- :mod:`~scalpel_executor.runtime.node`: a node manager's process (the worker pool and its
  dispatch thread), or the driver's with ``node_manager=False``;
- :mod:`~scalpel_executor.runtime.worker`: a worker process, pinned, one task at a time;
- :mod:`~scalpel_executor.runtime.wire`: the messages and channels between them;
- the modules here: what every process shares (the pool contract, the options every pool is
  told, the errors, the logs, thread names).

Data flow: ``ScalpelExecutor.submit`` (Parsl) ─> a pool (:mod:`~scalpel_executor.runtime.contract`:
the node manager's client, provider mode's hub, or the in-process
:class:`~scalpel_executor.runtime.node.pool.WorkerPool`) ─> one pinned worker per core ─> results
back to the executor, which settles Parsl's futures and records what was measured. Every pool is
told one :class:`~scalpel_executor.runtime.options.PoolOptions`.
"""
