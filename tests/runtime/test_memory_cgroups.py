"""enforce_memory with a memory cgroup: resident memory, not address space.

The live tests run on this host's own memory cgroup (v1 or v2, whichever is usable; skipped, with
the reason, where none is); the v2 file logic and every "not usable" reason run on fake trees
shaped like /sys/fs/cgroup."""

import errno
import os
import re

import parsl
import pytest
from parsl import python_app
from parsl.config import Config

from scalpel_executor import MemoryExceeded, ScalpelExecutor
from scalpel_executor.host import cgroups
from scalpel_executor.host.cgroups import V1, V2, MemoryCgroup, find_memory_cgroup

MiB = 2**20
USABLE, REASONS = find_memory_cgroup()
needs_cgroup = pytest.mark.skipif(USABLE is None, reason=f"no usable memory cgroup here: {'; '.join(REASONS)}")


# -- fake trees ---------------------------------------------------------------------------------

def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as file:
        file.write(text)


def read(path):
    with open(path) as file:
        return file.read()


def v2_tree(tmp_path, controllers="cpu io memory pids", subtree="", own="/job/step"):
    """A host with only the unified hierarchy at <tmp>/sys/fs/cgroup, this process in ``own``."""
    root = tmp_path / "sys/fs/cgroup"
    here = os.path.join(str(root), own.lstrip("/"))
    for name, text in {"cgroup.controllers": controllers, "cgroup.subtree_control": subtree, "cgroup.procs": "1\n",
                       "memory.current": "52428800\n", "memory.max": "max\n", "memory.swap.max": "max\n",
                       "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n"}.items():
        write(os.path.join(here, name), text)
    write(str(tmp_path / "mounts"), f"sysfs /sys sysfs rw 0 0\ncgroup2 {root} cgroup2 rw,nosuid 0 0\n")
    write(str(tmp_path / "cgroup"), f"0::{own}\n")
    return str(tmp_path / "mounts"), str(tmp_path / "cgroup"), here


def v1_tree(tmp_path, oom_control="oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"):
    """A host with the v1 memory hierarchy at <tmp>/memory and cgroup2 mounted without memory."""
    unified, memory = tmp_path / "unified", tmp_path / "memory"
    write(str(unified / "cgroup.controllers"), "hugetlb\n")
    here = str(memory / "slurm/job_7")
    for name, text in {"memory.limit_in_bytes": "9223372036854771712\n", "memory.usage_in_bytes": "1048576\n",
                       "memory.memsw.limit_in_bytes": "9223372036854771712\n",
                       "memory.oom_control": oom_control, "memory.failcnt": "5\n", "cgroup.procs": ""}.items():
        write(os.path.join(here, name), text)
    write(str(tmp_path / "mounts"), f"cgroup2 {unified} cgroup2 rw 0 0\ncgroup {tmp_path}/cpu cgroup rw,cpu 0 0\n"
                                     f"cgroup {memory} cgroup rw,nosuid,memory 0 0\n")
    write(str(tmp_path / "cgroup"), "5:cpu:/\n4:memory:/slurm/job_7\n0::/\n")
    return str(tmp_path / "mounts"), str(tmp_path / "cgroup"), here


def test_v2_is_found_where_the_process_cgroup_can_give_its_children_memory(tmp_path):
    mounts, membership, here = v2_tree(tmp_path)
    found, reasons = find_memory_cgroup(mounts, membership)
    assert found == MemoryCgroup(here, V2) and reasons == [f"cgroup v2 at {here}"]
    assert read(os.path.join(here, "cgroup.subtree_control")) == "+memory"


