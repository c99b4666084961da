"""The messages between the driver and a node manager: one definition of each, and their encoding.

::

    driver (ManagerClient)                                  node manager (one per node)
      │  Configure(config, options) ──>                     first message: where and how to run
      │                               <── Started(pid, worker_pids, slot_cpus, topology, memory, gpus)
      │  Submit(id, TASK_FIELDS, JOB_FIELDS, buffer) ──>    any number, before or after Started
      │  Lengthen(id, tail, wide_tail) ──>                  the chain behind a task submitted earlier grew
      │                               <── Began(ids)    these tasks are about to be sent to workers
      │                               <── Result(id, ok, stats, slot, domain, cpu, started, payload)
      │                               <── Failed(id, kind, message, detail, slot, domain, cpu, started, stats)
      │                               <── Heartbeat(worker_pids, respawns, ...)   every heartbeat_period
      │                               <── Log(level, logger, text)           the manager's log records
      │                               <── Fatal(message)                     it cannot go on; it exits
      │                               <── Drain(after)                       its drain_period is over: send it
      │                                                                      no new task (provider mode)
      │  Shutdown() ──>                                     fail what is unfinished, end workers, exit
      │  (EOF) ──>                                          the driver is gone: end workers, exit

In connect mode (provider blocks, :mod:`scalpel_executor.runtime.driver.hub`) the manager speaks first
and the driver beats too; each message is one ZeroMQ message holding the same bytes, in frames
of at most 16 MiB (:mod:`~scalpel_executor.runtime.wire.channel`)::

      │                               <── Register(block_id, hostname, version, pid, cpus)
      │  Configure(config, options) ──>  ...as above...
      │  Ping() ──>                                         every heartbeat_period: the driver lives

A task's call and result are opaque bytes here (Parsl's serialization, packed by the driver and
unpacked by a worker, or the reverse). The envelope is **not** a pickle: it is a JSON header
(tag and fields: numbers, strings, booleans, None, lists and string-keyed dicts of those) followed
by at most one raw byte field, so decoding a message runs no code and builds no object of the
peer's choosing, whoever the peer is; every field is checked against its type down to its
elements (a CPU list is a list of integers, a worker's stats are numbers, strings, booleans, nulls
or lists of those), the free-form objects (a configuration, a topology) may nest at most
:data:`MAX_DEPTH` levels, and anything else is a ``ValueError`` naming the field, so a receiver
has one exception to catch. ``Configure`` carries the node's :class:`ManagerConfig` (defined
here) and the pool's :class:`~scalpel_executor.runtime.options.PoolOptions`, each as its own
``to_dict()``. ``Submit`` carries the task's fields named in :data:`TASK_FIELDS` and its job's in
:data:`JOB_FIELDS`, each with its wire type: :func:`submit_of` flattens a task by them and
:func:`task_of` rebuilds it, so a Task field the manager's scheduler reads is declared there once.
A failure without a result (``Failed``) travels as a kind from
:data:`FAILURE_KINDS`, a message and a dict of plain fields (:func:`describe_error` in the manager);
the driver rebuilds the exception it knows (:func:`rebuild_error`: ``WorkerDied``,
``WalltimeExceeded``, ...), and a lost manager's tasks fail with
:class:`~scalpel_executor.runtime.errors.NodeManagerLost`, whichever side of the driver saw it.
Only the tasks that may have run, that is: ``Began`` names the tasks of one dispatch pass before
any of them is sent to its worker, on the same ordered channel as their results, so a task a lost
manager held that no ``Began`` named never ran there and goes to another manager unspent.

Layout of one message: a 4-byte big-endian header length, the UTF-8 JSON header
``[tag, field, ...]`` (every field but the byte one), then the byte field's bytes.

**Frames.** Either side may send several messages as one frame (:func:`encode_frame`), read with
:func:`decode_frame` (which also reads a lone message): the header is ``["frame", row, ...]``, each
row a message's ``[tag, field, ...]`` with, for a kind that carries bytes, their length as its last
field, and the rows' bytes follow the header in row order. A frame is its messages in order, so
what it changes is the cost, not the meaning: one JSON document, one write and one read for many
messages (a burst of no-op tasks sent one message each cost the driver about 60 µs of channel per
task, in 64-row frames about 10). Every row is checked as a lone message is, and an error names the
row too (``row 3 of a frame: field 'footprint' of a 'submit' message must be a number, got 'x'``);
a frame holds no frame.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import operator
import reprlib
import struct
import sys
from collections import namedtuple
from dataclasses import asdict, dataclass, field, fields
from typing import Any, NamedTuple, Union

from scalpel_executor.core.domains import Domain, Topology
from scalpel_executor.core.interference import Terms
from scalpel_executor.core.tasks import Task
from scalpel_executor.host.sysfs import detect_topology
from scalpel_executor.runtime.contract import Job
from scalpel_executor.runtime.errors import ExecutorFailed, ExecutorShutdown, MemoryExceeded, ResourcesUnavailable

__all__ = ["Register", "Ping", "Configure", "Submit", "Lengthen", "Shutdown", "Started", "Began", "Result", "Failed", "Heartbeat",
           "Log", "Fatal", "Drain", "Message", "FAILURE_KINDS", "TASK_FIELDS", "TASK_KEPT", "JOB_FIELDS", "ManagerConfig",
           "encode", "decode", "encode_frame", "decode_frame", "FrameError", "submit_of", "submit_row", "task_of", "describe_error",
           "rebuild_error"]

FAILURE_KINDS = ("WorkerDied", "WalltimeExceeded", "ExecutorShutdown", "ExecutorFailed", "ResourcesUnavailable",
                 "MemoryExceeded")

# Wire types beyond Python's own (int, str, bool, dict, bytes), as _checked enforces them:
_NUMBER, _OPTIONAL_NUMBER, _OPTIONAL_INT, _OPTIONAL_STR = "number", "number?", "int?", "str?"
_OPTIONAL_TERMS = "terms?"  # an interference Terms: two or three numbers, or None
_INTS, _NUMBERS, _INT_LISTS = "ints", "numbers", "int lists"  # lists of integers, of numbers, of integer lists
_PLAIN, _DETAIL = "plain", "detail"  # a dict of plain values; a Failed's fields (see _DETAIL_FIELDS)

#: The :class:`~scalpel_executor.core.tasks.Task` fields a ``Submit`` carries to the node
#: manager's scheduler, each with its wire type, in the message's order. A Task field that the
#: manager's scheduler reads is added here (and set where the executor builds the task):
#: ``Submit``, :func:`submit_of` and :func:`task_of` follow.
TASK_FIELDS: tuple[tuple[str, Any], ...] = (
    ("footprint", _NUMBER), ("runtime", _NUMBER), ("priority", _NUMBER), ("intensity", _OPTIONAL_NUMBER),
    ("runtime_spread", _NUMBER), ("key", _OPTIONAL_STR), ("footprint_known", bool), ("cores", int),
    ("memory", _NUMBER), ("gpus", int), ("tail", _NUMBER), ("wide_tail", _OPTIONAL_NUMBER),
    ("interference", _OPTIONAL_TERMS), ("max_cores", _OPTIONAL_INT), ("serial_fraction", _OPTIONAL_NUMBER),
    ("serial_readings", int), ("family", _OPTIONAL_STR), ("family_serial", _OPTIONAL_NUMBER), ("family_readings", int),
)
#: The Task fields that stay in the driver: the id travels as ``task_id``, the payload as the Job's
#: fields, and the manager's own scheduler sets ``seq``, ``foreseen_harm``, ``width_reason`` and
#: ``width_reading`` (the last two travel back in the Result's stats: runtime.node.pool._placement).
TASK_KEPT = ("id", "payload", "seq", "foreseen_harm", "width_reason", "width_reading")
#: The :class:`~scalpel_executor.runtime.contract.Job` fields a ``Submit`` carries after the task's;
#: the call itself, ``buffer``, travels last, as raw bytes.
JOB_FIELDS: tuple[tuple[str, Any], ...] = (("walltime", _OPTIONAL_NUMBER), ("measure", bool), ("memory_limit", _NUMBER))


class Register(NamedTuple):
    block_id: str  # the provider block the manager was launched in
    hostname: str
    version: str  # scalpel_executor.__version__; the driver refuses another
    pid: int
    cpus: list  # the CPUs the manager may use (its affinity)


class Ping(NamedTuple):
    pass


class Configure(NamedTuple):
    config: dict  # ManagerConfig.to_dict(): the node (topology or none, sys.path, log level, max workers)
    options: dict  # PoolOptions.to_dict(): how its pool runs (policy, batching, heartbeats, ...)


def _defaults(kind: type, names) -> list:
    default = {f.name: f.default for f in dataclasses.fields(kind)}
    return [default[name] for name in names]


_TASK_NAMES = tuple(name for name, _ in TASK_FIELDS)
_JOB_NAMES = tuple(name for name, _ in JOB_FIELDS)
#: A task for the node manager: ``task_id``, then TASK_FIELDS and JOB_FIELDS, then ``buffer`` (the
#: serialized call). Fields left out take the Task's and the Job's defaults.
Submit = namedtuple("Submit", ("task_id", *_TASK_NAMES, *_JOB_NAMES, "buffer"),
                    defaults=(*_defaults(Task, _TASK_NAMES), *_defaults(Job, _JOB_NAMES), b""))


class Lengthen(NamedTuple):  # after its task's Submit: the chain behind it is longer than it was told
    task_id: int
    tail: float  # seconds (Task.tail), and at its malleable tasks' widest (Task.wide_tail)
    wide_tail: float


class Shutdown(NamedTuple):
    pass


class Started(NamedTuple):
    pid: int
    worker_pids: list
    slot_cpus: list  # one list of CPUs per slot
    topology: dict  # Topology.to_dict() of what the manager schedules for
    memory: float  # bytes of declared task memory the node runs at once (its pool's memory budget)
    gpus: int  # accelerators its tasks share


class Began(NamedTuple):  # sent before the tasks' workers are sent them: a task not named here never ran
    task_ids: list  # the tasks one dispatch pass starts, in order


class Result(NamedTuple):
    task_id: int
    ok: bool  # True: payload is the serialized result; False: a serialized RemoteExceptionWrapper
    stats: dict  # measured in the worker (numbers and strings)
    slot: int
    domain: int
    cpu: int
    started: float  # the manager's time.monotonic() when it was sent to its worker
    payload: bytes


class Failed(NamedTuple):
    task_id: int
    kind: str  # one of FAILURE_KINDS
    message: str
    detail: dict  # the exception's plain fields (pid, cpus, cause, walltime)
    slot: int | None  # None: it never started
    domain: int | None
    cpu: int | None
    started: float | None
    stats: dict = {}  # where it ran and why (admission, cpus, devices) when it started; {} before


class Heartbeat(NamedTuple):  # also sent at once when a worker is respawned or a slot retired
    worker_pids: list
    respawns: int
    respawn_seconds: list  # the latest times from a worker's death to its replacement's "ready"
    retired_slots: list  # slots the pool gave up on: their replacements kept dying before "ready"


class Log(NamedTuple):
    level: int
    logger: str
    text: str


class Fatal(NamedTuple):
    message: str


class Drain(NamedTuple):  # the manager takes no new task; once it holds none the driver tells it to shut down
    after: float  # seconds since the manager started (its drain_period)


Message = Union[Register, Ping, Configure, Submit, Lengthen, Shutdown, Started, Began, Result, Failed, Heartbeat, Log, Fatal, Drain]

_SCHEMA: dict[str, tuple[type, tuple[Any, ...]]] = {  # tag -> (kind, types of its fields in order)
    "register": (Register, (str, str, str, int, _INTS)),
    "ping": (Ping, ()),
    "configure": (Configure, (dict, dict)),
    "submit": (Submit, (int, *(kind for _, kind in TASK_FIELDS), *(kind for _, kind in JOB_FIELDS), bytes)),
    "lengthen": (Lengthen, (int, _NUMBER, _NUMBER)),
    "shutdown": (Shutdown, ()),
    "started": (Started, (int, _INTS, _INT_LISTS, dict, _NUMBER, int)),
    "began": (Began, (_INTS,)),
    "result": (Result, (int, bool, _PLAIN, int, int, int, _NUMBER, bytes)),
    "failed": (Failed, (int, str, str, _DETAIL, _OPTIONAL_INT, _OPTIONAL_INT, _OPTIONAL_INT, _OPTIONAL_NUMBER, _PLAIN)),
    "heartbeat": (Heartbeat, (_INTS, int, _NUMBERS, _INTS)),
    "log": (Log, (int, str, str)),
    "fatal": (Fatal, (str,)),
    "drain": (Drain, (_NUMBER,)),
}
#: The fields of a Failed's ``detail`` the driver reads to rebuild its exception, and what each must be.
_DETAIL_FIELDS = {"pid": _OPTIONAL_INT, "cpus": _INTS, "cause": str, "walltime": _OPTIONAL_NUMBER}
#: Deepest nesting of lists and dicts a header may have: json refuses about a thousand levels
#: (RecursionError); every field is checked to its full depth but the free-form objects (a
#: configuration, which nests 4 deep, and a topology), which are refused below 32.
MAX_DEPTH = 32
_SCALARS = (str, bool, int, float, type(None))
_TAGS = {kind: tag for tag, (kind, _) in _SCHEMA.items()}
_LENGTH = struct.Struct("!I")
# One encoder for every header: json.dumps with separators= or default= builds a new one per call.
# default=str: a worker's stats are numbers and strings, but nothing odd may fail a task's result.
_JSON = json.JSONEncoder(separators=(",", ":"), default=str)


def encode(message: Message) -> bytes:
    """The bytes of one message.

    >>> decode(encode(Submit(7, footprint=1e6, key="app(~64)", tail=2.5, buffer=b"call")))[:3]
    (7, 1000000.0, 1.0)
    >>> decode(encode(Began([7, 8])))
    Began(task_ids=[7, 8])
    """
    tag = _TAGS[type(message)]
    fields = list(message)
    blob = b""
    if _SCHEMA[tag][1][-1:] == (bytes,):
        blob = bytes(fields.pop())
    header = _JSON.encode([tag, *fields]).encode()
    return b"".join((_LENGTH.pack(len(header)), header, blob))


def encode_frame(messages) -> bytes:
    """The bytes of ``messages``, in order, as one frame (a lone message as itself).

    >>> decode_frame(encode_frame([Began([7]), Result(7, True, {}, 0, 0, 0, 1.0, b"ok"), Shutdown()]))
    [Began(task_ids=[7]), Result(task_id=7, ok=True, stats={}, slot=0, domain=0, cpu=0, started=1.0, payload=b'ok'), Shutdown()]
    """
    if len(messages) == 1:
        return encode(messages[0])
    rows: list = ["frame"]
    blobs: list = []
    for message in messages:
        tag = _TAGS[type(message)]
        row = [tag, *message]
        if _CARRIES_BYTES[tag]:
            blob = bytes(row[-1])
            blobs.append(blob)
            row[-1] = len(blob)
        rows.append(row)
    header = _JSON.encode(rows).encode()
    return b"".join((_LENGTH.pack(len(header)), header, *blobs))


def _optional(convert):
    return lambda value: None if value is None else convert(value)


#: How a value goes on the wire, by wire type: the driver's numbers may be numpy's or integers.
_TO_WIRE = {_NUMBER: float, _OPTIONAL_NUMBER: _optional(float), int: int, bool: bool, _OPTIONAL_STR: _optional(str),
            _OPTIONAL_INT: _optional(int), _OPTIONAL_TERMS: _optional(lambda terms: tuple(map(float, terms)))}
_TASK_VALUES, _JOB_VALUES = operator.attrgetter(*_TASK_NAMES), operator.attrgetter(*_JOB_NAMES)  # each a tuple: several names
_TASK_WIRE = tuple(_TO_WIRE[kind] for _, kind in TASK_FIELDS)
_JOB_WIRE = tuple(_TO_WIRE[kind] for _, kind in JOB_FIELDS)
# map(operator.call, ...) converts 15 fields in about 1 us; a comprehension took 2 us (the explicit
# calls it replaced, 0.4 us). operator.call is Python 3.11's.
_call = getattr(operator, "call", lambda convert, value: convert(value))


def submit_row(task: Task) -> Submit:
    """The Submit of a Task whose payload is a Job: its TASK_FIELDS and its Job's JOB_FIELDS, each as
    its wire type (so the message encodes as it is, alone or in a frame)."""
    job: Job = task.payload
    return Submit(task.id, *map(_call, _TASK_WIRE, _TASK_VALUES(task)), *map(_call, _JOB_WIRE, _JOB_VALUES(job)),
                  job.buffer)


def submit_of(task: Task) -> bytes:
    """The encoded Submit of a Task whose payload is a Job (:func:`submit_row`)."""
    return encode(submit_row(task))


def task_of(message: Submit) -> Task:
    """The Task a Submit describes, its payload a Job (the node manager's side); the inverse of :func:`submit_of`.

    >>> task = task_of(decode(submit_of(Task(7, 1e6, key="app(~64)", tail=2.5, payload=Job(b"call", walltime=60.0)))))
    >>> task.id, task.footprint, task.key, task.tail, task.interference, task.payload.walltime, task.payload.buffer
    (7, 1000000.0, 'app(~64)', 2.5, None, 60.0, b'call')
    """
    return Task(message.task_id, payload=Job(message.buffer, **dict(zip(_JOB_NAMES, _JOB_VALUES(message)))),
                **dict(zip(_TASK_NAMES, _TASK_VALUES(message))))


def _header(data: bytes) -> tuple[Any, int]:
    """The JSON header of a message or frame, and where its bytes begin."""
    if len(data) < _LENGTH.size:
        raise ValueError(f"not a node manager message: {len(data)} bytes, shorter than its header length")
    (length,) = _LENGTH.unpack_from(data)
    if _LENGTH.size + length > len(data):
        raise ValueError(f"not a node manager message: header of {length} bytes in a message of {len(data)}")
    try:
        envelope = json.loads(data[_LENGTH.size:_LENGTH.size + length].decode())  # ASCII as written
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"not a node manager message: its header is not JSON ({error})") from None
    except RecursionError:
        raise ValueError(f"not a node manager message: its header nests deeper than {MAX_DEPTH} levels") from None
    return envelope, _LENGTH.size + length


def decode(data: bytes) -> Message:
    """The message in ``data``; ValueError for anything that is not one, naming what is wrong."""
    return _lone(data, *_header(data))


def _lone(data: bytes, envelope: Any, start: int) -> Message:
    """The one message of ``data``, whose header :func:`_header` read."""
    if not isinstance(envelope, list) or not envelope or envelope[0] not in _SCHEMA:
        raise ValueError(f"not a node manager message: {_short(envelope)}")
    tag, fields = envelope[0], envelope[1:]
    blob = data[start:]
    if _CARRIES_BYTES[tag]:
        fields.append(blob)
    elif blob:
        raise ValueError(f"a {tag!r} message carries no bytes, but {len(blob)} follow its header")
    return _message(tag, fields)


def decode_frame(data: bytes) -> list[Message]:
    """The messages in ``data``, a frame (:func:`encode_frame`) or a lone message, in order;
    ValueError for anything else, naming what is wrong (in a frame, a :class:`FrameError` naming the
    row, with the rows before it).

    >>> decode_frame(encode_frame([Began([1, 2]), Fatal("no")]))
    [Began(task_ids=[1, 2]), Fatal(message='no')]
    """
    envelope, start = _header(data)
    if not (isinstance(envelope, list) and envelope and envelope[0] == "frame"):
        return [_lone(data, envelope, start)]
    messages, end = [], len(data)
    for row, items in enumerate(envelope[1:]):
        try:
            if not isinstance(items, list) or not items or items[0] not in _SCHEMA:
                raise ValueError(f"not a node manager message: {_short(items)}")
            tag, items = items[0], items[1:]
            if _CARRIES_BYTES[tag]:
                size = items[-1] if items else None
                if not _is_int(size) or size < 0 or start + size > end:
                    raise ValueError(f"a {tag!r} message's byte count must be an integer of at most the "
                                     f"{end - start} bytes left in the frame, got {_short(size)}")
                items[-1] = data[start:start + size]
                start += size
            messages.append(_message(tag, items))
        except ValueError as error:
            raise FrameError(f"row {row} of a frame: {error}", messages) from None
    if start != end:
        raise FrameError(f"a frame of {len(messages)} messages is followed by {end - start} bytes no row counts",
                         messages)
    return messages


class FrameError(ValueError):
    """A frame with a malformed row: ``messages`` are the rows before it, well formed, which the peer
    sent before the bad one (a receiver acts on them as on messages read before a malformed one)."""

    def __init__(self, text: str, messages: list):
        super().__init__(text)
        self.messages = messages


def _message(tag: str, fields: list) -> Message:
    """The message of kind ``tag`` made of ``fields`` (its byte field last, as bytes), each checked."""
    kind, types = _SCHEMA[tag]
    if len(fields) != len(types):
        raise ValueError(f"a {tag!r} message has {len(types)} fields, got {len(fields)}: {_short(fields)}")
    checks = _CHECKS[tag]
    try:
        return kind(*map(_call, checks, fields))
    except _Unfit:  # the slow path names the field and what it must be
        pass
    return kind(*(_checked(tag, name, value, expected)
                  for name, value, expected in zip(kind._fields, fields, types)))


def _depth(value: Any) -> int:
    """How deeply lists and dicts nest in a decoded JSON value (iteratively: no recursion to exhaust)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, level)
            if level <= MAX_DEPTH:
                stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)


