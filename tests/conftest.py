"""Test-wide settings: no test writes to the user's own profile store."""

import importlib
import os
import pathlib
import sys
import tempfile

import pytest


@pytest.fixture(autouse=True, scope="session")
def _private_profile_store():
    """Point the default profile store at a throwaway file for the whole test session."""
    with tempfile.TemporaryDirectory(prefix="scalpel-test-store-") as folder:
        previous = os.environ.get("SCALPEL_PROFILE_STORE")
        os.environ["SCALPEL_PROFILE_STORE"] = os.path.join(folder, "profiles.sqlite")
        yield
        if previous is None:
            os.environ.pop("SCALPEL_PROFILE_STORE", None)
        else:
            os.environ["SCALPEL_PROFILE_STORE"] = previous


@pytest.fixture(scope="module")
def benchmark_module():
    """An importer for ``benchmarks/<name>.py``, with that folder on sys.path for the module's tests.

    Workers inherit the driver's sys.path, and they unpickle a benchmark's task functions by
    reference, so the folder must stay on the path while its tasks run.
    """
    folder = str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks")
    sys.path.insert(0, folder)
    try:
        yield importlib.import_module
    finally:
        sys.path.remove(folder)
