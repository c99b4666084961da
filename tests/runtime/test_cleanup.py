"""What a task leaves behind does not outlast it: a daemon holding the node manager's error output
does not hold up ``dfk.cleanup()``, and standard descriptors or streams a task closed or replaced are
restored in its worker before the next task.

Real Parsl, real worker processes.
"""

import os
import signal
import time

import parsl
import pytest
from parsl import python_app
from parsl.config import Config

from scalpel_executor import ScalpelExecutor
from tests.runtime.helpers import GENEROUS, gone, wait_until

#: dfk.cleanup() took 10 s (the stderr reader's join timeout) with such a daemon; it should take
#: about half a second more than without one. Three times that goal, for a loaded shared host.
CLEANUP_BOUND = 3.0


@python_app(executors=["scalpel"])
def start_daemon_holding_stderr(seconds):
    """Start a daemon (double fork, its own session) that keeps stdin, stdout and stderr open for
    ``seconds``; its pid."""
    import os
    import time

    read_end, write_end = os.pipe()
    if os.fork() == 0:  # the first child: a new session, the daemon, and gone
        os.setsid()
        daemon = os.fork()
        if daemon == 0:
            os.closerange(3, 4096)  # as a daemon does; it keeps its standard descriptors
            time.sleep(seconds)
            os._exit(0)
        os.write(write_end, str(daemon).encode())
        os._exit(0)
    os.close(write_end)
    os.wait()
    with os.fdopen(read_end) as pipe:
        return int(pipe.read())


def test_dfk_cleanup_does_not_wait_for_a_daemon_a_task_left_holding_the_managers_stderr(tmp_path):
    executor = ScalpelExecutor(label="scalpel", topology="1x1:32MiB", profiles=False)
    dfk = parsl.load(Config(executors=[executor], run_dir=str(tmp_path)))
    daemon = None
    try:
        daemon = start_daemon_holding_stderr(10 * GENEROUS).result(timeout=GENEROUS)
        assert not gone([daemon])
    finally:
        started = time.monotonic()
        dfk.cleanup()
        took = time.monotonic() - started
        if daemon is not None:
            os.kill(daemon, signal.SIGKILL)  # not our child: init reaps it
    print(f"\ndfk.cleanup() took {took:.2f} s with a daemon holding the manager's stderr")
    assert took < CLEANUP_BOUND
    assert wait_until(lambda: gone([daemon]))


@python_app(executors=["scalpel"])
def break_standard_streams(how):
    import os
    import sys

    if how == "close fds 1 and 2":
        os.close(1)
        os.close(2)
    elif how == "replace sys.stdout with a closed file":
        sys.stdout = open(os.devnull, "w")
        sys.stdout.close()
    elif how == "close sys.stdout and sys.stderr":
        sys.stdout.close()
        sys.stderr.close()
    elif how == "point fds 1 and 2 at /dev/null":
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
    return how


@python_app(executors=["scalpel"])
def print_both(x):
    import sys

    print(f"task {x} on stdout", flush=True)
    print(f"task {x} on stderr", file=sys.stderr, flush=True)
    return x


@pytest.mark.parametrize("node_manager", [True, False])
@pytest.mark.parametrize("how", ["close fds 1 and 2", "replace sys.stdout with a closed file",
                                 "close sys.stdout and sys.stderr", "point fds 1 and 2 at /dev/null"])
def test_a_task_that_breaks_its_standard_streams_leaves_its_worker_able_to_print(tmp_path, capfd, node_manager, how):
    executor = ScalpelExecutor(label="scalpel", topology="1x1:32MiB", profiles=False, node_manager=node_manager)
    dfk = parsl.load(Config(executors=[executor], run_dir=str(tmp_path)))
    try:
        assert break_standard_streams(how).result(timeout=GENEROUS) == how
        worker = executor.pool.worker_pids
        futures = [print_both(x) for x in range(6)]
        assert [future.result(timeout=GENEROUS) for future in futures] == list(range(6))
        assert executor.pool.worker_pids == worker  # the same worker ran them: it was not replaced
    finally:
        dfk.cleanup()  # the manager's stderr, forwarded, is all in once it returns
    out, err = capfd.readouterr()
    for x in range(6):
        assert f"task {x} on stdout" in out and f"task {x} on stderr" in err
