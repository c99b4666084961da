"""The driver <-> node manager messages: every kind round-trips; nothing else decodes, and nothing is unpickled."""

import dataclasses
import math
import pickle

import pytest

from scalpel_executor.runtime.errors import NodeManagerLost
from scalpel_executor.core.batching import Batching
from scalpel_executor.core.tasks import Task
from scalpel_executor.runtime.contract import Job
from scalpel_executor.runtime.wire.manager_messages import (JOB_FIELDS, TASK_FIELDS, TASK_KEPT, Configure, Drain, Failed,
                                                       Fatal, Heartbeat, Log, ManagerConfig, Result, Shutdown, Started,
                                                       Submit, decode, encode, submit_of, task_of)
from scalpel_executor.runtime.options import PoolOptions
from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.interference import Terms
from scalpel_executor.core.domains import Topology

MESSAGES = [
    Configure(ManagerConfig.of_driver(Topology.from_spec("2x2:12MiB")).to_dict(), PoolOptions().to_dict()),
    Submit(3, footprint=2.5e7, runtime=0.25, priority=1.0, intensity=None, runtime_spread=0.2, key="mod.app(~64)",
           footprint_known=False, cores=2, memory=3.0 * 2**30, gpus=1, tail=7.5, interference=Terms(0.25, -0.5, 0.125),
           walltime=60.0, measure=False, memory_limit=2.0 * 2**30, buffer=b"\x00call" * 1000),
    Shutdown(),
    Started(41, [42, 43], [[0], [1]], {"source": "spec", "domains": []}, 2.0 * 2**30, 1),
    Result(3, True, {"wall": 0.1, "footprint": None, "footprint_source": "referenced-pages"}, 1, 0, 1, 123.5, b""),
    Result(4, False, {}, 0, 0, 0, 1.0, b"\xff" * 70_000),
    Failed(5, "WorkerDied", "task 5 was lost", {"pid": 42, "cpus": [0, 1], "cause": "signal SIGKILL"}, 1, 0, 1, 2.0,
           {"admission": "fits", "scheduled_footprint": 8e6, "cpus": [0, 1], "devices": []}),
    Failed(6, "ExecutorShutdown", "had not started", {}, None, None, None, None),
    Heartbeat([42, 44], 1, [0.25], [3]),
    Log(30, "scalpel_executor.runtime.node.pool", "worker pid 42 died"),
    Fatal("could not start"),
    Drain(3600.5),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_round_trips(message):
    assert decode(encode(message)) == message


def test_every_task_field_either_travels_in_a_submit_or_is_declared_to_stay_in_the_driver():
    declared = [name for name, _ in TASK_FIELDS] + list(TASK_KEPT)
    assert sorted(declared) == sorted(f.name for f in dataclasses.fields(Task)), (
        "a Task field was added: declare it in manager_messages.TASK_FIELDS (with its wire type) or TASK_KEPT")


def test_a_task_travels_to_the_node_manager_and_is_rebuilt_with_every_declared_field():
    job = Job(b"call", walltime=30.0, measure=False, memory_limit=2.0 * 2**30)
    task = Task(7, footprint=2.5e7, runtime=0.25, priority=-math.inf, intensity=3.5, runtime_spread=0.2,
                key="mod.app(~64)", footprint_known=False, cores=2, memory=3.0 * 2**30, gpus=1, tail=7.5, max_cores=8,
                interference=Terms(0.25, -0.5, 0.125), serial_fraction=0.25, serial_readings=3, family="mod.app",
                family_serial=0.125, family_readings=9, payload=job)
    rebuilt = task_of(decode(submit_of(task)))
    assert rebuilt.id == task.id and rebuilt.payload.buffer == job.buffer
    for name, _ in TASK_FIELDS:
        assert getattr(rebuilt, name) == getattr(task, name), name
    for name, _ in JOB_FIELDS:
        assert getattr(rebuilt.payload, name) == getattr(job, name), name
    plain = task_of(decode(submit_of(Task(8, payload=Job(b"")))))  # the defaults, key and interference None
    assert (plain.key, plain.interference, plain.intensity, plain.payload.walltime) == (None, None, None, None)


def test_a_configuration_round_trips_and_rebuilds_the_topology_and_the_options():
    topology = Topology.from_spec("2x2:12MiB")
    options = PoolOptions(policy="fifo", pin="domain", batching=Batching(window=0), worker_env={"A": "1"}, seed=7,
                          walltime_grace=0.5, contention_model=ContentionModel(0.9, 0.2), heartbeat_period=0.25,
                          heartbeat_threshold=3, drain_period=3000)
    message = decode(encode(Configure(ManagerConfig.of_driver(topology).to_dict(), options.to_dict())))
    assert ManagerConfig.from_dict(message.config).topology().domains == topology.domains
    assert PoolOptions.from_dict(message.options) == options


def frame(header: bytes, blob: bytes = b"") -> bytes:
    return len(header).to_bytes(4, "big") + header + blob


@pytest.mark.parametrize("data, complaint", [
    (b"", "shorter than its header length"),
    (b"\x00\x00\x00\x09[1,2]", "header of 9 bytes"),
    (frame(b"abc"), "not JSON"),
    (frame(b'["nothing"]'), "not a node manager message"),
    (frame(b'["shutdown"]', b"x"), "carries no bytes"),
    (frame(b'["fatal",1,2]'), "has 1 fields"),
    (frame(b'["fatal",1]'), "field 'message' of a 'fatal' message must be str"),
    (frame(b'["heartbeat",[1],true,[],[]]'), "field 'respawns' of a 'heartbeat' message must be an integer"),
    (encode(Submit(1, footprint=math.nan)), "field 'footprint' of a 'submit' message must be a number"),
    (encode(Submit(1, runtime_spread=None)), "field 'runtime_spread' of a 'submit' message must be a number"),
    (encode(Submit(1, interference=(0.1, 0.2, 0.3, 0.4))),
     "field 'interference' of a 'submit' message must be a list of two or three numbers or null"),
    (encode(Submit(1, key=7)), "field 'key' of a 'submit' message must be a string or null"),
    # From a key holder these stopped the driver's hub thread (TypeError, RecursionError) before being refused here
    (frame(b'["started",1,[],[5],{},0,0]'), "field 'slot_cpus' of a 'started' message must be a list of lists of integers"),
    (frame(b'["register","0","h","1",1,["0"]]'), "field 'cpus' of a 'register' message must be a list of integers"),
    (frame(b'["heartbeat",[1],0,[0.5,"x"],[]]'), "field 'respawn_seconds' of a 'heartbeat' message must be a list"),
    (frame(b'["heartbeat",[1],0,[],[null]]'), "field 'retired_slots' of a 'heartbeat' message must be a list of int"),
    (frame(b'["failed",1,"WorkerDied","m",{"cpus":5},null,null,null,null,{}]'),
     "field 'detail.cpus' of a 'failed' message must be a list of integers, got 5"),
    (frame(b'["failed",1,"WorkerDied","m",{"pid":"42"},null,null,null,null,{}]'), "field 'detail.pid'"),
    (frame(b'["failed",1,"WorkerDied","m",{},null,null,null,null,{"cpus":{"deep":1}}]'),
     "field 'stats' of a 'failed' message must be"),
    (frame(b'["result",1,true,{"wall":{"deep":1}},0,0,0,1.0]'), "field 'stats' of a 'result' message must be"),
    (frame(b'["log",' + b"[" * 100_000 + b"]" * 100_000 + b',"a","b"]'), "nests deeper than 32 levels"),
    (frame(b'["log",' + b"[" * 40 + b"]" * 40 + b',"a","b"]'), "field 'level' of a 'log' message must be an int"),
    (frame(b'["started",1,[],[],' + b'{"a":' * 40 + b"1" + b"}" * 40 + b",0,0]"),
     "field 'topology' of a 'started' message nests deeper than 32 levels"),
    (frame(b'["fatal",' + b"[" * 30 + b"]" * 30 + b"]"), "field 'message' of a 'fatal' message must be str"),
])
def test_anything_else_fails_to_decode_naming_what_is_wrong(data, complaint):
    with pytest.raises(ValueError, match=complaint):
        decode(data)


def test_a_pickle_is_not_a_message_and_is_never_unpickled():
    class Boom:
        def __reduce__(self):
            return (exec, ("raise SystemExit('unpickled')",))

    with pytest.raises(ValueError):
        decode(pickle.dumps(("submit", Boom())))


def test_a_configuration_from_another_version_is_refused_naming_the_keys():
    with pytest.raises(ValueError, match=r"unknown keys \['gpus'\].*same scalpel-executor version"):
        ManagerConfig.from_dict({**ManagerConfig().to_dict(), "gpus": 2})
    with pytest.raises(ValueError, match=r"unknown keys \['gpus'\].*same scalpel-executor version"):
        PoolOptions.from_dict({**PoolOptions().to_dict(), "gpus": 2})


def test_manager_lost_pickles_and_keeps_its_fields():
    error = pickle.loads(pickle.dumps(NodeManagerLost("task 3 was lost", task_id=3, pid=99, cause="SIGKILL")))
    assert (str(error), error.task_id, error.pid, error.cause, error.manager_id) == \
        ("task 3 was lost", 3, 99, "SIGKILL", b"99")
