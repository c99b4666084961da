"""The streaming workflow's functions: fixed work, their own timestamps, and the reduce over their dicts."""

from scalpel_executor.workloads import streams


def test_each_task_stamps_itself_and_the_reduce_counts_them():
    normalised = streams.normalise(3, 1, 2)
    scored = streams.score(1, 64, 2)
    for result in (normalised, scored):
        assert result["t0"] <= result["t1"] and isinstance(result["cpu"], int)
    assert normalised["name"] == "normalise-3" and normalised["mib"] == 1 and scored["name"] == "score-1"
    assert streams.normalise(3, 1, 2)["level"] == normalised["level"]  # seeded: the same work every time
    collected = streams.collect(normalised, scored)
    assert collected["name"] == "collect" and (collected["normalised"], collected["scored"]) == (1, 1)
