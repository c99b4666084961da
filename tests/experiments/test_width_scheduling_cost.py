"""benchmarks/width_scheduling_cost.py: the scheduler's CPU per start on a malleable batch, with
and without the rollout limit, its rollouts counted, and the limit put back afterwards."""

import pytest

from scalpel_executor.core import scheduler


def test_the_limit_is_what_keeps_the_rollouts_short_and_is_put_back(capsys, load_benchmark):
    bench = load_benchmark("width_scheduling_cost")
    limit = scheduler.MALLEABLE_ROLLOUT_LIMIT
    limited = bench.measure("batch-6", "paper", 100, 50, 8)
    unlimited = bench.measure("batch-6", "paper", 100, 50, scheduler.ROLLOUT_LIMIT)
    assert limited["tasks"] == unlimited["tasks"] == 48
    assert limited["longest"] <= 8 < unlimited["longest"]
    assert scheduler.MALLEABLE_ROLLOUT_LIMIT == limit and scheduler.MulticoreEvaluator.__name__ == "MulticoreEvaluator"
    assert bench.main(["--workload", "batch-6", "--machine", "paper", "--limits", "8", "512"]) == 0
    out = capsys.readouterr().out
    assert "CPU ms per start" in out and "| " in out


def test_a_negative_limit_is_refused(load_benchmark):
    with pytest.raises(SystemExit) as ended:
        load_benchmark("width_scheduling_cost").main(["--machine", "paper", "--limits", "-1"])
    assert ended.value.code == 2