def _is_plain(value: Any) -> bool:  # a worker's stats: numbers, strings, booleans, null, or lists of those
    return isinstance(value, _SCALARS) or isinstance(value, list) and all(isinstance(item, _SCALARS) for item in value)


_WANTED = {_NUMBER: "a number", _OPTIONAL_NUMBER: "a number or null", _OPTIONAL_INT: "an integer or null",
           _OPTIONAL_STR: "a string or null", _OPTIONAL_TERMS: "a list of two or three numbers or null",
           int: "an integer", _INTS: "a list of integers", _NUMBERS: "a list of numbers",
           _INT_LISTS: "a list of lists of integers",
           _PLAIN: "an object of numbers, strings, booleans, nulls or lists of those"}


def _checked(tag: str, name: str, value: Any, expected: Any) -> Any:
    optional = expected in (_OPTIONAL_NUMBER, _OPTIONAL_INT, _OPTIONAL_STR, _OPTIONAL_TERMS)
    if value is None and optional:
        return None
    if expected in (_NUMBER, _OPTIONAL_NUMBER):
        if _is_number(value):
            return float(value)
    elif expected is _OPTIONAL_INT or expected is int:
        if _is_int(value):
            return value
    elif expected is _OPTIONAL_STR:
        if isinstance(value, str):
            return value
    elif expected is _OPTIONAL_TERMS:
        if isinstance(value, list) and len(value) in (2, 3) and all(map(_is_number, value)):
            return Terms(*map(float, value))
    elif expected is _INTS:
        if isinstance(value, list) and all(map(_is_int, value)):
            return value
    elif expected is _NUMBERS:
        if isinstance(value, list) and all(map(_is_number, value)):
            return value
    elif expected is _INT_LISTS:
        if isinstance(value, list) and all(isinstance(item, list) and all(map(_is_int, item)) for item in value):
            return value
    elif expected is _PLAIN:
        if isinstance(value, dict) and all(map(_is_plain, value.values())):
            return value
    elif expected is dict:
        if isinstance(value, dict):
            if _depth(value) >= MAX_DEPTH:
                raise ValueError(f"field {name!r} of a {tag!r} message nests deeper than {MAX_DEPTH} levels")
            return value
    elif expected is _DETAIL:
        if not isinstance(value, dict):
            raise ValueError(f"field {name!r} of a {tag!r} message must be an object, got {_short(value)}")
        for key, wanted in _DETAIL_FIELDS.items():
            if key in value:
                _checked(tag, f"{name}.{key}", value[key], wanted)
        return value
    elif isinstance(value, expected):
        return value
    wanted = _WANTED.get(expected, getattr(expected, "__name__", str(expected)))
    raise ValueError(f"field {name!r} of a {tag!r} message must be {wanted}, got {_short(value)}")


