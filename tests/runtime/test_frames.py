"""Frames: many node manager messages in one write, each row checked as a lone message, in order.

Both ends batch (runtime.wire.outbox): the driver its Submits, the manager its Results, and a Began still
reaches the driver's socket before its tasks reach their workers, so a lost manager's tasks that no
Began named go to the replacement unspent however the messages were framed.
"""

import json
import logging
import math
import os
import signal
import socket
import struct
import subprocess
import threading
import time
from multiprocessing.connection import Connection

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core.batching import Batching
from scalpel_executor.core.tasks import Task
from scalpel_executor.host.sysfs import resolve_topology
from scalpel_executor.runtime.contract import Job, Outcome
from scalpel_executor.runtime.errors import NodeManagerLost
from scalpel_executor.runtime.node.manager import NodeManager
from scalpel_executor.runtime.driver.ledger import Ledger
from scalpel_executor.runtime.driver.manager_client import ManagerClient
from scalpel_executor.runtime.driver.manager_process import LocalManager, _whole_frames, handing_off
from scalpel_executor.runtime.wire.manager_messages import (Began, Failed, FrameError, Heartbeat, Log, Result, Shutdown,
                                                       Submit, decode, decode_frame, encode, encode_frame,
                                                       submit_row, task_of)
from scalpel_executor.runtime.options import PoolOptions
from scalpel_executor.runtime.wire.outbox import Outbox
from scalpel_executor.core.interference import Terms
from tests.runtime.helpers import GENEROUS, Outcomes, call, run_once_marked, wait_until

ROWS = [
    Submit(1, footprint=2.5e7, runtime=0.25, key="mod.app(~64)", interference=Terms(0.25, -0.5), walltime=60.0,
           buffer=b"\x00first call"),
    Submit(2, buffer=b""),
    Submit(3, footprint=1e6, buffer=b"\xff" * 70_000),
    Began([1, 2]),
    Result(1, True, {"wall": 0.1, "cpus": [0, 1], "footprint": None}, 1, 0, 1, 123.5, b"result"),
    Failed(2, "WorkerDied", "task 2 was lost", {"pid": 42, "cpus": [0], "cause": "signal SIGKILL"}, 0, 0, 0, 2.0),
    Heartbeat([42, 44], 1, [0.25], [3]),
    Log(30, "scalpel_executor.runtime.node.pool", "worker pid 42 died"),
    Shutdown(),
]


def header_and_blob(data):
    length = int.from_bytes(data[:4], "big")
    return json.loads(data[4:4 + length]), data[4 + length:]


def framed(rows, blob=b""):
    header = json.dumps(["frame", *rows]).encode()
    return len(header).to_bytes(4, "big") + header + blob


def submit_with(position, value):
    """A submit row as the protocol declares it today, with field ``position`` replaced: a malformed
    row whose other fields stay right however many the protocol adds."""
    row = header_and_blob(encode_frame([Began([1]), Submit(5, buffer=b"")]))[0][2]
    return [*row[:position], value, *row[position + 1:]]


# -- the encoding -------------------------------------------------------------------------------


def test_a_frame_of_rows_round_trips_in_order_with_every_rows_bytes():
    assert decode_frame(encode_frame(ROWS)) == ROWS


def test_a_lone_message_is_its_own_encoding_and_decode_frame_reads_it():
    assert encode_frame([ROWS[0]]) == encode(ROWS[0])
    assert decode_frame(encode(ROWS[4])) == [ROWS[4]]


def test_a_submit_row_is_the_tasks_submit_and_rebuilds_the_task():
    task = Task(7, 1e6, key="app(~64)", tail=2.5, interference=Terms(0.1, 0.2, 0.3),
                payload=Job(b"call", walltime=60.0, measure=True))
    rebuilt = task_of(decode_frame(encode_frame([submit_row(task), submit_row(task)]))[1])
    assert (rebuilt.id, rebuilt.footprint, rebuilt.key, rebuilt.tail, rebuilt.interference) == \
        (7, 1e6, "app(~64)", 2.5, Terms(0.1, 0.2, 0.3))
    assert (rebuilt.payload.buffer, rebuilt.payload.walltime, rebuilt.payload.measure) == (b"call", 60.0, True)


