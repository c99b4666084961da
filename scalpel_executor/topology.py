"""Moved to :mod:`scalpel_executor.core.domains`; this old path still imports, with a ``FutureWarning`` (:mod:`scalpel_executor._moved`)."""

from scalpel_executor._moved import warn_moved

from scalpel_executor.core.domains import *  # noqa: F401,F403
from scalpel_executor.core.domains import __all__  # noqa: F401
from scalpel_executor.host.sysfs import detect_topology, resolve_topology  # noqa: F401,E402 (Topology.detect and .resolve before the move)

warn_moved("scalpel_executor.topology", "scalpel_executor.core.domains")
