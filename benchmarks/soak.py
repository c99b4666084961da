"""Soak: many short tasks with injected worker crashes, then repeated start/stop cycles.

The harness is :mod:`scalpel_executor.stress.soak` (tests/runtime/test_reliability.py runs it at
a smaller size); this script runs it at full size::

    python benchmarks/soak.py                                  # 20,000 tasks, 1% crash, 50 cycles
    python benchmarks/soak.py --tasks 2000 --cycles 10 --json soak.json
"""

import sys

from scalpel_executor.stress.soak import main

if __name__ == "__main__":
    sys.exit(main())
