"""Fixtures of the integration tests: the Slurm cluster (see slurm_cluster.py for the decision)."""

import pytest

from tests.integration.slurm_cluster import SKIP_REASON, provide_cluster


@pytest.fixture(scope="session")
def _slurm_cluster_for_session():
    yield from provide_cluster()


@pytest.fixture
def slurm_cluster(_slurm_cluster_for_session):
    """The Slurm cluster to submit blocks to (a SlurmCluster); skips the test when there is none."""
    if _slurm_cluster_for_session is None:
        pytest.skip(SKIP_REASON)
    return _slurm_cluster_for_session
