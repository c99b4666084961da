"""Moved to :mod:`scalpel_executor.runtime.executor`; this name keeps working for code that imported it."""

from scalpel_executor.runtime.executor import *  # noqa: F401,F403
from scalpel_executor.runtime.executor import __all__  # noqa: F401
