"""Moved to :mod:`scalpel_executor.runtime.executor`; this old path still imports, with a ``FutureWarning`` (:mod:`scalpel_executor._moved`)."""

from scalpel_executor._moved import warn_moved

from scalpel_executor.runtime.executor import *  # noqa: F401,F403
from scalpel_executor.runtime.executor import __all__  # noqa: F401

warn_moved("scalpel_executor.executor", "scalpel_executor.runtime.executor")
