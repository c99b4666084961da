"""The network channel of provider mode: CurveZMQ keys, the driver's socket, a manager's link.

Provider mode (:mod:`scalpel_executor.runtime.driver.hub`) runs one node manager per node of each
provider block; the managers connect to the driver over TCP. This module holds everything about
that channel that is not the managers' bookkeeping (:mod:`scalpel_executor.runtime.driver.hub`)::

    driver                                               node manager (scalpel-manager --connect)
      ROUTER, bound to address:port (port from a range)    DEALER, connects to tcp://address:port
      CURVE server: server key pair                        CURVE client: client key pair + server's public key
      ZAP (Authenticator thread): accepts the client       ManagerLink: Connection-like (send_bytes,
        public key only, logs every refusal                  poll, recv_bytes) over one I/O thread

**Keys.** :func:`make_keys` writes two CurveZMQ key pairs (``server`` and ``client``) into a
directory it creates with mode 0700 (files 0600), as HighThroughputExecutor's ``encrypted=True``
does with its ``certificates`` directory; managers are told the directory (``--cert-dir``), never
a key, so no secret appears on a command line or in a submit script. The directory must be
readable by the managers, which on a cluster means a shared file system.

**Refusal.** A peer that does not present the client key fails the CURVE handshake inside
libzmq: the ROUTER never delivers a byte of it to Python, so nothing of it is decoded, let alone
unpickled. The ZAP handler logs each refusal (``scalpel_executor.runtime.wire.channel``, WARNING) with
the peer's address and the key it offered. Messages themselves are
:mod:`~scalpel_executor.runtime.wire.manager_messages` bytes (one ZeroMQ message each, in frames of at
most 16 MiB: below), and are never pickles.

**Frames.** libzmq allocates a frame's announced size when its header arrives, before CURVE has
authenticated the peer, so with no cap anyone who can reach the port could make the driver
allocate gigabytes (measured: +1,013 MiB for one 1 GiB frame, +4,043 MiB for two 2 GiB ones). Both
ends set ``zmq.MAXMSGSIZE`` to :data:`MAX_FRAME` (16 MiB) plus CURVE's overhead before they bind or
connect (set after ``bind`` it no longer reaches the listener); libzmq checks it per frame on
reading the frame's header and drops a connection that announces more. So a stranger costs the
driver at most one such frame per connection while its handshake lasts. Messages of any size still
travel: a message is sent as consecutive frames of at most 16 MiB (:func:`frames_of`, views of its
bytes, not copies) and joined on receipt (:func:`joined`), so no task's call or result meets a limit.

**Threads.** ZeroMQ sockets are used by one thread each. A manager's :class:`ManagerLink` owns its
DEALER on an I/O thread; other threads hand it outgoing frames through an inproc PUSH socket
(under a lock) and take incoming ones from a queue, so the manager's code sees the same
``send_bytes``/``poll``/``recv_bytes`` surface as its socket pair in local mode.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from pathlib import Path

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator
from zmq.utils import z85
from zmq.utils.monitor import recv_monitor_message

from scalpel_executor.runtime.wire.manager_messages import Ping, encode
from scalpel_executor.runtime.threads import name_this_thread

__all__ = ["ManagerLink", "DriverAuthenticator", "bind_router", "make_keys", "remove_keys", "load_keys",
           "LinkRefused", "frames_of", "joined", "MAX_FRAME"]

logger = logging.getLogger(__name__)

PORT_RANGE = (54000, 55000)  # the default ports the driver tries, as HTEX's worker_port_range
PING = encode(Ping())
MAX_FRAME = 16 << 20  # bytes: the largest frame either end sends (a longer message is split) or reads
FRAME_OVERHEAD = 64  # bytes CURVE adds to a frame on the wire (its MESSAGE command: 33)


def frames_of(data: bytes) -> list:
    """``data`` as consecutive frames of at most :data:`MAX_FRAME` bytes (views of it, not copies).

    >>> [len(frame) for frame in frames_of(bytes(MAX_FRAME + 5))] == [MAX_FRAME, 5]
    True
    """
    if len(data) <= MAX_FRAME:
        return [data]
    view = memoryview(data)
    return [view[start:start + MAX_FRAME] for start in range(0, len(data), MAX_FRAME)]


def joined(frames: list[bytes]) -> bytes:
    """The message whose frames ``frames_of`` made."""
    return frames[0] if len(frames) == 1 else b"".join(frames)


def make_keys(cert_dir: str | os.PathLike) -> Path:
    """Create ``cert_dir`` (mode 0700) holding fresh server and client CurveZMQ key pairs."""
    path = Path(cert_dir)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    for name in ("server", "client"):
        for suffix in (".key", ".key_secret"):
            (path / f"{name}{suffix}").unlink(missing_ok=True)
        public, secret = zmq.auth.create_certificates(path, name)
        os.chmod(public, 0o600)
        os.chmod(secret, 0o600)
    return path


def remove_keys(cert_dir: str | os.PathLike) -> None:
    """Delete the key files :func:`make_keys` wrote in ``cert_dir``, then the directory if that left it
    empty; files it did not write stay. Called at shutdown, once no manager needs them: a secret
    key that outlives its run is one more copy to steal from a shared file system."""
    path = Path(cert_dir)
    for name in ("server", "client"):
        for suffix in (".key", ".key_secret"):
            try:
                (path / f"{name}{suffix}").unlink(missing_ok=True)
            except OSError as error:
                logger.warning("could not remove the CurveZMQ key %s: %s", path / f"{name}{suffix}", error)
    try:
        path.rmdir()
    except OSError:
        pass  # not empty (someone else's files), or already gone


def load_keys(cert_dir: str | os.PathLike, side: str) -> tuple[bytes, bytes, bytes]:
    """``(public, secret, peer public)`` for ``side`` "server" (peer: the client) or "client"."""
    path = Path(cert_dir)
    peer = "client" if side == "server" else "server"
    try:
        public, secret = zmq.auth.load_certificate(path / f"{side}.key_secret")
        peer_public, _ = zmq.auth.load_certificate(path / f"{peer}.key")
    except (OSError, ValueError) as error:
        raise ValueError(f"cannot read the {side} keys from {str(path)!r} ({error}); the driver writes them "
                         f"into its run directory (<run_dir>/<label>/certificates), which managers must be "
                         f"able to read") from None
    if secret is None:
        raise ValueError(f"{path / f'{side}.key_secret'} holds no secret key")
    return public, secret, peer_public


class DriverAuthenticator(ThreadAuthenticator):
    """ZAP handler that accepts exactly one client public key and logs every refusal."""

    def __init__(self, context: zmq.Context, client_public: bytes):
        super().__init__(context, log=logging.getLogger(__name__ + ".zap"))
        self._client_public = client_public
        self._peer = "?"
        self.refused = 0

    async def handle_zap_message(self, msg):  # noqa: D102 - remembers the peer's address for the log
        if len(msg) >= 4:
            self._peer = msg[3].decode(errors="replace")
        return await super().handle_zap_message(msg)

    async def _authenticate_curve(self, domain, client_key):
        if z85.encode(client_key) == self._client_public:
            return True, b"OK"
        self.refused += 1
        logger.warning("refused a node manager connection from %s: it offered CURVE key %s, not this run's "
                       "client key (a manager from another run, or keys copied wrongly); nothing it sent "
                       "was read", self._peer, z85.encode(client_key).decode(errors="replace"))
        return False, b"unknown client key"


def bind_router(context: zmq.Context, cert_dir: Path, address: str,
                port_range: tuple[int, int]) -> tuple[zmq.Socket, DriverAuthenticator, int]:
    """The driver's ROUTER, CURVE server, bound to ``address`` on a port from ``port_range``.

    Returns the socket, its running authenticator and the port. A peer announcing a frame larger
    than :data:`MAX_FRAME` is disconnected before anything is allocated for it (authenticated or
    not); send messages to managers as ``[identity, *frames_of(data)]``. A send to a peer whose
    connection is gone raises (``ROUTER_MANDATORY``: EHOSTUNREACH), which is how the hub tells
    which manager a disconnection event was about (libzmq's ``ROUTER_NOTIFY``, which would say
    directly, is a draft API that release builds leave out).
    """
    public, secret, client_public = load_keys(cert_dir, "server")
    authenticator = DriverAuthenticator(context, client_public)
    authenticator.start()
    socket = context.socket(zmq.ROUTER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.setsockopt(zmq.ROUTER_MANDATORY, 1)  # a send to a gone peer raises rather than vanishing
    socket.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME + FRAME_OVERHEAD)  # before bind: the listener copies it there
    socket.curve_secretkey = secret
    socket.curve_publickey = public
    socket.curve_server = True
    low, high = port_range
    try:
        port = socket.bind_to_random_port(f"tcp://{address}", min_port=low, max_port=high, max_tries=high - low)
    except zmq.ZMQError as error:
        socket.close()
        authenticator.stop()
        raise RuntimeError(f"cannot bind the manager channel to {address} on a port in {low}-{high - 1} "
                           f"({error}); give address= an address of this host, or another port_range") from None
    return socket, authenticator, port


class LinkRefused(ConnectionError):
    """The driver refused this manager's CURVE key, or the handshake failed."""


