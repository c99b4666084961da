"""ScalpelExecutor(contention_model=...): the model the scalpel policy plans with, in every mode."""

import json

import pytest

from scalpel_executor import ContentionModel
from scalpel_executor.runtime.executor import ScalpelExecutor
from scalpel_executor.runtime.manager import ManagerConfig


@pytest.mark.parametrize("node_manager", [True, False])
def test_a_calibration_file_becomes_the_planning_model(tmp_path, node_manager):
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"capacity_fraction": 0.892, "sensitivity": 0.179}))
    executor = ScalpelExecutor(topology=[[0]], contention_model=str(path), node_manager=node_manager)
    assert executor.contention_model == ContentionModel(0.892, 0.179)
    executor.start()
    try:
        assert executor.submit(len, {}, "ab").result(timeout=60) == 2
        if node_manager:  # what the manager's pool plans with (test_the_node_manager_is_told_the_model)
            assert executor.pool._config.contention_model == [0.892, 0.179]
        else:
            assert executor.pool._scheduler._context.model == ContentionModel(0.892, 0.179)
    finally:
        executor.shutdown()


def test_the_default_and_an_object_are_taken_as_they_are():
    assert ScalpelExecutor(topology=[[0]]).contention_model == ContentionModel()
    model = ContentionModel(0.3, 2.0)
    assert ScalpelExecutor(topology=[[0]], contention_model=model).contention_model is model


@pytest.mark.parametrize("content, message", [
    (None, "cannot read"),
    ("{not json", "is not JSON"),
    (json.dumps({"capacity_fraction": 0.5}), "not a calibration document"),
    (json.dumps({"capacity_fraction": "x", "sensitivity": 1}), "capacity_fraction must be a finite number"),
])
def test_a_bad_calibration_file_is_named(tmp_path, content, message):
    path = tmp_path / "model.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ValueError, match=message) as raised:
        ScalpelExecutor(topology=[[0]], contention_model=path)
    assert str(path) in str(raised.value) and "contention_model" in str(raised.value)


def test_the_node_manager_is_told_the_model():
    config = ManagerConfig.from_dict(ManagerConfig(contention_model=[0.9, 0.2]).to_dict())
    assert config.contention_model == [0.9, 0.2]
    assert ManagerConfig().contention_model is None  # the manager's pool then plans with the default
