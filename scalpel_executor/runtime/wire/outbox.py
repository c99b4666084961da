"""Messages for one peer, written in order, many to a frame when they come faster than they are written.

Both ends of the node manager's channel send through an :class:`Outbox`: the driver its Submits
(:class:`~scalpel_executor.runtime.driver.manager_process.LocalManager`), the node manager its Results and
Faileds (:class:`~scalpel_executor.runtime.node.manager.NodeManager`)::

    put(message) (any thread) ──> queue ──> sender thread ("scalpel-send"): everything queued, as one
                    │                       frame (manager_messages.encode_frame), one write
                    └─ idle (nothing queued, no put's frame for LINGER): written at once by the caller
    send(message) (any thread) ──> everything queued, then the message, as one frame, written before
                                   send returns

A lone message goes at once, written by the thread that puts it (no hand-off: on a loaded machine a
waking thread can wait milliseconds for a core), unless the outbox hands off (``hand_off=True``, the
driver's while Parsl does not log each task: there the writer was Parsl's launch thread, which let go
of the interpreter at each write and then waited to take it back;
``runtime.driver.manager_process.handing_off``). Under a burst the sender lingers: a message put
less than :data:`LINGER` seconds after the previous put's frame is queued, and the sender writes
the next frame that long after it, with everything that came meanwhile. A burst so costs a frame per ``LINGER`` instead of a write,
a read and a JSON document per message, and a lone task's round trip nothing: its messages find
the sender's last frame older than that. (Without lingering the sender found its peer's messages
one at a time: 2,000 no-op tasks went in 1,970 frames; the driver's thread that submits them lets
go of the interpreter at every log line Parsl writes.)

``holding()`` is for a thread that knows more is coming at once: while it holds, ``put`` only
queues, and leaving it writes what is still queued as one frame. A node manager's dispatch thread
holds for each pass: the pass's Results and its Began go as one frame, where each Result put alone
was a frame of its own (a burst on two workers cost the driver two frames, two reads and two JSON
documents per task).

``send`` is for what must be on its way before the caller goes on: a node manager's ``Began``
(its tasks reach their workers only after it is written, so a manager killed at any moment has
told its driver of every task that may have run; the results queued before it go in the same
frame, ahead of it), and the rare control messages (``Configure``, ``Shutdown``, ``Started``,
``Heartbeat``, ``Log``). Frames are written under one lock and each takes the whole queue, so the
peer reads the messages in the order ``put`` and ``send`` were called.

A write that fails (the peer is gone) is dropped: the reader on this side finds the loss.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from scalpel_executor.runtime.wire.manager_messages import Message, encode, encode_frame
from scalpel_executor.runtime.threads import name_this_thread

__all__ = ["Outbox"]

logger = logging.getLogger(__name__)

#: Seconds the sender waits after its previous frame, when messages come sooner, to take more in the
#: next. A lone task's messages come further apart than this (its round trip is over 1 ms), and no
#: message waits longer: a node manager's Began, written at once, takes the queued ones with it.
LINGER = 0.001


class Outbox:
    """Messages to one peer through ``write`` (bytes -> None; OSError or ValueError: the peer is gone).

    Parameters
    ----------
    write : callable(bytes)
        Writes one frame (``Connection.send_bytes``, a link's ``send_bytes``).
    name : str
        The sender thread's Python name.
    role : str
        Its name in the kernel, one of :data:`~scalpel_executor.runtime.threads.NAMES`.
    linger : float
        Seconds the sender waits after a frame, under a burst (:data:`LINGER`); 0: it writes whatever
        accumulated as soon as it runs.
    hand_off : bool
        ``put`` never writes on the caller's thread, even when the outbox is idle: the sender does.
        For a caller that should not let go of the interpreter for a syscall (the driver's: Parsl's
        launch thread, which then waited to take the interpreter back once per task); a lone message
        costs a thread wake-up instead.
    """

    def __init__(self, write: Callable[[bytes], None], name: str = "scalpel-send", role: str = "send",
                 linger: float = LINGER, hand_off: bool = False):
        self._write = write
        self._role = role
        self._linger = linger
        self._hand_off = hand_off
        self._queue: deque[Message] = deque()
        self._ready = threading.Condition(threading.Lock())  # guards _queue and _closed
        # Held from taking the queue to the end of its write; re-entrant: a message that cannot be encoded
        # is logged while it is held, and a node manager sends its log records (Log) through here too.
        self._writing = threading.RLock()
        self._closed = False
        self._held = 0  # holding() calls under way: put only queues
        self._written = -linger  # when the latest frame of put messages went (send's do not count)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def thread(self) -> threading.Thread:
        """The sender thread."""
        return self._thread

    def put(self, message: Message) -> None:
        """Write ``message`` now if the outbox is idle, else queue it: the sender writes it soon, after
        everything queued before it. Inside :meth:`holding` it is only queued (the holder writes it
        when it lets go), and with ``hand_off`` always queued for the sender: ``put`` then never
        writes on the caller's thread."""
        with self._ready:
            self._queue.append(message)
            if self._held:
                return  # the holder writes it when it lets go, or a send() takes it first
            idle = not self._hand_off and len(self._queue) == 1 and time.monotonic() - self._written >= self._linger
            if not idle:
                if len(self._queue) == 1:  # otherwise the sender was told and has not taken the queue yet
                    self._ready.notify()
                return
        with self._writing:
            with self._ready:
                batch = self._take()
                self._written = time.monotonic()
            self._send(batch)

    @contextmanager
    def holding(self) -> Iterator[None]:
        """While inside, ``put`` queues without writing; on leaving, what is still queued is written
        (on the caller's thread) as one frame. ``send`` inside writes the queue at once, as ever."""
        with self._ready:
            self._held += 1
        try:
            yield
        finally:
            with self._ready:
                self._held -= 1
                due = not self._held and bool(self._queue)
            if due:
                self.flush()

    def send(self, message: Message) -> None:
        """Write everything queued, then ``message``, before returning (on the caller's thread)."""
        with self._writing:
            with self._ready:
                self._queue.append(message)
                batch = self._take()
            self._send(batch)

    def flush(self) -> None:
        """Write everything queued before returning (on the caller's thread)."""
        with self._writing:
            with self._ready:
                batch = self._take()
            self._send(batch)

    def send_encoded(self, data: bytes) -> None:
        """Write everything queued, then ``data`` (one encoded message or frame), before returning."""
        with self._writing:
            with self._ready:
                batch = self._take()
            self._send(batch)
            try:
                self._write(data)
            except (OSError, ValueError):
                pass

    def close(self) -> None:
        """Stop the sender once it has written what is queued (a write to a closed peer is dropped)."""
        with self._ready:
            self._closed = True
            self._ready.notify()

    def _take(self) -> list[Message]:
        batch = list(self._queue)
        self._queue.clear()
        return batch

    def _send(self, batch: list[Message]) -> None:
        if not batch:
            return
        try:
            data = encode_frame(batch)
        except Exception:  # noqa: BLE001 - one message that cannot be encoded costs itself, not its frame
            batch = [message for message in batch if _encodes(message)]
            if not batch:
                return
            data = encode_frame(batch)
        try:
            self._write(data)
        except (OSError, ValueError):  # the peer is gone (closed, reset): its reader finds the loss
            pass

    def _run(self) -> None:
        name_this_thread(self._role)
        while True:
            with self._ready:
                while not self._queue and not self._closed:
                    self._ready.wait()
                if not self._queue:
                    return
                if not self._closed and (linger := self._written + self._linger - time.monotonic()) > 0:
                    self._ready.wait(linger)  # a burst: more comes meanwhile (close() ends the wait)
            with self._writing:
                with self._ready:
                    batch = self._take()
                    self._written = time.monotonic()
                self._send(batch)


def _encodes(message: Message) -> bool:
    try:
        encode(message)
        return True
    except Exception:  # noqa: BLE001 - as the sender found it: logged, and the message dropped
        logger.exception("could not encode a %s message; it was not sent", type(message).__name__)
        return False
