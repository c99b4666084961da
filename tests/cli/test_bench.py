"""``scalpel bench`` options: peers and mixes named, the plan a command line makes."""

import pytest

from scalpel_executor.cli.bench import _peers
from scalpel_executor.experiments.plans import SCALPEL_POLICIES


def test_peers_name_what_is_wrong():
    assert _peers("scalpel:*,htex-block") == [*(f"scalpel:{p}" for p in SCALPEL_POLICIES), "htex-block"]
    with pytest.raises(ValueError, match="unknown peer 'htex-blok' in --peers"):
        _peers("htex-blok")
    with pytest.raises(ValueError, match="'random' is not benchmarked"):
        _peers("scalpel:random")


def test_an_unknown_mix_is_refused_before_anything_runs(scalpel, tmp_path):
    code, _, err = scalpel("bench", "--mixes", "suite-3x", "--out", str(tmp_path / "out"))
    assert code == 2 and "unknown mix 'suite-3x' in --mixes" in err
    assert not (tmp_path / "out").exists()
