"""Pure decisions: what the machine looks like, which tasks co-run, which core runs what next.

No module here does I/O, starts a process, reads a clock or imports numpy or Parsl
(``tests/core/test_imports.py`` checks it). Drivers own the clock and pass time in.

- :mod:`~scalpel_executor.core.units` — sizes (``"12MiB"``); :mod:`~scalpel_executor.core.cpulist` — CPU lists (``"0-3"``)
- :mod:`~scalpel_executor.core.domains` — LLC domains of a machine, as a model
- :mod:`~scalpel_executor.core.tasks` — the one task type both drivers use, groups, cores
- :mod:`~scalpel_executor.core.grouping` — Algorithm 1
- :mod:`~scalpel_executor.core.policies` — the paper's Algorithm 2 order (``scalpel-paper``) and the baselines
- :mod:`~scalpel_executor.core.planning` — the default policy, ``scalpel``: a dispatch order checked in the model
- :mod:`~scalpel_executor.core.orders` — dispatch orders in the model: the evaluator and its state, trace, the tail search
- :mod:`~scalpel_executor.core.multicore_orders` — orders of tasks of several cores, as the scheduler books them
- :mod:`~scalpel_executor.core.scheduler` — the state machine drivers talk to
- :mod:`~scalpel_executor.core.batching` — when arrivals join the scheduler
- :mod:`~scalpel_executor.core.contention` and :mod:`~scalpel_executor.core.simulate` — the simulated driver
- :mod:`~scalpel_executor.core.machines` — named simulated machines
"""
