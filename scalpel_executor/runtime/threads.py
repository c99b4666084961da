"""Thread names the operating system shows, so a benchmark or ``top -H`` can tell the executor's threads apart.

A Python thread's ``name`` stays inside the interpreter; :func:`name_this_thread` also sets the
calling thread's name in the kernel (``/proc/<pid>/task/<tid>/comm``, what ``top -H`` and ``ps -L``
print) through setproctitle, a dependency of Parsl's, where it is installed. The kernel keeps 15
bytes of a name, so each of :data:`NAMES` fits in 15: they are what a reader of ``comm`` looks for.
"""

from __future__ import annotations

try:
    from setproctitle import setthreadtitle
except ImportError:  # setproctitle is Parsl's dependency, not ours: without it the kernel keeps "python"
    setthreadtitle = None

__all__ = ["NAMES", "name_this_thread"]

#: The executor's threads, each as the kernel names it (at most 15 bytes).
NAMES = {
    "dispatch": "scalpel-disp",  # a pool's dispatch thread: the Scheduler and the workers' sockets
    "complete": "scalpel-done",  # an in-process pool's completion thread: on_complete (a node manager's has none)
    "send": "scalpel-send",  # a node manager's Outbox sender: its Results to the driver
    "submit": "scalpel-submit",  # the driver's Outbox sender: Submits to its node manager
    "receive": "scalpel-recv",  # a node manager's main thread: the driver's messages
    "watch": "scalpel-watch",  # a node manager's heartbeat and parent watch
    "start": "scalpel-start",  # a node manager's pool start
    "link": "scalpel-link",  # a node manager's link to its driver over the network (provider mode)
    "reader": "scalpel-reader",  # the driver's reader of its node manager's messages
    "pin": "scalpel-pin",  # the driver's watch of its threads' CPU time (pin_driver="busy")
}


def name_this_thread(role: str) -> None:
    """Name the calling thread ``NAMES[role]`` in the kernel (where setproctitle is installed)."""
    name = NAMES[role]
    if setthreadtitle is not None:
        try:
            setthreadtitle(name)
        except Exception:  # noqa: BLE001 - a name is never worth failing a thread for
            pass
