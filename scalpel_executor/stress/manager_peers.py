"""The peers a manager fault case plays: a fake manager holding the run's keys, a stranger without
them, a site that breaks a manager's workers, a manager that drains on a signal file.

Used by :mod:`scalpel_executor.stress.manager_faults`; each plays its part through the same
channel, messages and processes a real one would, so what the hub sees is what it would see from a
broken node, a buggy or hostile key holder, or a port scanner.
"""

from __future__ import annotations

import os
import queue
import random
import socket
import threading
import time

import psutil
import zmq

from scalpel_executor import __version__
from scalpel_executor.runtime.wire.channel import PING, load_keys
from scalpel_executor.runtime.wire.manager_messages import Configure, Heartbeat, Register, Started, Submit, decode, encode

__all__ = ["DRAINS_ON_FILE", "SITECUSTOMIZE", "FakeManager", "malformed_message", "stranger"]

STRANGER_FRAME = 128 << 20  # bytes a stranger announces

# On a worker's PYTHONPATH: it dies at start once its manager's break file exists (a broken node).
SITECUSTOMIZE = """\
import os
if os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), "break-%d" % os.getppid(), "forever")):
    os._exit(7)
"""
# A manager launched by hand that drains (sends Drain, as at its drain_period) once a file appears.
DRAINS_ON_FILE = """\
import os, sys, threading, time
import scalpel_executor.runtime.node.manager as manager
trigger, run = sys.argv.pop(1), manager.NodeManager.run
def run_until_the_file(self):
    def watch():
        while not os.path.exists(trigger):
            time.sleep(0.02)
        self._drain_at = 0.0
    threading.Thread(target=watch, daemon=True).start()
    return run(self)
manager.NodeManager.run = run_until_the_file
sys.argv[0] = "scalpel-manager"
sys.exit(manager.main(sys.argv[1:]))
"""



class FakeManager(threading.Thread):
    """A node manager played by the harness: a DEALER with the run's client keys that registers,
    optionally reports Started, heartbeats, keeps what it is dealt and runs none of it."""

    def __init__(self, hub, block_id: str, start: bool, heartbeat_period: float):
        super().__init__(name=f"fake-manager-{block_id}", daemon=True)
        self.url, self.cert_dir, self.block_id, self.start_it = hub.url, hub.cert_dir, block_id, start
        self.heartbeat_period = heartbeat_period
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        self.submits: list[int] = []
        self.configured = threading.Event()
        self.stopping = threading.Event()

    def run(self) -> None:
        context = zmq.Context()
        dealer = context.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.curve_publickey, dealer.curve_secretkey, dealer.curve_serverkey = load_keys(self.cert_dir, "client")
        dealer.connect(self.url)
        dealer.send(encode(Register(self.block_id, f"fake-{self.block_id}", __version__, os.getpid(), [0])))
        next_beat = 0.0
        while not self.stopping.is_set():
            if dealer.poll(20):
                data = b"".join(dealer.recv_multipart())
                message = decode(data) if data != PING else None
                if isinstance(message, Configure):
                    if self.start_it:
                        dealer.send(encode(Started(os.getpid(), [], [[0]], {}, 2.0 * 2**30, 0)))
                    self.configured.set()
                elif isinstance(message, Submit):
                    self.submits.append(message.task_id)
            while not self.outbox.empty():
                dealer.send(self.outbox.get())
            if self.configured.is_set() and time.monotonic() >= next_beat:
                next_beat = time.monotonic() + self.heartbeat_period
                dealer.send(encode(Heartbeat([], 0, [], [])))
        dealer.close()
        context.term()


def malformed_message(rng: random.Random) -> bytes:
    """One message an authenticated peer may send that no manager of this version sends."""
    header = rng.choice([b'["log",' + b"[" * 100_000 + b"]" * 100_000 + b',"scalpel_executor","x"]',
                         b'["started",1,[],[5],{},0,0]', b'["result","seven"]', b"\xff\xfe not json"])
    return len(header).to_bytes(4, "big") + header + rng.randbytes(rng.randrange(0, 64))


def stranger(port: int, oversized: bool, rng: random.Random, timeout: float) -> int:
    """A peer without keys: garbage, or a ZMTP greeting and a frame announcing STRANGER_FRAME bytes.
    Returns how much the driver's memory grew meanwhile."""
    before = psutil.Process().memory_info().rss
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as peer:
        try:
            if oversized:
                peer.sendall(b"\xff" + bytes(8) + b"\x7f\x03\x00" + b"CURVE" + bytes(15) + bytes(32))
                peer.sendall(b"\x06" + STRANGER_FRAME.to_bytes(8, "big"))
                for _ in range(8):
                    peer.sendall(bytes(1 << 20))
            else:
                peer.sendall(rng.randbytes(rng.randrange(1, 4096)))
        except OSError:
            pass  # the driver closed the connection: what it should do
        grown = psutil.Process().memory_info().rss - before
    return max(0, grown)
