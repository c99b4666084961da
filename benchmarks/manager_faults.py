"""Fault injection at node managers: local mode's manager, provider mode's managers and hub.

The harness is :mod:`scalpel_executor.stress.manager_faults` (tests/runtime/test_manager_faults.py
runs a handful of its cases); this script runs it at the size docs/reliability.md reports::

    python benchmarks/manager_faults.py                              # 200 cases, seed 1, both modes
    python benchmarks/manager_faults.py --mode provider --cases 500 --seed 7 --part 1/2 --json a.json
    python benchmarks/manager_faults.py --replay provider/busy/sigkill/7000014   # as a failure printed it
"""

import sys

from scalpel_executor.stress.manager_faults import main

if __name__ == "__main__":
    sys.exit(main())
