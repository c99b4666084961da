"""Config for Parsl's own executor-agnostic test suite (``pytest <parsl>/tests --config THIS``)."""

import os
import tempfile

from parsl.config import Config

from scalpel_executor import ScalpelExecutor

# The suite's apps (parsl.tests.*) would leave some 170 profiles in the user's own store
# ($SCALPEL_PROFILE_STORE or ~/.local/share/scalpel-executor/profiles.sqlite); they go to a store of
# this run's own instead, removed when the suite's process exits.
_STORE = tempfile.TemporaryDirectory(prefix="scalpel-parsl-suite-")


def fresh_config():
    store = os.path.join(_STORE.name, "profiles.sqlite")
    return Config(executors=[ScalpelExecutor(label="scalpel", profiles=store)], run_dir="runinfo")
