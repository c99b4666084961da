"""Moved to :mod:`scalpel_executor.core.topology`; this name keeps working for code that imported it."""

from scalpel_executor.core.topology import *  # noqa: F401,F403
from scalpel_executor.core.topology import __all__  # noqa: F401
from scalpel_executor.host.topology import detect_topology, resolve_topology  # noqa: F401,E402 (Topology.detect and .resolve before the move)
