"""A shutdown at any point of the node manager's start is quiet and complete: 50 executors started
and shut down after delays spread over the start (before the manager runs, while it imports, while
its workers start, once they are warm), each with a task sent meanwhile, in one process as a
script that fails early would: no thread's exception reaches stderr, every task ends, and nothing
is left running. (A shutdown before the manager's ``Started`` once showed
``Exception in thread scalpel-manager-start: ... TypeError: 'NoneType' object is not iterable``.)"""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import sys, time
    import psutil
    from scalpel_executor import ScalpelExecutor

    CYCLES = 50
    ended = 0
    for cycle in range(CYCLES):
        executor = ScalpelExecutor(label=f"race{cycle}", profiles=False)
        executor.start()
        future = executor.submit(len, {}, "abc")
        time.sleep(cycle / CYCLES * 1.5)  # from at once to after the workers are warm
        executor.shutdown()
        future.exception(timeout=60)  # ended either way: a result, or ExecutorShutdown
        ended += future.done()
    left = [p for p in psutil.Process().children(recursive=True) if p.is_running()]
    print(ended, len(left))
''')


def test_fifty_shutdowns_during_start_are_quiet_and_leave_nothing_running(tmp_path):
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["50", "0"]
    assert "Exception in thread" not in run.stderr and "Traceback" not in run.stderr, run.stderr[-3000:]
