"""Fault injection: every task ends exactly once, whatever happens to its worker, and when.

The harness is :mod:`scalpel_executor.stress.faults` (tests/runtime/test_faults.py runs it at a
small size); this script runs it at the size docs/reliability.md reports::

    python benchmarks/faults.py                      # 200 cases, seed 1
    python benchmarks/faults.py --cases 3000 --seed 7 --json faults.json
    python benchmarks/faults.py --seed 123 --cases 1  # replay the case a failure printed
"""

import sys

from scalpel_executor.stress.faults import main

if __name__ == "__main__":
    sys.exit(main())
