"""The run report's rows, its count of waits for a measurement and its warning about profile keys that
hold tasks of different sizes."""

import dataclasses

from scalpel_executor.runtime.driver.report import TaskRecord, describe_mixed, measure_waits, mixed_keys, task_rows

MiB = 2**20


def record(task_id, key, footprint, wall, ok=True, started=10.0):
    return TaskRecord(task_id=task_id, slot=0, domain=0, cpu=0, started=started, finished=started + wall,
                      footprint=0.0, runtime=1.0, ok=ok, stats={"footprint": footprint, "wall": wall},
                      profile_key=key, memory=512 * MiB)


def never_started(task_id):
    return TaskRecord(task_id=task_id, slot=None, domain=None, cpu=None, started=None, finished=20.0, footprint=0.0,
                      runtime=1.0, ok=False, stats={})


def test_a_key_whose_tasks_measured_four_times_apart_is_named_with_its_range():
    records = [record(1, "smooth(dict9)", 4 * MiB, 0.2), record(2, "smooth(dict9)", 320 * MiB, 15.0),
               record(3, "fft(array)", 2 * MiB, 0.3), record(4, "fft(array)", 2.5 * MiB, 0.35),
               record(5, "tiny", 1 * MiB, 0.01), record(6, "tiny", 6 * MiB, 0.2),  # apart, but too small to matter
               record(7, "failed", 1 * MiB, 0.1), record(8, "failed", 900 * MiB, 9.0, ok=False)]
    (entry,) = mixed_keys(records)
    assert entry == {"profile_key": "smooth(dict9)", "tasks": 2, "footprint": [4 * MiB, 320 * MiB],
                     "runtime": [0.2, 15.0]}
    assert describe_mixed(entry) == "2 tasks, 4.0 MiB to 320.0 MiB, 0.2 s to 15 s"


def test_rows_give_times_since_the_first_start_and_memory_in_mib():
    rows = task_rows([record(2, "k", MiB, 1.5, started=12.0), record(1, "k", MiB, 1.0, started=10.0),
                      never_started(3)])
    assert [(r["task_id"], r["started"], r["finished"]) for r in rows] == [(1, 0.0, 1.0), (2, 2.0, 3.5), (3, None, 10.0)]
    assert rows[0]["memory_mib"] == 512.0


def test_a_row_says_how_long_its_task_waited_from_submit_to_start():
    waited = dataclasses.replace(record(1, "k", MiB, 1.0, started=12.5), submitted=10.0)
    unsubmitted = record(2, "k", MiB, 1.0, started=13.0)
    never = dataclasses.replace(never_started(3), submitted=11.0)
    assert [row["waited"] for row in task_rows([waited, unsubmitted, never])] == [2.5, None, None]


def test_waits_for_a_measurement_are_counted_with_their_seconds():
    waited = record(1, "lookup", MiB, 1.0)
    waited.stats["measure_wait"] = 0.12
    rows = task_rows([waited, record(2, "fft", MiB, 0.5)])
    assert [r["measure_wait"] for r in rows] == [0.12, 0.0]
    assert measure_waits([waited, record(2, "fft", MiB, 0.5)]) == {"count": 1, "seconds": 0.12}
    assert measure_waits([]) == {"count": 0, "seconds": 0}
