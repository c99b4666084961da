"""``scalpel bench``: workload mixes under Parsl's executors and every ScalpelExecutor policy.

::

    mixes (mixes.build_mixes)                peers (plans.PEERS, started by the harness)
      contention   large+small kernels,        htex-block, htex-none   Parsl HighThroughputExecutor
                   large ones first            threads                 Parsl ThreadPoolExecutor
      suite-2x/4x/8x  the kernel suite         processpool             concurrent.futures
      light        small kernels only          scalpel:<policy>        ScalpelExecutor, per policy
      workflow     a DAG: per member small ->
                   large -> small kernel (each
                   takes the last one's dict), a
                   bash_app, one reduce (inputs=)
      noop-throughput, noop-latency, montage   oracle                  contention mix in the order an
                                                                       exhaustive search in the contention
                                                                       model finds best (Scalpel's pinned
                                                                       workers, fifo)
    solo pass, once: each distinct kernel case (one per profile key) alone on one pinned core
               (lower bounds, and the footprints Scalpel's profile store learns); a case this
               machine ran alone before is reused, not run (experiments.solo_times, --fresh-solo)
    for repeat in 1..R:
        for peer in PEERS rotated by repeat (A B C, B C A, ...):      interleaved
            start the peer ─ warm up every worker ─ for mix: submit all, wait for all ─ stop
    summarise: per (mix, peer) median makespan, ratio to htex-block with a paired bootstrap 95%
               confidence interval, ratio to the lower bound, share of the HTEX-to-oracle gap
    verdicts:  per mix, one sentence: which peers differ from htex-block outside noise (an interval
               that leaves out 1) and which are inside it, on which machine; then which runs other
               work disturbed (each run's other work per core, harness.OtherWork, above the
               executor's own BUSY_OTHERS)
    write: <out>/bench.json (everything), <out>/pyperf/<peer>.json (pyperf suites: one benchmark
           per mix, one run per repeat, so ``python -m pyperf compare_to`` works), <out>/bench.png

Every peer runs the same task bodies (:mod:`scalpel_executor.experiments.apps`) with one BLAS
thread, and every makespan spans first submit to last result, after the warm-up.
pyperf's ``Runner`` is not used to drive the runs: it times one benchmark at a time in its own
worker processes, which would put minutes of machine drift between the executors compared.
Instead each repetition becomes a ``pyperf.Run`` and pyperf's statistics and format carry them.

Modules: :mod:`.mixes` (the workloads), :mod:`.oracle` (the best submission order, searched in the
contention model), :mod:`.run` (the run loop and the record), :mod:`.stats` (paired bootstrap,
summary rows), :mod:`.verdict` (the sentences), :mod:`.report` (the table), :mod:`.pyperf_suites`
(pyperf's format). The plans and names (mixes, peers, defaults) are in
:mod:`scalpel_executor.experiments.plans`.
"""
