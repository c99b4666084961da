"""Malleable tasks' widths in simulation: the default width rule against fixed widths, the best
fixed width in hindsight and equipartitioning (``scalpel_executor.experiments.width_study``).

::

    python benchmarks/width_study.py --seeds 0,1 --out docs/data/width-study-tuning.json
    python benchmarks/width_study.py --seeds 100,101,102 --jobs 2 --out docs/data/width-study.json
"""

import sys

from scalpel_executor.experiments.width_study import main

if __name__ == "__main__":
    sys.exit(main())
