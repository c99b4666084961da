"""Test-wide settings: no test writes to the user's own profile store; under CI, property tests
draw the same examples every run.

Hypothesis draws new examples each run, which is what finds a bug at a developer's desk (a failing
example is kept in ``.hypothesis/`` and replayed there). CI (``CI`` set, as ``.ci/run`` sets it)
derandomizes instead, so a submission's verdict does not depend on the draw: a property whose
rare counterexample a random run finds once in dozens fails a developer's run, not a landing.
"""

import os
import tempfile

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


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
