"""The Gantt chart (:func:`scalpel_executor.experiments.charts.draw_gantt`): a task of several cores
drawn on each of them, its footprint counted once in its domain's running footprint."""

import matplotlib.axes

from scalpel_executor.experiments.charts import draw_gantt


def test_a_task_of_several_cores_is_a_bar_on_each_and_its_footprint_counts_once(tmp_path, monkeypatch):
    bars, steps = [], []
    barh, step = matplotlib.axes.Axes.barh, matplotlib.axes.Axes.step
    monkeypatch.setattr(matplotlib.axes.Axes, "barh",
                        lambda self, y, width, **kw: bars.append((y, kw["left"], width)) or barh(self, y, width, **kw))
    monkeypatch.setattr(matplotlib.axes.Axes, "step",
                        lambda self, x, y, **kw: steps.append((list(x), list(y))) or step(self, x, y, **kw))
    rows = [{"cpu": 1, "cpus": [1, 2], "start": 0.0, "end": 2.0, "footprint": 8 * 2**20, "label": "wide"},
            {"cpu": 0, "start": 1.0, "end": 3.0, "footprint": 4 * 2**20, "label": "narrow"}]  # no "cpus": its cpu
    path = draw_gantt({"run": rows}, 32 * 2**20, [[0, 1, 2, 3]], tmp_path / "g.png", clock="s")
    assert (tmp_path / "g.png").read_bytes().startswith(b"\x89PNG") and path == tmp_path / "g.png"
    assert sorted(bars) == [(0, 1.0, 2.0), (1, 0.0, 2.0), (2, 0.0, 2.0)]  # lanes are CPUs 0-3 in order
    ((events, mib),) = steps
    assert events == [0.0, 1.0, 2.0, 3.0, 3.06] and mib == [8.0, 12.0, 4.0, 0.0, 0.0]