class _Unfit(Exception):
    """A field that does not check: :func:`_checked` then says which and why."""


def _fast(expected: Any):
    """What :func:`_checked` does for a field of type ``expected`` on its commonest values, at a fraction
    of its cost (about 0.1 µs a field against 0.6); anything else goes to it, and it decides."""
    def number(value):
        if value.__class__ is float and value == value:  # not NaN
            return value
        if value.__class__ is int:
            return float(value)
        raise _Unfit

    def optional_number(value):
        return None if value is None else number(value)

    def integer(value):
        if value.__class__ is int:
            return value
        raise _Unfit

    def optional_integer(value):
        return None if value is None else integer(value)

    def exact(kind):
        def check(value):
            if value.__class__ is kind:
                return value
            raise _Unfit
        return check

    def optional_string(value):
        if value is None or value.__class__ is str:
            return value
        raise _Unfit

    def integers(value):
        if value.__class__ is list and all(item.__class__ is int for item in value):
            return value
        raise _Unfit

    def plain(value):
        if value.__class__ is dict and all(item.__class__ in _PLAIN_SCALARS for item in value.values()):
            return value
        raise _Unfit

    def terms(value):
        if value is None:
            return None
        if value.__class__ is list and len(value) in (2, 3):
            return Terms(*map(number, value))
        raise _Unfit

    def slow(value):
        raise _Unfit

    return {_NUMBER: number, _OPTIONAL_NUMBER: optional_number, int: integer, _OPTIONAL_INT: optional_integer,
            _OPTIONAL_STR: optional_string, bool: exact(bool), str: exact(str), bytes: exact(bytes), _INTS: integers,
            _PLAIN: plain, _OPTIONAL_TERMS: terms}.get(expected, slow)


