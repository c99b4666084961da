"""Test-wide settings: no test writes to the user's own profile store."""

import os
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