def test_v2_file_logic_usage_limit_oom_kills_and_a_workers_child(tmp_path):
    mounts, membership, here = v2_tree(tmp_path, subtree="memory pids")
    found, _ = find_memory_cgroup(mounts, membership)
    assert read(os.path.join(here, "cgroup.subtree_control")) == "memory pids"  # already delegated: untouched
    assert found.usage() == 50 * MiB and found.limit() is None and found.oom_kills() == 0
    found.set_limit(300 * MiB)
    assert read(os.path.join(here, "memory.max")) == str(300 * MiB) and found.limit() == 300 * MiB
    assert read(os.path.join(here, "memory.swap.max")) == "0"  # past its limit a task stops, not swaps
    found.set_limit(None)
    assert read(os.path.join(here, "memory.max")) == "max" and found.limit() is None
    assert read(os.path.join(here, "memory.swap.max")) == "max"
    write(os.path.join(here, "memory.events"), "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n")
    assert found.oom_kills() == 1
    write(os.path.join(here, "cgroup.subtree_control"), "memory")
    pool = found.child("scalpel-1")
    write(os.path.join(pool.path, "cgroup.subtree_control"), "")  # what the kernel creates
    pool.delegate()
    worker = pool.child(cgroups.worker_name(0, 42))
    assert worker.path == os.path.join(here, "scalpel-1", "worker-0-42") and worker.version == V2
    assert read(os.path.join(pool.path, "cgroup.subtree_control")) == "+memory"  # the worker gets memory.max
    assert read(os.path.join(worker.path, "memory.oom.group")) == "1"  # the OOM kill takes the whole worker
    worker.add(42)
    assert read(os.path.join(worker.path, "cgroup.procs")) == "42"
    assert MemoryCgroup.from_env(worker.to_env()) == worker


@pytest.mark.parametrize("case, reason", [
    ("unmounted", "cgroup v2: not mounted"),
    ("no memory", "cgroup v2: the memory controller is not available in {here} (controllers: cpu io pids; "
                  "bound to cgroup v1, or not delegated to this cgroup)"),
    ("busy", "cgroup v2: cannot give {here}'s children the memory controller: it holds processes (this one among "
             "them), and the kernel gives a v2 cgroup's children a controller only while it holds none; the "
             "executor does not move its own process out"),
    ("no membership", "cgroup v2: this process is in no v2 cgroup ({membership} has no 0::/path line)"),
])
def test_v2_not_usable_says_why_and_nothing_is_found_without_v1(tmp_path, monkeypatch, case, reason):
    controllers = "cpu io pids" if case == "no memory" else "cpu io memory pids"
    mounts, membership, here = v2_tree(tmp_path, controllers=controllers)
    if case == "unmounted":
        write(mounts, "sysfs /sys sysfs rw 0 0\n")
    if case == "no membership":
        write(membership, "1:name=systemd:/\n")
    if case == "busy":  # what the kernel answers for a cgroup with processes; a fake tree cannot
        def refuse(path):
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY))
        monkeypatch.setattr(cgroups, "_enable_memory", refuse)
    found, reasons = find_memory_cgroup(mounts, membership)
    assert found is None
    assert reasons == [reason.format(here=here, membership=membership), "cgroup v1: no memory hierarchy is mounted"]


