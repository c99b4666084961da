"""One local node manager process, seen from the driver: its connection, and its error output.

:class:`~scalpel_executor.runtime.driver.manager_client.ManagerClient` starts the process and speaks the
protocol with it; a :class:`LocalManager` is what it keeps of each one it started: how to send to
it, kill it and say how it ended, and the thread that copies its (and its workers') error output to
the driver's, keeping the last lines for a start failure's message. What is sent to it goes through
an :class:`~scalpel_executor.runtime.wire.outbox.Outbox`: Submits are queued (``put``) and written by
its sender thread, many to a frame under a burst; ``send`` writes at once, after them.
"""

from __future__ import annotations

import logging
import math
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import weakref
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import IO

from scalpel_executor.runtime.driver.ledger import Ledger
from scalpel_executor.runtime.wire.manager_messages import Message
from scalpel_executor.runtime.wire.outbox import Outbox

__all__ = ["LocalManager", "STDERR_CHUNK", "STDERR_DRAIN", "STDERR_TAIL", "forward_stderr"]

logger = logging.getLogger("scalpel_executor.runtime.driver.manager_client")  # said as the client's

STDERR_TAIL = 20  # lines of the manager's error output kept for a start failure's message
STDERR_CHUNK = 64 * 1024  # bytes of the manager's error output read, forwarded and kept of a line at once
READ_CHUNK = 1 << 20  # bytes of the manager's frames the reader takes in at most per read
#: Seconds shutdown waits, once the manager has exited, for the last of its error output to be copied.
#: The pipe ends only when every process holding its write end has closed it, and a daemon a task
#: started (double fork, its own session) outlives the workers' process groups and may hold it for
#: hours: the manager's own last lines are already in the pipe then, and copying them takes
#: milliseconds (dfk.cleanup() waited the whole 10 s shutdown timeout for such a daemon).
STDERR_DRAIN = 0.5
#: The manager pipes shutdown stopped waiting for: their reader threads read on, to the pipe's end,
#: but forward nothing more. A reader blocked in a read cannot be stopped from outside (closing a
#: buffered file another thread reads is unsafe in CPython, and closing the descriptor does not end
#: the read on Linux), so it is left to end by itself, a daemon thread that closes the pipe when the
#: last holder does. Forwarding nothing keeps output that is no longer the executor's off the
#: driver's stderr, and keeps the thread from holding sys.stderr's lock while the interpreter exits
#: (CPython aborts when a daemon thread holds it then). Weak, so a finished pipe leaves the set.
_DRAIN_ONLY: weakref.WeakSet = weakref.WeakSet()