def test_a_frame_is_one_json_header_with_each_rows_byte_count_and_the_bytes_after_it():
    header, blob = header_and_blob(encode_frame(ROWS[:2]))
    assert header[0] == "frame" and [row[0] for row in header[1:]] == ["submit", "submit"]
    assert [row[-1] for row in header[1:]] == [len(b"\x00first call"), 0] and blob == b"\x00first call"


@pytest.mark.parametrize("rows, blob, complaint", [
    ([["began", [1]], submit_with(2, "x")],  # field 2 of a submit row: its footprint
     b"", r"row 1 of a frame: field 'footprint' of a 'submit' message must be a number, got 'x'"),
    ([["result", 1, True, {"wall": {"deep": 1}}, 0, 0, 0, 1.0, 0]], b"",
     r"row 0 of a frame: field 'stats' of a 'result' message must be"),
    ([["began", [1]], ["began", ["1"]]], b"", r"row 1 of a frame: field 'task_ids' of a 'began' message must be a list"),
    ([["began", [1]], ["nothing"]], b"", r"row 1 of a frame: not a node manager message"),
    ([["shutdown"], ["frame", ["shutdown"]]], b"", r"row 1 of a frame: not a node manager message"),
    ([["result", 1, True, {}, 0, 0, 0, 1.0, 5]], b"abc", r"row 0 of a frame: a 'result' message's byte count"),
    ([["result", 1, True, {}, 0, 0, 0, 1.0, -1]], b"", r"row 0 of a frame: a 'result' message's byte count"),
    ([["result", 1, True, {}, 0, 0, 0, 1.0, "3"]], b"abc", r"row 0 of a frame: a 'result' message's byte count"),
    ([["result", 1, True, {}, 0, 0, 1.0, 3]], b"abc", r"row 0 of a frame: a 'result' message has 8 fields, got 7"),
    ([["shutdown"]], b"extra", r"followed by 5 bytes no row counts"),
    ([["fatal", 1]], b"", r"row 0 of a frame: field 'message' of a 'fatal' message must be str"),
])
def test_a_malformed_row_is_refused_naming_the_row_and_the_field(rows, blob, complaint):
    with pytest.raises(ValueError, match=complaint):
        decode_frame(framed(rows, blob))


def test_a_number_that_is_not_one_is_refused_in_a_row_as_in_a_lone_message():
    bad = Submit(4, footprint=math.nan, buffer=b"x")
    with pytest.raises(ValueError, match="row 1 of a frame: field 'footprint' of a 'submit' message must be a number"):
        decode_frame(encode_frame([Submit(3, buffer=b"y"), bad]))
    with pytest.raises(ValueError, match="field 'footprint' of a 'submit' message must be a number"):
        decode(encode(bad))


def test_the_rows_before_a_malformed_one_come_with_its_error():
    with pytest.raises(FrameError) as refused:
        decode_frame(framed([["began", [1, 2]], ["result", 1, True, {}, 0, 0, 0, 1.0, 2], ["began", "x"]], b"ok"))
    assert refused.value.messages == [Began([1, 2]), Result(1, True, {}, 0, 0, 0, 1.0, b"ok")]


def test_decode_refuses_a_frame_and_decode_frame_a_pickle():
    with pytest.raises(ValueError, match="not a node manager message"):
        decode(encode_frame(ROWS[:2]))
    with pytest.raises(ValueError):
        decode_frame(b"\x80\x04\x95\x00\x00\x00\x00")


# -- the outbox ---------------------------------------------------------------------------------


class Written:
    """An outbox's peer: the frames written, decoded, in order."""

    def __init__(self):
        self.frames = []
        self.lock = threading.Lock()

    def __call__(self, data):
        with self.lock:
            self.frames.append(decode_frame(data))

    def messages(self):
        with self.lock:
            return [message for frame in self.frames for message in frame]