def test_v1_is_the_fallback_and_an_old_kernel_counts_failcnt(tmp_path, monkeypatch):
    mounts, membership, here = v1_tree(tmp_path)
    found, reasons = find_memory_cgroup(mounts, membership)
    assert found == MemoryCgroup(here, V1)
    assert reasons[0].startswith("cgroup v2: the memory controller is not available")
    assert reasons[1] == f"cgroup v1 at {here}"
    assert found.usage() == MiB and found.limit() is None and found.oom_kills() == 2
    found.set_limit(200 * MiB)
    assert found.limit() == 200 * MiB and read(os.path.join(here, "memory.memsw.limit_in_bytes")) == str(200 * MiB)
    found.set_limit(None)
    assert read(os.path.join(here, "memory.limit_in_bytes")) == "-1"
    assert read(os.path.join(here, "memory.memsw.limit_in_bytes")) == "-1"
    write(os.path.join(here, "memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\n")  # before 4.13
    assert found.oom_kills() == 5
    monkeypatch.setattr(cgroups.os, "access", lambda path, mode: False)
    found, reasons = find_memory_cgroup(mounts, membership)
    assert found is None and reasons[1] == f"cgroup v1: {here} is not writable by this user (uid {os.getuid()})"


# -- this host's own memory cgroup --------------------------------------------------------------

@python_app(executors=["scalpel"])
def touch(mib, seconds=0.0, parsl_resource_specification={}):
    """Write ``mib`` MiB (every page resident), hold it ``seconds``; the worker's pid."""
    import os
    import time

    data = b"\x01" * (mib * 2**20)
    time.sleep(seconds)
    del data
    return os.getpid()


@python_app(executors=["scalpel"])
def map_and_touch(map_mib, touch_mib, parsl_resource_specification={}):
    """Map ``map_mib`` MiB of anonymous memory and write only its first ``touch_mib`` MiB."""
    import mmap

    region = mmap.mmap(-1, map_mib * 2**20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    region[:touch_mib * 2**20] = b"\x01" * (touch_mib * 2**20)
    region.close()
    return touch_mib


def load(tmp_path, node_manager):
    executor = ScalpelExecutor(label="scalpel", topology="1x2:32MiB", profiles=False, node_manager=node_manager,
                               probe=False, enforce_memory=True)
    return executor, parsl.load(Config(executors=[executor], run_dir=str(tmp_path / "run")))


def our_cgroups():
    """Every scalpel-<pid>-<pool id> cgroup under this process's memory cgroup (none after a pool's shutdown)."""
    return sorted(entry.name for entry in os.scandir(USABLE.path) if entry.name.startswith("scalpel-"))


@needs_cgroup
@pytest.mark.parametrize("node_manager", [True, False])
def test_a_task_past_its_declaration_is_oom_killed_alone_and_its_worker_replaced(tmp_path, node_manager):
    before = our_cgroups()
    executor, dfk = load(tmp_path, node_manager)
    try:
        neighbour = touch(16, 3.0, parsl_resource_specification={"memory": 64})
        over = touch(512, parsl_resource_specification={"memory": 64})
        with pytest.raises(MemoryExceeded) as raised:
            over.result(timeout=120)
        neighbour_pid = neighbour.result(timeout=120)
        after = [touch(16, 1.0, parsl_resource_specification={"memory": 64}) for _ in range(2)]
        after_pids = {f.result(timeout=120) for f in after}
        pool = executor._pool
        respawns, retired = pool.respawns, set(pool.retired_slots)
    finally:
        dfk.cleanup()
        parsl.clear()
    error = raised.value
    message = str(error)
    assert re.match(rf"task 1 \(touch\) allocated past its declared memory of 64 MiB \(enforce_memory=True: {USABLE.version} "
                    r"limit of \d+ MiB, .*the kernel's OOM killer ended its worker \(pid \d+\)", message), message
    assert error.mechanism == USABLE.version and error.declared == 64 * MiB and error.limit > 64 * MiB
    dead = int(re.search(r"worker \(pid (\d+)\)", message).group(1))
    assert dead != neighbour_pid and dead not in after_pids and after_pids - {neighbour_pid}  # the replacement ran one
    assert respawns == 1 and not retired  # a replacement after an OOM kill is no failed start
    assert our_cgroups() == before


@needs_cgroup
def test_a_task_that_maps_much_more_than_it_touches_runs_under_the_cgroup_limit(tmp_path):
    executor, dfk = load(tmp_path, node_manager=True)
    try:
        assert map_and_touch(4096, 10, parsl_resource_specification={"memory": 64}).result(timeout=120) == 10
    finally:
        dfk.cleanup()
        parsl.clear()


def test_under_rlimit_as_the_same_task_fails_which_is_why_a_cgroup_comes_first(tmp_path, monkeypatch, caplog):
    from scalpel_executor.runtime.node import pool

    monkeypatch.setattr(pool, "find_memory_cgroup", lambda: (None, ["cgroup v2: not mounted", "cgroup v1: none here"]))
    with caplog.at_level("INFO", logger="scalpel_executor"):
        executor, dfk = load(tmp_path, node_manager=False)
    try:
        mapped = map_and_touch(4096, 10, parsl_resource_specification={"memory": 64})
        with pytest.raises(OSError, match="Cannot allocate memory"):
            mapped.result(timeout=120)
        with pytest.raises(MemoryExceeded, match=r"task 1 \(touch\) allocated past its declared memory of 64 MiB "
                                                  r"\(enforce_memory=True: RLIMIT_AS limit of \d+ MiB") as raised:
            touch(512, parsl_resource_specification={"memory": 64}).result(timeout=120)
    finally:
        dfk.cleanup()
        parsl.clear()
    assert raised.value.mechanism == "RLIMIT_AS"
    assert ("enforce_memory: declared memory is enforced with RLIMIT_AS (address space, not resident memory), no "
            "memory cgroup being usable: cgroup v2: not mounted; cgroup v1: none here") in caplog.text


@python_app(executors=["scalpel"])
def start_program(mib, parsl_resource_specification={}):
    """Run a program that writes ``mib`` MiB (as a bash_app's command would); the worker's pid."""
    import os
    import subprocess
    import sys

    subprocess.run([sys.executable, "-c", f"data = b'1' * ({mib} << 20)"], check=True)
    return os.getpid()


@needs_cgroup
def test_a_program_the_task_started_killed_at_the_limit_fails_the_task_with_memory_exceeded(tmp_path):
    executor, dfk = load(tmp_path, node_manager=False)
    try:
        worker = start_program(16, parsl_resource_specification={"memory": 64}).result(timeout=120)
        with pytest.raises(MemoryExceeded) as raised:
            start_program(512, parsl_resource_specification={"memory": 64}).result(timeout=120)
        pids = set(executor._pool.worker_pids)
    finally:
        dfk.cleanup()
        parsl.clear()
    assert raised.value.mechanism == USABLE.version
    if USABLE.version == V1:  # the OOM killer took the program, the largest process: the worker lives on
        assert "the kernel's OOM killer ended a process the task started" in str(raised.value)
        assert worker in pids


@needs_cgroup
def test_cgroups_of_a_pool_killed_before_its_shutdown_are_removed_by_the_next(tmp_path):
    import subprocess

    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = USABLE.child(cgroups.pool_name(gone.pid, "deadbeef0001"))
    stale.child(cgroups.worker_name(0, 1))
    live = USABLE.child(cgroups.pool_name(os.getpid(), "deadbeef0002"))
    try:
        USABLE.remove_stale_pools()
        assert not os.path.exists(stale.path) and os.path.exists(live.path)
    finally:
        assert stale.remove() and live.remove()


@python_app(executors=["scalpel"])
def read_own_limit(pool_path, kill_as_oom=False, parsl_resource_specification={}):
    """The memory.max of this worker's cgroup in a fake tree, while the task runs; with
    ``kill_as_oom``, count an OOM kill there and die as the OOM killer's victim does."""
    import glob
    import os
    import signal

    (own,) = glob.glob(os.path.join(pool_path, f"worker-*-{os.getpid()}"))
    if kill_as_oom:
        with open(os.path.join(own, "memory.events"), "w") as events:
            events.write("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
        os.kill(os.getpid(), signal.SIGKILL)
    with open(os.path.join(own, "memory.max")) as limit:
        return own, limit.read()


def on_a_fake_v2_tree(tmp_path, monkeypatch):
    """Make the pool find a fake v2 tree whose new cgroups are filled as the kernel fills them; the
    directory the pool's cgroup goes into."""
    from scalpel_executor.runtime.node import pool

    mounts, membership, here = v2_tree(tmp_path)
    made = MemoryCgroup.child

    def child_as_the_kernel_makes_it(self, name):  # a real cgroupfs fills a new directory itself
        cgroup = made(self, name)
        for file, text in {"cgroup.subtree_control": "", "cgroup.procs": "", "memory.current": "10485760\n",
                           "memory.max": "max\n", "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"}.items():
            if not os.path.exists(os.path.join(cgroup.path, file)):
                write(os.path.join(cgroup.path, file), text)
        return cgroup

    monkeypatch.setattr(MemoryCgroup, "child", child_as_the_kernel_makes_it)
    monkeypatch.setattr(pool, "find_memory_cgroup", lambda: find_memory_cgroup(mounts, membership))
    monkeypatch.setattr(pool, "CGROUP_REMOVAL_WAIT", 0.0)  # a fake tree's directories hold files: never removable
    return here


def test_v2_through_the_executor_on_a_fake_tree_limit_set_lifted_and_an_oom_kill_named(tmp_path, monkeypatch):
    """The pool and its workers on a fake v2 tree: the worker limits its own cgroup for the task and
    lifts it after; a worker that dies as an OOM-killed one does fails its task with MemoryExceeded."""
    here = on_a_fake_v2_tree(tmp_path, monkeypatch)
    executor, dfk = load(tmp_path, node_manager=False)
    try:
        pool_path = executor._pool.memory_cgroup.path
        assert executor._pool.memory_cgroup.version == V2 and os.path.dirname(pool_path) == here
        own, during = read_own_limit(pool_path, parsl_resource_specification={"memory": 64}).result(timeout=120)
        after = read(os.path.join(own, "memory.max"))
        _, undeclared = read_own_limit(pool_path).result(timeout=120)
        with pytest.raises(MemoryExceeded) as raised:
            read_own_limit(pool_path, True, parsl_resource_specification={"memory": 64}).result(timeout=120)
    finally:
        dfk.cleanup()
        parsl.clear()
    assert int(during) == (10 + 64) * MiB + cgroups.TASK_MARGIN  # usage then + declaration + margin
    assert after == "max" and undeclared.strip() == "max"  # lifted after the task; an undeclared one runs unlimited
    assert re.match(r"task 2 \(read_own_limit\) allocated past its declared memory of 64 MiB \(enforce_memory=True: cgroup v2 limit of "
                    r"138 MiB, the worker's 10 MiB before it .*the kernel's OOM killer ended its worker", str(raised.value))


@python_app(executors=["scalpel"])
def count_oom_kills_then(pool_path, die=False, parsl_resource_specification={}):
    """Count an OOM kill in every worker cgroup of the pool (an earlier task's program killed at
    its limit, its worker living on), or die by SIGKILL with no OOM kill counted."""
    import glob
    import os
    import signal

    if die:
        os.kill(os.getpid(), signal.SIGKILL)
    for own in glob.glob(os.path.join(pool_path, "worker-*")):
        with open(os.path.join(own, "memory.events"), "w") as events:
            events.write("low 0\nhigh 0\nmax 1\noom 1\noom_kill 1\n")


def test_a_worker_killed_after_an_earlier_oom_kill_in_its_cgroup_is_no_memory_exceeded(tmp_path, monkeypatch):
    """A worker cgroup counts OOM kills for its life: a task with a memory limit whose worker is
    SIGKILLed by someone else is not blamed for a kill an earlier task's program met."""
    from scalpel_executor.runtime.errors import WorkerDied

    on_a_fake_v2_tree(tmp_path, monkeypatch)
    executor, dfk = load(tmp_path, node_manager=False)
    try:
        pool_path = executor._pool.memory_cgroup.path
        count_oom_kills_then(pool_path, parsl_resource_specification={"memory": 64}).result(timeout=120)
        with pytest.raises(WorkerDied) as raised:
            count_oom_kills_then(pool_path, True, parsl_resource_specification={"memory": 64}).result(timeout=120)
    finally:
        dfk.cleanup()
        parsl.clear()
    assert not isinstance(raised.value, MemoryExceeded)
