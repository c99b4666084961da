"""The package's log records into Parsl's log (``<run_dir>/parsl.log``).

A DataFlowKernel attaches its log handler (``Config(initialize_logging=True)``'s file, or a
``LogConfig``'s) to the ``parsl`` logger only, so records of ``scalpel_executor.*`` loggers would
reach only the root logger's handlers: with none configured, Python prints warnings on stderr and
nothing reaches the run directory. While an executor runs under a DataFlowKernel, the
``scalpel_executor`` logger shares the ``parsl`` logger's handlers, so its warnings (a hint key not
supported yet, a hint far off its measurement, a lost node manager) land in ``parsl.log`` beside
Parsl's own records. Only records at the ``scalpel_executor`` logger's level reach them (by default
the root's, WARNING); ``logging.getLogger("scalpel_executor").setLevel("INFO")`` adds the rest.
"""

from __future__ import annotations

import logging
from typing import Callable


def share_parsl_handlers() -> Callable[[], None]:
    """Give the ``scalpel_executor`` logger the ``parsl`` logger's handlers it lacks; returns the
    function that takes them back (call it when the executor shuts down)."""
    package = logging.getLogger("scalpel_executor")
    shared = [handler for handler in logging.getLogger("parsl").handlers if handler not in package.handlers]
    for handler in shared:
        package.addHandler(handler)

    def take_back() -> None:
        for handler in shared:
            package.removeHandler(handler)

    return take_back
