"""The driver's dispatch capacity in provider mode: tasks/s through one ManagerHub, no DFK, no workers.

The harness is :mod:`scalpel_executor.stress.dispatch_capacity` (tests/runtime/
test_dispatch_capacity.py runs it with three fake managers); this script prints the figures of
docs/results/dispatch-capacity.md::

    python benchmarks/dispatch_capacity.py --managers 1,8,64 --tasks 20000 --rounds 5 --json capacity.json
"""

import sys

from scalpel_executor.stress.dispatch_capacity import main

if __name__ == "__main__":
    sys.exit(main())
