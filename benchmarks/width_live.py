"""Malleable tasks live: a user's workflow with its numpy steps marked malleable, as whole
processes, against every task at one core and at two (``scalpel_executor.experiments.width_live``).

::

    python benchmarks/width_live.py --repeats 5 --out docs/data/width-live.json
"""

import sys

from scalpel_executor.experiments.width_live import main

if __name__ == "__main__":
    sys.exit(main())
