"""Config for Parsl's own executor-agnostic test suite (``pytest <parsl>/tests --config THIS``)."""

from parsl.config import Config

from scalpel_executor import ScalpelExecutor


def fresh_config():
    return Config(executors=[ScalpelExecutor(label="scalpel")], run_dir="runinfo")
