"""What runs in a worker process: one per core, pinned, one task at a time.

:mod:`.main` is the process (``python -m scalpel_executor.runtime.worker.main``); :mod:`.task_place`
what a task's run changes in it and puts back. It imports neither the driver's package nor the
node's: only what crosses to it (:mod:`scalpel_executor.runtime.wire`) and the shared modules.
"""
