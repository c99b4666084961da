"""Config for Parsl's own test suite in provider mode (``pytest <parsl>/tests --config THIS``).

Two LocalProvider blocks, each running one node manager confined to CPU ``block_id`` (``--cpus
{block_id}``, as tests/runtime/test_provider_executor.py does), so every task crosses CurveZMQ and
the hub deals between two managers, as on a cluster of two one-core nodes.

What Parsl's own HTEX config (``parsl/tests/configs/htex_local.py``) does, mirrored: a fixed set of
blocks started at load (``init_blocks == max_blocks``) and ``strategy='none'``, so no block is scaled
in or replaced while the suite runs; heartbeats keep their defaults, as HTEX's do there. A fixed set
matters here beyond mirroring: a replacement block would be numbered 2 and ``--cpus 2`` names a CPU
this two-core machine does not have.
"""

import os
import tempfile

from parsl.config import Config
from parsl.launchers import SingleNodeLauncher
from parsl.providers import LocalProvider

from scalpel_executor import ScalpelExecutor
from scalpel_executor.runtime.driver.executor import DEFAULT_LAUNCH_CMD

BLOCKS = 2
# As in parsl_suite_config.py: the suite's profiles go to a store of this run's own, not the user's.
# The store is the driver's alone; the blocks' node managers never open one.
_STORE = tempfile.TemporaryDirectory(prefix="scalpel-parsl-suite-")


def fresh_config():
    provider = LocalProvider(init_blocks=BLOCKS, min_blocks=BLOCKS, max_blocks=BLOCKS, nodes_per_block=1,
                             launcher=SingleNodeLauncher())
    executor = ScalpelExecutor(label="scalpel_blocks", provider=provider,
                               launch_cmd=DEFAULT_LAUNCH_CMD + " --cpus {block_id}",
                               profiles=os.path.join(_STORE.name, "profiles.sqlite"))
    return Config(executors=[executor], strategy="none", run_dir="runinfo")