def test_what_is_put_is_written_in_order_and_send_writes_before_it_returns():
    written = Written()
    outbox = Outbox(written)
    results = [Result(i, True, {}, 0, 0, 0, 1.0, b"%d" % i) for i in range(200)]
    for result in results[:100]:
        outbox.put(result)
    outbox.send(Began([100]))  # what the dispatch thread does before its Runs
    assert written.messages() == [*results[:100], Began([100])]  # written already, after what was queued
    for result in results[100:]:
        outbox.put(result)
    outbox.flush()
    assert written.messages() == [*results[:100], Began([100]), *results[100:]]
    outbox.close()


def test_a_holder_s_puts_go_as_one_frame_when_it_lets_go_and_a_send_inside_takes_them_at_once():
    written = Written()
    outbox = Outbox(written, linger=0.0)  # no lingering: outside a hold, each put is written at once
    results = [Result(i, True, {}, 0, 0, 0, 1.0, b"%d" % i) for i in range(6)]
    with outbox.holding():
        outbox.put(results[0])
        outbox.put(results[1])
        assert written.frames == []  # held: nothing written yet
        with outbox.holding():  # nested: the outer one writes
            outbox.put(results[2])
        assert written.frames == []
    assert written.frames == [results[:3]]  # one frame, in order, as the hold ended
    with outbox.holding():
        outbox.put(results[3])
        outbox.send(Began([9]))  # a pass's Began takes the pass's Results with it, at once
        assert written.frames[-1] == [results[3], Began([9])]
        outbox.put(results[4])
    assert written.frames[-1] == [results[4]]
    with outbox.holding():
        pass
    assert len(written.frames) == 3  # an empty hold writes nothing
    outbox.put(results[5])
    assert written.frames[-1] == [results[5]]  # not held: written by the caller at once
    outbox.close()


def test_an_outbox_that_hands_off_never_writes_on_the_putting_thread():
    writers, written = set(), Written()

    def write(data):
        writers.add(threading.get_ident())
        written(data)

    outbox = Outbox(write, linger=0.0, hand_off=True)  # the driver's: Parsl's launch thread puts
    outbox.put(Began([1]))  # idle: an outbox that does not hand off writes this one on the caller's thread
    assert wait_until(lambda: written.messages() == [Began([1])])
    for i in range(2, 200):
        outbox.put(Began([i]))
    assert wait_until(lambda: len(written.messages()) == 199)
    assert [message.task_ids[0] for message in written.messages()] == list(range(1, 200))
    assert threading.get_ident() not in writers
    outbox.send(Shutdown())  # send still writes before it returns, on the caller's thread
    assert written.messages()[-1] == Shutdown() and threading.get_ident() in writers
    outbox.close()


