"""Moved to :mod:`scalpel_executor.runtime.errors`; this name keeps working for code that imported it."""

from scalpel_executor.runtime.errors import *  # noqa: F401,F403
from scalpel_executor.runtime.errors import __all__  # noqa: F401