class ManagerLink:
    """A manager's connection to the driver, with the surface of a ``multiprocessing`` Connection.

    ``recv_bytes`` raises EOFError once the driver is gone: its TCP connection dropped after the
    handshake, it was silent (no message, no ``Ping``) for ``driver_threshold`` seconds, or it
    refused our key (then ``refused`` says so). ``Ping`` frames are consumed here. Messages of
    any size go both ways, as frames of at most :data:`MAX_FRAME` bytes.
    """

    _EOF = object()

    def __init__(self, url: str, cert_dir: str | os.PathLike, *, driver_threshold: float,
                 identity: bytes | None = None):
        public, secret, server_public = load_keys(cert_dir, "client")
        self._context = zmq.Context()
        self._dealer = self._context.socket(zmq.DEALER)
        if identity:  # the manager's pool id: the driver's ROUTER knows it by that name
            self._dealer.setsockopt(zmq.ROUTING_ID, identity)
        self._dealer.setsockopt(zmq.LINGER, 2000)  # a final Result/Failed may still be on its way out
        self._dealer.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME + FRAME_OVERHEAD)  # before connect, as the driver's
        self._dealer.curve_secretkey = secret
        self._dealer.curve_publickey = public
        self._dealer.curve_serverkey = server_public
        self._monitor = self._dealer.get_monitor_socket(
            zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_FAILED_AUTH
            | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)
        self._dealer.connect(url)
        self._outbox_url = f"inproc://scalpel-link-{id(self)}"
        self._outbox_in = self._context.socket(zmq.PULL)
        self._outbox_in.bind(self._outbox_url)
        self._outbox = self._context.socket(zmq.PUSH)
        self._outbox.connect(self._outbox_url)
        self._outbox_lock = threading.Lock()
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._pending: object | bytes | None = None
        self.driver_threshold = driver_threshold
        self.url = url
        self.connected = False
        self.refused: str | None = None
        self.closed = False
        self._thread = threading.Thread(target=self._run, name="scalpel-manager-link", daemon=True)
        self._thread.start()

    # -- the Connection surface (any thread sends; one thread receives) ---------------------

    def send_bytes(self, data: bytes) -> None:
        with self._outbox_lock:
            if self.closed or not data:
                raise OSError("the link to the driver is closed" if self.closed else "an empty message")
            self._outbox.send(data, copy=False)

    def poll(self, timeout: float | None = 0.0) -> bool:
        if self._pending is not None:
            return True
        try:
            self._pending = self._inbox.get(timeout=timeout) if timeout != 0 else self._inbox.get_nowait()
        except queue.Empty:
            return False
        return True

    def recv_bytes(self) -> bytes:
        if self._pending is None:
            self.poll(None)
        item, self._pending = self._pending, None
        if item is self._EOF:
            self._pending = self._EOF  # EOF stays EOF
            raise EOFError(self.refused or "the driver is gone")
        return item

    def close(self) -> None:
        with self._outbox_lock:
            if not self.closed:
                self._outbox.send(b"")  # wakes the I/O thread, which flushes, closes and exits
        self._thread.join(5.0)

    # -- the I/O thread ---------------------------------------------------------------------

    def _run(self) -> None:
        name_this_thread("link")
        poller = zmq.Poller()
        for socket in (self._dealer, self._outbox_in, self._monitor):
            poller.register(socket, zmq.POLLIN)
        last_heard = time.monotonic()
        try:
            while True:
                silence = time.monotonic() - last_heard
                if self.connected and silence > self.driver_threshold:
                    logger.warning("the driver at %s was silent for %.0f s; ending", self.url, silence)
                    break
                events = dict(poller.poll(1000))
                if self._monitor in events:
                    event = recv_monitor_message(self._monitor)["event"]
                    if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                        self.connected, last_heard = True, time.monotonic()
                    elif event == zmq.EVENT_DISCONNECTED and self.connected:
                        logger.warning("the connection to the driver at %s dropped; ending", self.url)
                        break
                    elif event in (zmq.EVENT_HANDSHAKE_FAILED_AUTH, zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL,
                                   zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL):
                        self.refused = (f"the driver at {self.url} refused this manager's CURVE key (keys of "
                                        f"another run, or --cert-dir names the wrong directory)")
                        break
                if self._dealer in events:
                    while True:
                        try:
                            data = joined(self._dealer.recv_multipart(zmq.NOBLOCK))
                        except zmq.Again:
                            break
                        last_heard = time.monotonic()
                        if data != PING:
                            self._inbox.put(data)
                if self._outbox_in in events:
                    closing = False
                    while True:
                        try:
                            data = self._outbox_in.recv(zmq.NOBLOCK)
                        except zmq.Again:
                            break
                        if not data:
                            closing = True
                            break
                        frames = frames_of(data)
                        self._dealer.send_multipart(frames, copy=len(frames) == 1)  # large: views, not copies
                    if closing:
                        break
        except zmq.ZMQError as error:
            logger.error("the link to the driver failed: %s", error)
        finally:
            with self._outbox_lock:  # senders now see a closed link, not a closed socket
                self.closed = True
                self._inbox.put(self._EOF)
                self._dealer.disable_monitor()
                for socket in (self._monitor, self._outbox_in, self._outbox, self._dealer):
                    socket.close()
            self._context.term()
