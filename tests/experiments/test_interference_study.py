"""The interference study's instances: three plannings of one scored run, learned from earlier runs only."""

from scalpel_executor.experiments.interference_study import PLANNINGS, plant, run_instance, summarise


def test_planting_is_seeded_and_uses_every_class():
    keys = [f"k{i}" for i in range(60)]
    assert plant(keys, 3) == plant(list(reversed(keys)), 3)
    assert {kind for kind, _ in plant(keys, 3).values()} == {"stream", "sensitive", "asymmetric", "plain"}


def test_on_footprint_truth_the_learned_plan_is_todays_and_planted_residuals_are_learned():
    today = run_instance("paper", "batch", 0, False)
    assert today["choice"]["model"] == "footprint"
    assert len(set(today["makespans"].values())) == 1  # nothing learned, nothing planted: one plan
    planted = run_instance("paper", "batch", 0, True)
    assert planted["coruns"] >= 30 and set(planted["makespans"]) == set(PLANNINGS)
    summary = summarise([today, planted])
    assert summary["footprint_truth"]["all"]["learned_over_today"] == 1.0
    assert summary["planted"]["all"]["instances"] == 1