_PLAIN_SCALARS = frozenset((str, bool, int, float, type(None)))  # lists, and anything odd, go the slow way
_CHECKS = {tag: tuple(map(_fast, types)) for tag, (_, types) in _SCHEMA.items()}
_CARRIES_BYTES = {tag: types[-1:] == (bytes,) for tag, (_, types) in _SCHEMA.items()}


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 100


def _short(value: Any) -> str:
    """A value for an error message: bounded in length and depth, whatever the peer sent."""
    return _REPR.repr(value)



@dataclass(frozen=True)
class ManagerConfig:
    """Where a node manager's pool runs: ``Configure``'s first half (its
    :class:`~scalpel_executor.runtime.options.PoolOptions`, how the pool runs, are the other).

    ``domains`` is the driver's topology as ``[{"cpus": [...], "llc_size": bytes or None}, ...]``;
    None lets the manager detect its node's own (``smt`` as in
    :func:`~scalpel_executor.host.sysfs.detect_topology`), of which ``max_workers`` keeps the
    first CPUs. ``sys_path`` is the driver's import path, handed to workers so they unpickle the
    driver's functions by reference; ``log_level`` the driver's level for ``scalpel_executor``.
    """

    domains: list | None = None
    topology_source: str = "driver"
    smt: bool = False
    max_workers: int | None = None  # at most this many slots (the first CPUs of the topology); None: all
    sys_path: list = field(default_factory=list)
    log_level: int = logging.INFO

    @classmethod
    def of_driver(cls, topology: Topology | None = None, **node: Any) -> "ManagerConfig":
        """What this process, the driver, tells its managers: ``topology`` (resolved here; None: each
        node detects its own), its import path and its log level, and ``node`` (smt, max_workers)."""
        domains = None if topology is None else [{"cpus": list(domain.cpus), "llc_size": domain.llc_size}
                                                 for domain in topology.domains]
        return cls(domains=domains, topology_source="driver" if topology is None else topology.source,
                   sys_path=[p for p in sys.path if p],
                   log_level=logging.getLogger("scalpel_executor").getEffectiveLevel(), **node)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "ManagerConfig":
        """Rebuild a configuration, naming any key this manager does not know (a version mismatch)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"the node manager's configuration has unknown keys {unknown}; the driver and the "
                             f"manager must run the same scalpel-executor version")
        config = cls(**values)
        if config.max_workers is not None and (not isinstance(config.max_workers, int)
                                               or isinstance(config.max_workers, bool) or config.max_workers < 1):
            raise ValueError(f"max_workers must be a positive integer or None, got {config.max_workers!r}")
        return config

    def topology(self) -> Topology:
        """The LLC domains to schedule for: the driver's, or this node's own when none was given."""
        if self.domains is None:
            topology = detect_topology(smt=self.smt)
        else:
            topology = Topology(tuple(Domain(index, tuple(d["cpus"]), d.get("llc_size"))
                                      for index, d in enumerate(self.domains)), self.topology_source)
        return topology.first(self.max_workers)


def describe_error(error: BaseException) -> tuple[str, dict]:
    """An error a pool ended a task with, as one of FAILURE_KINDS and its plain fields (the manager's side)."""
    lost = sys.modules.get("scalpel_executor.runtime.lost")  # not loaded: no error of it was made here
    if lost is not None and isinstance(error, lost.WorkerDied):
        return "WorkerDied", {"pid": error.worker_id, "cpus": list(error.cpus), "cause": error.cause}
    if lost is not None and isinstance(error, lost.WalltimeExceeded):
        return "WalltimeExceeded", {"walltime": error.walltime}
    if isinstance(error, ExecutorShutdown):
        return "ExecutorShutdown", {}
    if isinstance(error, ResourcesUnavailable):
        return "ResourcesUnavailable", {}
    if isinstance(error, MemoryExceeded):
        return "MemoryExceeded", {"declared": error.declared, "limit": error.limit, "mechanism": error.mechanism}
    if isinstance(error, ExecutorFailed):
        return "ExecutorFailed", {}
    return "ExecutorFailed", {"type": type(error).__name__}


def rebuild_error(message: Failed) -> BaseException:
    """The exception a Failed message describes, as this process's own type (the driver's side)."""
    from scalpel_executor.runtime.lost import WalltimeExceeded, WorkerDied  # Parsl's: the driver has it loaded

    detail, text = message.detail, message.message
    if message.kind == "WorkerDied":
        return WorkerDied(text, task_id=message.task_id, pid=detail.get("pid"), cpus=tuple(detail.get("cpus", ())),
                          cause=str(detail.get("cause", "")))
    if message.kind == "WalltimeExceeded":
        return WalltimeExceeded(text, task_id=message.task_id, walltime=detail.get("walltime"))
    if message.kind == "ExecutorShutdown":
        return ExecutorShutdown(text)
    if message.kind == "ResourcesUnavailable":
        return ResourcesUnavailable(text)
    if message.kind == "MemoryExceeded":
        return MemoryExceeded(text, declared=detail.get("declared"), limit=detail.get("limit"),
                              mechanism=detail.get("mechanism"))
    return ExecutorFailed(text)
