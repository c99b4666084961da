"""What measures the executor: the demo, the benchmark against Parsl's executors, the contention fit.

- :mod:`.plans` — what the demo and the benchmark run by default (light: no Parsl, no numpy).
- :mod:`.apps` — the task bodies every executor's workers run; :mod:`.harness` — starting an
  executor, warming it up, running a batch, the solo pass, progress bars; :mod:`.mix_sizing` — the
  LLC to size batches for, and steps that last as planned on this machine.
- :mod:`.demo` — ``scalpel demo``; :mod:`.bench` — ``scalpel bench`` (mixes, oracle order, run
  loop, statistics, report); :mod:`.contention_fit` — ``scalpel calibrate``;
  :mod:`.simulated_policies` — ``scalpel simulate`` and benchmarks/scale.py.
- What scripts in benchmarks/ share: :mod:`.records` — the JSON record each writes;
  :mod:`.workflow_studies` — the workflow studies' instances, command line and process pool;
  :mod:`.coruns` — tasks measured side by side on cores of their own (corun.py, interference_holdout.py).
- :mod:`.tables` and :mod:`.charts` — every printed table and every chart.

Nothing in the runtime imports this package.
"""