def test_messages_put_from_many_threads_arrive_once_each_and_in_each_threads_order():
    written = Written()
    outbox = Outbox(written)

    def put(first):
        for i in range(first, first + 500):
            outbox.put(Began([i]))

    threads = [threading.Thread(target=put, args=(first,)) for first in (0, 1000, 2000)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wait_until(lambda: len(written.messages()) == 1500)
    ids = [message.task_ids[0] for message in written.messages()]
    for first in (0, 1000, 2000):
        assert [i for i in ids if first <= i < first + 500] == list(range(first, first + 500))
    outbox.close()


def test_a_message_that_cannot_be_encoded_costs_itself_not_its_frame(caplog):
    written = Written()
    outbox = Outbox(written)
    loop = {}
    loop["self"] = loop
    outbox.put(Result(1, True, {"wall": 0.1}, 0, 0, 0, 1.0, b""))
    outbox.put(Result(2, True, {"odd": [loop]}, 0, 0, 0, 1.0, b""))  # a circular reference: json refuses it
    outbox.send(Began([3]))
    assert [type(message).__name__ for message in written.messages()] == ["Result", "Began"]
    assert "could not encode a Result message" in caplog.text
    outbox.close()


def test_a_peer_that_is_gone_makes_sends_no_ops():
    def gone(data):
        raise OSError("closed")

    outbox = Outbox(gone)
    outbox.put(Began([1]))
    outbox.send(Shutdown())
    outbox.close()


def test_the_node_managers_began_is_on_the_socket_before_it_returns_behind_the_results_queued():
    ours, theirs = socket.socketpair()
    driver, end = Connection(ours.detach()), Connection(theirs.detach())
    manager = NodeManager(end, None)
    job = Job(b"")
    job.slot, job.domain, job.cpu, job.started = 0, 0, 0, 1.0
    task = Task(5, payload=job)
    manager._send_outcome(task, Outcome(True, b"five", None, {"wall": 0.1}))  # queued, written soon
    manager._report_began([6, 7])  # the pool's on_start: its Runs are sent after it returns
    assert driver.poll(0), "the Began was not written when the dispatch pass went on to its Runs"
    received = []
    while len(received) < 2 and driver.poll(1):
        received += decode_frame(driver.recv_bytes())
    assert received == [Result(5, True, {"wall": 0.1}, 0, 0, 0, 1.0, b"five"), Began([6, 7])]
    end.close()
    driver.close()


# -- a lost manager mid-batch -------------------------------------------------------------------


@pytest.fixture
def client():
    outcomes = Outcomes()
    made = ManagerClient(resolve_topology(None), PoolOptions(batching=Batching(window=0)), outcomes)
    made.start()
    yield made, outcomes
    made.shutdown()


def test_a_manager_killed_during_a_burst_loses_nothing_and_runs_no_task_twice(client, tmp_path):
    client, outcomes = client
    lost_pid, workers = client.pid, set(client.worker_pids)
    ids = list(range(300))
    for i in ids[:150]:
        client.submit(call(i, run_once_marked, str(tmp_path / f"ran-{i}"), 0.01))
    assert wait_until(lambda: any((tmp_path / f"ran-{i}").exists() for i in ids)), "no task started"
    os.kill(lost_pid, signal.SIGKILL)  # frames of Submits, Results and Began in flight both ways
    for i in ids[150:]:
        client.submit(call(i, run_once_marked, str(tmp_path / f"ran-{i}"), 0.01))
    ended = outcomes.wait(ids, timeout=4 * GENEROUS)  # a replacement's start and 300 tasks, on a busy machine
    replaced = 0
    for i in ids:
        assert len(outcomes.by_task[i]) == 1, outcomes.by_task[i]
        runs = (tmp_path / f"ran-{i}").read_text().split() if (tmp_path / f"ran-{i}").exists() else []
        assert len(runs) <= 1, f"task {i} ran {len(runs)} times"  # none went to the replacement after it began
        error = ended[i].error
        if error is not None:  # began on the lost manager: fails once, for retries= to decide
            assert isinstance(error, NodeManagerLost), error
            continue
        assert runs, f"task {i} succeeded without running"
        replaced += int(runs[0]) not in workers
    assert replaced >= 150  # at least those sent after the kill ran on the replacement, unspent
    assert client.managers_lost == 1


def test_a_burst_on_a_node_manager_costs_the_driver_about_one_frame_per_task_not_two(client):
    """Each dispatch pass's Results go with its Began in one frame (the pass holds the manager's
    outbox): before, a Result put alone was written at once and the Began that followed was a second
    frame, so two workers' burst cost two reads and two JSON documents per task."""
    client, outcomes = client
    ids = list(range(5000, 5300))
    before, read = client.frames_read, client.messages_read
    for i in ids:
        client.submit(call(i, time.sleep, 0.002))
    ended = outcomes.wait(ids, timeout=2 * GENEROUS)
    assert all(ended[i].ok for i in ids)
    frames, messages = client.frames_read - before, client.messages_read - read
    assert frames <= 1.3 * len(ids), f"{frames} frames for {len(ids)} tasks"
    # a Result per task and the Begans naming them: more messages than frames, shared
    assert messages >= len(ids) and messages > frames, (messages, frames)


# -- the pool's wake-ups ------------------------------------------------------------------------


def test_tasks_submitted_from_several_threads_at_once_all_complete(client):
    """A submit writes a wake byte only when none waits unread: none may be stranded unread-but-flagged."""
    client, outcomes = client
    ids = list(range(2000, 2600))

    def submit(share):
        for i in share:
            client.submit(call(i, run_once_marked, os.devnull, 0))

    threads = [threading.Thread(target=submit, args=(ids[first::3],)) for first in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ended = outcomes.wait(ids)
    assert all(outcome.error is None for outcome in ended.values())


# -- the driver's reads: every whole frame in one read ---------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=12), st.lists(st.integers(1, 64), min_size=1, max_size=40))
def test_frames_come_out_whole_and_in_order_however_the_bytes_arrive(payloads, cuts):
    """As ``Connection.send_bytes`` framed them, whatever pieces the socket hands over: a frame's first
    part waits in the buffer for the rest, and nothing is read twice."""
    a, b = socket.socketpair()
    sender = Connection(a.detach())
    for payload in payloads:
        sender.send_bytes(payload)
    raw = b.recv(1 << 20)
    while len(raw) < sum(len(payload) + 4 for payload in payloads):
        raw += b.recv(1 << 20)
    sender.close()
    b.close()
    unread, frames, at = bytearray(), [], 0
    for cut in cuts * (len(raw) // max(1, sum(cuts)) + 1):
        if at >= len(raw):
            break
        unread += raw[at:at + cut]
        at += cut
        frames += _whole_frames(unread)
    assert frames == payloads and not unread


def test_the_reader_takes_every_frame_the_socket_holds_in_one_read_and_waits_for_a_frames_rest():
    ours, theirs = socket.socketpair()
    peer = Connection(theirs.detach())
    manager = LocalManager(subprocess.Popen(["true"]), Connection(ours.detach()), Ledger())
    try:
        for payload in (b"one", b"two", b"three"):
            peer.send_bytes(payload)
        assert manager.readable(5) and manager.read_frames() == [b"one", b"two", b"three"]
        whole = struct.pack("!i", 6) + b"halves"
        os.write(peer.fileno(), whole[:5])  # its length and a byte: read_frames waits for the rest
        threading.Timer(0.2, os.write, (peer.fileno(), whole[5:])).start()
        assert manager.readable(5) and manager.read_frames() == [b"halves"]
        peer.close()
        assert manager.readable(5)
        with pytest.raises(EOFError):
            manager.read_frames()
    finally:
        manager.process.wait()
        manager.outbox.close()


def test_submits_go_to_the_sender_unless_parsl_logs_every_task():
    """Parsl's log file on (its default): the launch thread writes its own Submits; off: the sender does."""
    dfk_logger = logging.getLogger("parsl.dataflow.dflow")
    level, propagate, handler = dfk_logger.level, dfk_logger.propagate, logging.NullHandler()
    try:
        dfk_logger.propagate = False  # its handlers alone (pytest's capture sits on the root logger)
        dfk_logger.setLevel(logging.DEBUG)
        assert handing_off()  # no handler anywhere (a DataFlowKernel's log file removed at cleanup): nothing written
        dfk_logger.addHandler(handler)
        dfk_logger.setLevel(logging.WARNING)
        assert handing_off()
        dfk_logger.setLevel(logging.DEBUG)
        assert not handing_off()
        ours, theirs = socket.socketpair()
        manager = LocalManager(subprocess.Popen(["true"]), Connection(ours.detach()), Ledger())
        assert manager.outbox._hand_off is False
        manager.process.wait()
        manager.outbox.close()
        theirs.close()
    finally:
        dfk_logger.setLevel(level)
        dfk_logger.propagate = propagate
        dfk_logger.removeHandler(handler)
