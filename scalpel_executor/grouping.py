"""Moved to :mod:`scalpel_executor.core.grouping`; this name keeps working for code that imported it."""

from scalpel_executor.core.grouping import *  # noqa: F401,F403
from scalpel_executor.core.grouping import __all__  # noqa: F401
