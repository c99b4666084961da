"""The machine presets build the machines they claim, and xeon16's model is the fit to its measured surface."""

import json
import pathlib

import pytest

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.machines import (MACHINES, XEON16_FIT_RMS, fit_k_copies, k_copies_points, k_copies_rms,
                                            k_copies_slowdown)

MiB = 2 ** 20
SURFACE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "data" / "xeon16-spmv-corun-surface.json"


@pytest.fixture(scope="module")
def surface_points():
    return k_copies_points(json.loads(SURFACE.read_text())["slowdown"])


@pytest.mark.parametrize("name, domains, cores, llc_mib", [
    ("paper", 2, 4, 12),     # 2 x Xeon E5620: 4 cores sharing 12 MB L3 each
    ("wide", 8, 8, 32),
    ("epyc", 16, 8, 32),     # 2 sockets x 8 CCDs, 32 MiB L3 per CCD
    ("xeon16", 1, 16, 300),  # one L3 for all 16 CPUs
])
def test_each_preset_builds_the_topology_it_claims(name, domains, cores, llc_mib):
    machine = MACHINES[name]
    topology = machine.topology()
    assert machine.name == name
    assert topology.cores_per_domain == (cores,) * domains
    assert topology.llc_size == llc_mib * MiB
    assert len({cpu for d in topology.domains for cpu in d.cpus}) == domains * cores  # no CPU in two domains
    assert f"{llc_mib} MiB" in machine.description and "\n" not in machine.description


def test_unfitted_presets_use_the_package_default_model_and_say_so():
    for name in ("paper", "wide", "epyc"):
        assert MACHINES[name].model == ContentionModel()
        assert "rho 0.5, sigma 1" in MACHINES[name].description


def test_xeon16_model_reproduces_the_measured_surface_within_its_stated_rms(surface_points):
    machine = MACHINES["xeon16"]
    llc = machine.topology().llc_size
    assert len(surface_points) == 24  # 6 footprints x k = 2, 4, 8, 16
    error = k_copies_rms(machine.model, surface_points, llc)
    assert error <= XEON16_FIT_RMS + 5e-5  # the constants are rounded to 4 digits
    assert error < k_copies_rms(ContentionModel(), surface_points, llc)  # the fit beats the default
    rho, sigma = machine.model.capacity_fraction, machine.model.sensitivity
    assert f"rho {rho}, sigma {sigma}, rms error {XEON16_FIT_RMS}" in machine.description


def test_xeon16_constants_are_what_the_fit_gives_on_the_surface(surface_points):
    machine = MACHINES["xeon16"]
    fitted, error = fit_k_copies(surface_points, machine.topology().llc_size)
    assert fitted.capacity_fraction == pytest.approx(machine.model.capacity_fraction, abs=5e-5)
    assert fitted.sensitivity == pytest.approx(machine.model.sensitivity, abs=5e-5)
    assert error == pytest.approx(XEON16_FIT_RMS, abs=5e-5)


def test_the_fit_recovers_a_model_from_its_own_predictions():
    llc = 64 * MiB
    truth = ContentionModel(0.7, 1.5)
    points = [(f * MiB, k, k_copies_slowdown(truth, f * MiB, k, llc)) for f in (4, 16, 32, 64) for k in (2, 4, 8)]
    fitted, error = fit_k_copies(points, llc)
    assert error < 1e-3
    assert fitted.capacity_fraction == pytest.approx(0.7, rel=0.01)
    assert fitted.sensitivity == pytest.approx(1.5, rel=0.01)


def test_points_skip_the_single_copy_reference_and_the_fit_refuses_none():
    assert k_copies_points({"8": {"1": 1.0, "2": 1.25}}) == [(8.0 * MiB, 2, 1.25)]
    with pytest.raises(ValueError, match="no co-run points"):
        fit_k_copies([], 64 * MiB)
