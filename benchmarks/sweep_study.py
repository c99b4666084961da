"""Parameter sweeps of malleable tasks in simulation: every task a profile key of its own, learning
alone or borrowing its family's speed-up (``scalpel_executor.experiments.sweep_study``).

::

    python benchmarks/sweep_study.py --seeds 0,1 --jobs 2 --out docs/data/sweep-study-tuning.json
    python benchmarks/sweep_study.py --seeds 100,101,102 --jobs 2 --out docs/data/sweep-study.json
    python benchmarks/sweep_study.py --seeds 1300,1301,1302 --jobs 2 --out docs/data/sweep-study-fresh.json
"""

import sys

from scalpel_executor.experiments.sweep_study import main

if __name__ == "__main__":
    sys.exit(main())