@dataclass(eq=False)
class LocalManager:
    """One manager process and this side's connection to it."""

    process: subprocess.Popen
    connection: Connection
    ledger: Ledger  # what it holds: the client's one ledger, handed on to each replacement
    stderr_tail: deque = field(default_factory=lambda: deque(maxlen=STDERR_TAIL))
    stderr_thread: threading.Thread | None = None
    send_lock: threading.Lock = field(default_factory=threading.Lock)
    started: bool = False
    started_by: float = 0.0  # monotonic deadline for Started
    initialising: bool = False  # its worker_init may still run: Started's deadline counts from its end
    fatal: str | None = None  # what its Fatal message said
    outbox: Outbox = field(init=False)
    _poller: select.poll | None = field(default=None, init=False, repr=False)
    _unread: bytearray = field(default_factory=bytearray, init=False, repr=False)  # a frame's first part

    def __post_init__(self) -> None:
        # No lingering: a burst's first Submit would reach the manager's batcher alone, ahead of the
        # rest, and start before tasks the scheduler would have put first (a critical path's head).
        # Handed off (handing_off()) unless Parsl logs every task.
        self.outbox = Outbox(self._write, name=f"scalpel-submit-{self.process.pid}", role="submit", linger=0.0,
                             hand_off=handing_off())

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def name(self) -> str:
        return f"pid {self.process.pid}"

    def put(self, message: Message) -> None:
        """Queue a message (a Submit): written soon, in order, with what else is queued by then."""
        self.outbox.put(message)

    def send(self, message: Message) -> None:
        """Write what is queued, then ``message``, now; nothing if the manager is gone (the reader finds it lost)."""
        self.outbox.send(message)

    def send_encoded(self, data: bytes) -> None:
        """Write what is queued, then ``data`` (an encoded message: its Configure), now."""
        self.outbox.send_encoded(data)

    def readable(self, timeout: float) -> bool:
        """Whether a frame, or the connection's end, can be read within ``timeout`` seconds (the
        reader's wait): Connection.poll's answer from one ``select.poll`` kept for the connection,
        where Connection.poll builds a selector per call (0.9 against 9 µs, once per frame read). A
        closed connection is readable: its read raises, and the reader finds the manager lost."""
        if self.connection.closed:
            return True
        if self._poller is None:
            self._poller = select.poll()
            self._poller.register(self.connection.fileno(), select.POLLIN)
        return bool(self._poller.poll(min(math.ceil(max(0.0, timeout) * 1000), 2**31 - 1)))  # poll's int of ms

    def read_frames(self) -> list[bytes]:
        """Every whole frame the manager has sent by now (at least one; after :meth:`readable`), as
        ``Connection.send_bytes`` framed them: one read of what the socket holds, where
        ``Connection.recv_bytes`` made two reads per frame (its length, then its bytes). Each read
        lets go of the interpreter, and on a driver whose threads all want it (Parsl writes its log
        file at every step of a task) each is a hand-over. A frame's first part waits for the rest.
        Raises EOFError when the manager closed its end, OSError when this side is closed."""
        while True:
            frames = _whole_frames(self._unread)
            if frames:
                return frames
            chunk = os.read(self.connection.fileno(), READ_CHUNK)
            if not chunk:
                raise EOFError("the node manager closed its end of the connection")
            self._unread += chunk

    def _write(self, data: bytes) -> None:
        with self.send_lock:  # never a write to a descriptor kill() closed, and maybe reused
            self.connection.send_bytes(data)

    def kill(self) -> int:
        """SIGKILL it (if it still runs), reap it, close our end; its exit status."""
        if self.process.poll() is None:
            try:  # its process group (its own, OWN_GROUP): a worker_init's commands end with it
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                try:
                    os.kill(self.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        code = self.process.wait()
        with self.send_lock:
            self.connection.close()
        self.outbox.close()
        return code

    def exit_cause(self, code: int) -> str:
        if code < 0:
            try:
                return f"was killed by signal {signal.Signals(-code).name}"
            except ValueError:
                return f"was killed by signal {-code}"
        return f"exited with code {code}"

    def tail(self) -> str:
        if self.stderr_thread is not None:
            self.stderr_thread.join(1.0)  # its last lines come after the exit
        lines = "".join(self.stderr_tail).strip()
        return f"; its last error output:\n{lines}" if lines else "; it wrote no error output"

    def start_forwarding(self) -> None:
        """Copy its error output to ours from now on, on a thread of its own (:func:`forward_stderr`)."""
        self.stderr_thread = threading.Thread(target=forward_stderr, args=(self.process.stderr, self.stderr_tail),
                                              name=f"scalpel-manager-stderr-{self.process.pid}", daemon=True)
        self.stderr_thread.start()

    def stop_forwarding(self) -> None:
        """Once it has exited and been reaped: wait :data:`STDERR_DRAIN` for its last error output,
        then forward nothing more from a pipe that a process its tasks started still holds."""
        if self.stderr_thread is None or self.process.poll() is None:
            return  # not reaped yet (shutdown called on the reader thread, which reaps it): its output still flows
        self.stderr_thread.join(STDERR_DRAIN)  # it ends once every process holding the pipe has closed it
        if self.stderr_thread.is_alive():
            _DRAIN_ONLY.add(self.process.stderr)
            logger.info("node manager pid %d has exited but a process its tasks started still holds its error "
                        "output; that process's output is no longer forwarded", self.pid)


def forward_stderr(stream: IO[bytes], tail: deque) -> None:
    """Copy the manager's (and its workers') error output to ours as it comes, STDERR_CHUNK bytes
    at most at a time, keeping the start of each of the last lines (a task that prints a 300 MB
    line costs this process no more than a chunk)."""
    out = getattr(sys.stderr, "buffer", None)
    continuing = False  # the chunk before ended inside a line
    with stream:
        while chunk := stream.readline(STDERR_CHUNK):
            if stream in _DRAIN_ONLY:  # read on, so the pipe's last holder never blocks on a full pipe
                continue
            if not continuing:
                text = chunk.decode(errors="replace")
                tail.append(text if chunk.endswith(b"\n") else text + " [...]\n")
            continuing = not chunk.endswith(b"\n")
            try:
                if out is not None:
                    out.write(chunk)
                    out.flush()
                else:
                    sys.stderr.write(chunk.decode(errors="replace"))
            except (OSError, ValueError):  # our stderr is closed: keep the tail all the same
                pass


def handing_off() -> bool:
    """Whether the driver's Submits go to the outbox's sender thread (True) or are written by the
    thread that submits them, Parsl's launch thread, when nothing is queued (False).

    Handed off while Parsl does not log each task: the launch thread then never lets go of the
    interpreter for a write and waits to take it back (a write per task did; the driver's CPU per
    no-op task is 21% lower handed off, 4 interleaved pairs). Written by the launch thread while
    Parsl logs each task's state (its log file, ``initialize_logging=True``, Parsl's default): each
    of its 17 or so writes a task already lets go of the interpreter, and a sender woken for every
    Submit is one more thread waiting for it at each: 19-21 voluntary context switches a task
    against 14-15 written directly, which spends 13% less CPU (docs/results/throughput.md). Asked
    when a node manager is started, once the DataFlowKernel has set up its logging."""
    dfk_logger = logging.getLogger("parsl.dataflow.dflow")  # a handler somewhere: its lines are written
    return not (dfk_logger.isEnabledFor(logging.INFO) and dfk_logger.hasHandlers())


def _whole_frames(unread: bytearray) -> list[bytes]:
    """The whole frames at the start of ``unread``, taken out of it (``Connection.send_bytes``'s
    framing: a 4-byte big-endian length, or -1 and an 8-byte length for 2 GiB or more).

    >>> unread = bytearray(struct.pack("!i", 2) + b"ab" + struct.pack("!i", 3) + b"c")
    >>> _whole_frames(unread), bytes(unread)
    ([b'ab'], b'\\x00\\x00\\x00\\x03c')
    """
    frames, at, end = [], 0, len(unread)
    with memoryview(unread) as view:  # one copy a frame (a bytearray slice, then bytes of it, was two)
        while end - at >= 4:
            size, header = struct.unpack_from("!i", view, at)[0], 4
            if size == -1:
                if end - at < 12:
                    break
                size, header = struct.unpack_from("!Q", view, at + 4)[0], 12
            if end - at - header < size:
                break
            frames.append(view[at + header:at + header + size].tobytes())
            at += header + size
    del unread[:at]  # the view is released: the bytearray may shrink
    return frames
