"""The user-workflow functions: fixed work, their own timestamps, results that feed the next step."""

from types import SimpleNamespace

from scalpel_executor.workloads import lookups


def test_each_step_stamps_itself_and_feeds_the_next(tmp_path):
    looked = lookups.lookup(3, 1, 2)
    refined = lookups.refine(looked, 1024, 2)
    spectrum = lookups.spectrum(256, 1, 2)
    product = lookups.product(32, 1, 2)
    for result in (looked, refined, spectrum, product):
        assert result["t0"] <= result["t1"] and isinstance(result["cpu"], int)
    assert looked["name"] == "lookup-3" and refined["name"] == "refine-3" and looked["mib"] == 1
    assert lookups.lookup(3, 1, 2)["total"] == looked["total"]  # seeded: the same work every time
    line = tmp_path / "line.txt"
    command = lookups.summary_line(refined, outputs=[SimpleNamespace(filepath=str(line))])
    assert command.startswith("echo ") and str(line) in command
    line.write_text(f"refine-3 {refined['t0']} {refined['t1']}\n")
    assert lookups.reduce_summaries(inputs=[SimpleNamespace(filepath=str(line))])["names"] == ["refine-3"]
