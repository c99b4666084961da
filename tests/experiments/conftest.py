"""Fixtures for the benchmark tests: the scripts under ``benchmarks/`` loaded as modules."""

import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def load_benchmark():
    """``load_benchmark(name)``: ``benchmarks/<name>.py``, executed afresh as a module named ``name``."""
    return _load

