"""Where the package's log records go: Parsl's log in the driver, files under the run directory on nodes.

**The driver.** A DataFlowKernel attaches its log handler (``Config(initialize_logging=True)``'s
file, or a ``LogConfig``'s) to the ``parsl`` logger only, so records of ``scalpel_executor.*``
loggers would reach only the root logger's handlers: with none configured, Python prints warnings
on stderr and nothing reaches the run directory. While an executor runs under a DataFlowKernel, the
``scalpel_executor`` logger shares the ``parsl`` logger's handlers (:func:`share_parsl_handlers`),
so its warnings (a hint key not supported yet, a hint far off its measurement, a lost node manager)
land in ``parsl.log`` beside Parsl's own records. Only records at the ``scalpel_executor`` logger's
level reach them (by default the root's, WARNING); ``logging.getLogger("scalpel_executor").setLevel("INFO")``
adds the rest. A node manager's records at that level are re-logged there too (its ``Log`` messages).

**Node managers and workers**, as HTEX's ``<run_dir>/<label>/block-N/<manager>/`` logs::

    <run_dir>/<label>/block-<block id>/<host>-<manager pid>/manager.log     (local mode: block 0)
                                                            worker-<rank>.log (PARSL_WORKER_RANK; a
                                                                               replacement appends)

The executor names ``<run_dir>/<label>`` on the manager's command line (``--log-dir``, as HTEX's
``--logdir``; a provider block's launch command carries it, so on a cluster it is the run
directory on the shared file system); the manager picks its own directory below it
(:func:`node_log_dir`: a node-local one under the temporary directory when that cannot be written)
and hands it to its workers in :data:`LOG_DIR_ENV`. Both log at INFO and above
(:data:`FILE_LEVEL`): start, end, worker deaths, drains; a task is not logged. Without a run
directory (an executor not started by a DataFlowKernel) no file is written.
"""

from __future__ import annotations

import logging
import os
import tempfile
from typing import Callable

__all__ = ["share_parsl_handlers", "node_log_dir", "log_to_file", "summary_logger", "LOG_DIR_ENV", "FILE_LEVEL"]

#: The directory a node manager's workers write their log files into; the manager sets it.
LOG_DIR_ENV = "SCALPEL_LOG_DIR"
FILE_LEVEL = logging.INFO  # what the managers' and workers' files keep
FILE_FORMAT = "%(asctime)s.%(msecs)03d %(process)d %(threadName)s %(name)s:%(lineno)d %(levelname)s: %(message)s"


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


#: The logger of the sentence each run ends with (the run and where its report is; a clause per
#: line past summary_words.SUMMARY_WIDTH characters), at INFO, and of the warnings on a workflow's own
#: resource requests (a ``max_cores`` capped at the widest LLC domain, a task wider than any), once
#: per value: into parsl.log (through the ``scalpel_executor`` logger's shared handlers) and onto
#: the terminal, where a notebook's user reads them.
#: ``logging.getLogger(SUMMARY_LOGGER).setLevel("WARNING")`` silences the closing sentence.
SUMMARY_LOGGER = "scalpel_executor.summary"


class _CurrentStderr(logging.Handler):
    """Writes to whatever ``sys.stderr`` is when a record comes (a notebook replaces it after import),
    unless a handler the record reaches anyway writes it there or to ``sys.stdout`` (:func:`_on_terminal`)."""

    def emit(self, record: logging.LogRecord) -> None:
        import sys

        if _on_terminal(record, (sys.stderr, sys.stdout)):
            return
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):  # a closed terminal: the line is in parsl.log all the same
            pass


def _on_terminal(record: logging.LogRecord, streams: tuple) -> bool:
    """Whether a handler above the summary logger, which the record propagates to, writes it to one
    of ``streams``: a script's ``logging.basicConfig(level=logging.INFO)`` or Parsl's
    ``set_stream_logger()`` (its handler shared with the package's logger) printed the closing
    line a second time."""
    logger = logging.getLogger(SUMMARY_LOGGER)
    while logger.propagate and logger.parent is not None:
        logger = logger.parent
        for handler in logger.handlers:
            if (isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler)
                    and handler.stream in streams and record.levelno >= handler.level and handler.filter(record)):
                return True
    return False


def summary_logger() -> logging.Logger:
    """The logger of a run's closing line (:data:`SUMMARY_LOGGER`): INFO and up, onto the terminal
    as well as wherever the package's records go."""
    summary = logging.getLogger(SUMMARY_LOGGER)
    if not any(isinstance(handler, _CurrentStderr) for handler in summary.handlers):
        summary.addHandler(_CurrentStderr())
        if summary.level == logging.NOTSET:
            summary.setLevel(logging.INFO)
    return summary


def node_log_dir(executor_dir: str, block_id: str, hostname: str, pid: int) -> tuple[str, str | None]:
    """The directory one node manager and its workers log into, made if needed, and why it is not
    the one asked for (None when it is).

    ``<executor_dir>/block-<block_id>/<hostname>-<pid>``; when that cannot be made or written (a run
    directory the node does not share, or reads only), the same path under
    ``<temp dir>/scalpel-executor-<uid>/``, on the node itself.
    """
    leaf = os.path.join(f"block-{block_id or '0'}", f"{hostname}-{pid}")
    wanted = os.path.join(executor_dir, leaf)
    try:
        os.makedirs(wanted, exist_ok=True)
        if os.access(wanted, os.W_OK):
            return wanted, None
        problem = f"{wanted} is not writable"
    except OSError as error:
        problem = f"{wanted} cannot be made: {error.strerror or error}"
    local = os.path.join(tempfile.gettempdir(), f"scalpel-executor-{os.getuid()}",
                         os.path.abspath(executor_dir).lstrip(os.sep), leaf)
    os.makedirs(local, mode=0o700, exist_ok=True)
    return local, problem


def log_to_file(path: str) -> logging.Handler:
    """Append the ``scalpel_executor`` logger's records at :data:`FILE_LEVEL` and above to ``path``,
    lowering the logger's level to it if needed; returns the handler."""
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setLevel(FILE_LEVEL)
    handler.setFormatter(logging.Formatter(FILE_FORMAT, "%Y-%m-%d %H:%M:%S"))
    package = logging.getLogger("scalpel_executor")
    package.addHandler(handler)
    if package.getEffectiveLevel() > FILE_LEVEL:
        package.setLevel(FILE_LEVEL)
    return handler
