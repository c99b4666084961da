"""The Montage mosaic pipeline: synthetic sky, Montage tables, the DAG, and a real run under Parsl."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import parsl
import pytest
from parsl.config import Config
from parsl.executors import ThreadPoolExecutor

from scalpel_executor.workloads import montage
from scalpel_executor.workloads.montage import apps, toolkit
from scalpel_executor.workloads.montage import (
    STAGES,
    MontageStepFailed,
    MontageUnavailable,
    SkyPlan,
    check_background,
    dag_summary,
    grid_shape,
    mosaic_pipeline,
    read_montage_table,
    render_tile,
    require_montage,
    write_fit_table,
)

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "montage" / "mosaic.py"
HAVE_ASTROPY = importlib.util.find_spec("astropy") is not None
HAVE_MONTAGE = HAVE_ASTROPY and importlib.util.find_spec("MontagePy") is not None
needs_astropy = pytest.mark.skipif(not HAVE_ASTROPY, reason=f"needs astropy: {montage.INSTALL_HINT}")
needs_montage = pytest.mark.skipif(not HAVE_MONTAGE, reason=f"needs MontagePy: {montage.INSTALL_HINT}")


def child_env():
    """Environment for a child Python that must import this checkout's scalpel_executor."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


# ---- the synthetic sky ----------------------------------------------------------------------


@pytest.mark.parametrize("n, shape", [(2, (1, 2)), (4, (2, 2)), (16, (4, 4)), (17, (4, 5)), (20, (4, 5)),
                                      (400, (20, 20))])
def test_grid_is_the_squarest_that_holds_every_tile(n, shape):
    rows, cols = grid_shape(n)
    assert (rows, cols) == shape
    assert rows * cols >= n > (rows - 1) * cols


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "4"])
def test_grid_rejects_a_bad_tile_count_by_value(bad):
    with pytest.raises(ValueError, match=repr(bad).replace("(", r"\(")):
        grid_shape(bad)


@pytest.mark.parametrize("field, value, fix", [("n_tiles", 1, ">= 2"), ("tile_pixels", 8, ">= 32"),
                                               ("overlap", 0.7, r"\[0.05, 0.5\)"),
                                               ("noise_sigma", -1.0, "positive")])
def test_plan_names_the_bad_field_its_value_and_the_range(field, value, fix):
    with pytest.raises(ValueError, match=rf"{field} must be .*{fix}.*got {value!r}"):
        SkyPlan(**{"n_tiles": 4, field: value})


def test_plan_is_deterministic_from_its_seed_and_survives_json():
    plan = SkyPlan(n_tiles=9, seed=7)
    assert SkyPlan.from_json(plan.to_json()) == plan
    np.testing.assert_array_equal(plan.background_offsets(), SkyPlan(n_tiles=9, seed=7).background_offsets())
    assert not np.allclose(plan.background_offsets(), SkyPlan(n_tiles=9, seed=8).background_offsets())
    offsets = plan.background_offsets()
    assert offsets.shape == (9,) and np.all(np.abs(offsets) <= plan.offset_range)


@needs_astropy
def test_tiles_are_reproducible_and_carry_their_offset():
    plan = SkyPlan(n_tiles=4, seed=3, tile_pixels=64)
    first, header = render_tile(plan, 2)
    again, _ = render_tile(plan, 2)
    np.testing.assert_array_equal(first, again)
    assert first.dtype == np.float32 and first.shape == (64, 64)
    assert header["CTYPE1"] == "RA---TAN" and header["CTYPE2"] == "DEC--TAN"
    offset = plan.background_offsets()[2]
    assert header["BGOFFSET"] == pytest.approx(offset)
    # Stars are sparse: the median is the sky plus this tile's offset, within a few noise sigmas.
    assert np.median(first) == pytest.approx(plan.sky_level + offset, abs=3 * plan.noise_sigma)


@needs_astropy
def test_a_star_in_an_overlap_has_the_same_flux_in_both_tiles():
    plan = SkyPlan(n_tiles=2, seed=5, tile_pixels=128, star_density=0.01)
    ra, dec, flux = plan.star_catalogue()
    images, positions = [], []
    for index in (0, 1):
        image, _ = render_tile(plan, index)
        images.append(image - (plan.sky_level + plan.background_offsets()[index]))
        positions.append(np.array(plan.tile_wcs(index).wcs_world2pix(ra, dec, 0)).T)
    box = 6  # ~4 PSF sigmas either side
    inside = np.all([(p > box + 1) & (p < plan.tile_pixels - box - 2) for p in positions], axis=(0, 2))
    assert inside.any(), "the overlap should hold stars at this density"
    star = np.flatnonzero(inside)[np.argmax(flux[inside])]
    measured = []
    for image, position in zip(images, positions):
        x, y = np.round(position[star]).astype(int)
        measured.append(image[y - box:y + box + 1, x - box:x + box + 1].sum())
    noise = 13 * plan.noise_sigma  # sqrt(13 x 13 pixels) noise per aperture
    assert measured[0] == pytest.approx(flux[star], abs=5 * noise + 0.02 * flux[star])
    assert measured[1] == pytest.approx(measured[0], abs=7 * noise)


# ---- Montage's tables -----------------------------------------------------------------------


def test_tables_are_read_by_the_header_bars_blanks_and_spaces_included(tmp_path):
    table = tmp_path / "images.tbl"
    table.write_text(
        "\\datatype = fitshdr\n"
        "| cntr |      cra     | naxis3 | fname |\n"
        "| int  |      char    |  int   | char  |\n"
        "      0 11h 59m 51.57s           /a/long/path/tile_003.fits\n"
        "      1 12h 00m 00.00s        3  tile_001.fits\n")
    rows = read_montage_table(table)
    assert rows == [
        {"cntr": "0", "cra": "11h 59m 51.57s", "naxis3": "", "fname": "/a/long/path/tile_003.fits"},
        {"cntr": "1", "cra": "12h 00m 00.00s", "naxis3": "3", "fname": "tile_001.fits"},
    ]


def test_fit_table_round_trips_through_the_reader(tmp_path):
    fields = ("a", "b", "c", "crpix1", "crpix2", "xmin", "xmax", "ymin", "ymax", "xcenter", "ycenter",
              "npixel", "rms", "boxx", "boxy", "boxwidth", "boxheight", "boxang")
    fits = [dict({name: float(k + 1) for k, name in enumerate(fields)}, plus=0, minus=3, c=-71.25),
            dict({name: 0.5 for name in fields}, plus=12, minus=140, xmin=-237, npixel=8048)]
    path = tmp_path / "fits.tbl"
    write_fit_table(fits, path)
    rows = read_montage_table(path)
    assert [(int(r["plus"]), int(r["minus"])) for r in rows] == [(0, 3), (12, 140)]
    assert float(rows[0]["c"]) == -71.25 and int(rows[1]["xmin"]) == -237 and float(rows[1]["npixel"]) == 8048
    header = path.read_text().splitlines()[0]
    assert header.startswith("|") and header.split("|")[1].strip() == "plus"


def test_fit_table_refuses_a_dict_that_is_not_a_fit(tmp_path):
    with pytest.raises(ValueError, match=r"pair 1-2 lacks \['a'"):
        write_fit_table([{"plus": 1, "minus": 2}], tmp_path / "fits.tbl")


def test_a_failed_montage_status_names_the_step_and_the_input():
    with pytest.raises(MontageStepFailed, match="mProject failed on raw/tile_007.fits: Output wrote no pixels"):
        toolkit._checked("mProject", "raw/tile_007.fits", {"status": "1", "msg": b"Output wrote no pixels"})
    assert toolkit._checked("mAdd", "x", {"status": "0", "time": 1.0})["time"] == 1.0


# ---- MontagePy or astropy missing -----------------------------------------------------------


@pytest.mark.parametrize("blocked, missing", [(("MontagePy", "MontagePy.main"), "MontagePy"),
                                              (("astropy", "astropy.io.fits", "astropy.wcs"), "astropy")])
def test_require_montage_says_what_to_install(monkeypatch, blocked, missing):
    for name in blocked:
        monkeypatch.setitem(sys.modules, name, None)  # None in sys.modules: the import fails
    with pytest.raises(MontageUnavailable, match=rf"missing: {missing}\): python3 -m pip install -e \"\.\[montage\]\" "
                                                 r"in a scalpel-executor checkout"):
        require_montage()


@pytest.mark.parametrize("blocked, missing", [("MontagePy", "MontagePy"), ("astropy", "astropy")])
def test_the_example_without_montagepy_prints_what_to_install_not_a_traceback(tmp_path, blocked, missing):
    child = (
        "import runpy, sys\n"
        f"sys.modules[{blocked!r}] = None  # every import of it or its submodules now fails\n"
        f"sys.argv = ['mosaic.py', '--tiles', '16', '--out', {str(tmp_path / 'out')!r}]\n"
        f"runpy.run_path({str(EXAMPLE)!r}, run_name='__main__')\n"
    )
    done = subprocess.run([sys.executable, "-c", child], check=False, capture_output=True, text=True, env=child_env(),
                          timeout=120)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert (f"MontageUnavailable: the Montage pipeline needs MontagePy and astropy (missing: {missing}): "
            'python3 -m pip install -e ".[montage]" in a scalpel-executor checkout') in done.stderr
    assert not (tmp_path / "out" / "runinfo").exists(), "Parsl must not start without the toolkit"


def load_example():
    spec = importlib.util.spec_from_file_location("montage_mosaic_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("tiles", [2, 4, 9, 16, 400, 1000])
def test_the_example_takes_every_tile_count_the_library_takes(tiles):
    SkyPlan(n_tiles=tiles)  # the library takes it ...
    args = load_example().parse_args(["--tiles", str(tiles), "--executor", "htex", "--show-dag"])
    assert (args.tiles, args.executor, args.show_dag, args.seed) == (tiles, "htex", True, 0)  # ... and so does --tiles


@pytest.mark.parametrize("text, message", [
    ("1", "n_tiles must be an integer >= 2 (a mosaic needs overlapping tiles), got 1"),
    ("0", "got 0"), ("-4", "got -4"),
    ("4.5", "takes a whole number of tiles such as 16, got '4.5'"), ("many", "got 'many'"),
])
def test_the_example_refuses_what_the_library_refuses_by_value(capsys, text, message):
    with pytest.raises(ValueError):
        SkyPlan(n_tiles=int(text) if text.lstrip("-").isdigit() else text)
    with pytest.raises(SystemExit) as exit_status:
        load_example().parse_args(["--tiles", text])
    assert exit_status.value.code == 2
    err = capsys.readouterr().err
    assert "argument --tiles: " in err and message in err


def test_the_example_readme_installs_from_a_checkout_not_the_package_index():
    readme = (REPO / "examples" / "montage" / "README.md").read_text()
    assert 'pip install "scalpel-executor[montage]"' not in readme  # not on the package index
    assert 'python3 -m pip install -e ".[montage]"' in readme
    assert 'pip install "scalpel-executor[montage]"' not in montage.INSTALL_HINT


# ---- the pipeline under Parsl ---------------------------------------------------------------


def expected_stage_counts(n_tiles, pairs):
    return {"make_tile": n_tiles, "mImgtbl": 3, "mMakeHdr": 1, "mProject": n_tiles, "mOverlaps": 1,
            "mDiffFit": pairs, "fit_table": 1, "mBgModel": 1, "mBackground": n_tiles, "mAdd": 1, "mViewer": 1}


@needs_montage
def test_four_tiles_under_the_scalpel_executor_remove_the_injected_offsets(tmp_path):
    from scalpel_executor import scalpel_config

    plan = SkyPlan(n_tiles=4, seed=11, tile_pixels=128)
    reports = []
    parsl.load(scalpel_config(run_dir=str(tmp_path / "runinfo")))
    try:
        run = mosaic_pipeline(plan, tmp_path / "out", progress=lambda *report: reports.append(report))
        paths = run.wait(timeout=300)
    finally:
        parsl.dfk().cleanup()

    # Outputs: a mosaic with finite data, and a PNG.
    assert paths.mosaic.stat().st_size > 0
    assert paths.png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(paths.diffs.glob("*.fits")), "mDiffFit keeps no difference images"

    # The injected offsets were there before correction and are gone after.
    check = check_background(tmp_path / "out")
    assert check.injected_range > 10
    assert check.range_before == pytest.approx(check.injected_range, rel=0.05)
    assert check.range_after < 0.02 * check.injected_range
    assert check.offset_error < 0.02 * check.injected_range
    assert check.mosaic_finite_fraction > 0.9 and check.passed

    # The DAG: a 2 x 2 grid overlaps in 6 pairs (4 sides, 2 diagonals).
    graph = run.dag()
    summary = dag_summary(graph)
    n, pairs = 4, 6
    assert summary.nodes_per_stage == expected_stage_counts(n, pairs)
    assert list(summary.nodes_per_stage) == list(STAGES)
    assert summary.edges == 9 * n + 5 * pairs + 7
    assert summary.critical_path_tasks == 13  # one task of every step, mImgtbl three times
    assert [graph.nodes[t]["stage"] for t in summary.critical_path][-3:] == ["mImgtbl", "mAdd", "mViewer"]
    for fit in (t for t, stage in graph.nodes(data="stage") if stage == "mDiffFit"):
        assert sorted(graph.nodes[p]["stage"] for p in graph.predecessors(fit)) == [
            "mMakeHdr", "mOverlaps", "mProject", "mProject"]
    assert set(graph.predecessors("mAdd")) >= {f"mBackground[{i}]" for i in range(n)}

    # Progress reached every stage's final count.
    final = {stage: total for stage, done, total in reports if done == total}
    assert final == expected_stage_counts(n, pairs)
    assert run.stage_counts() == {s: (c, c) for s, c in expected_stage_counts(n, pairs).items()}


@needs_montage
def test_a_failing_step_surfaces_as_itself_not_as_a_dependency_error(tmp_path, monkeypatch):
    real = apps._montage_function

    def broken(name):
        if name == "mMakeHdr":
            return lambda *args, **kwargs: {"status": "1", "msg": "no images in table"}
        return real(name)

    monkeypatch.setattr(apps, "_montage_function", broken)  # threads: the apps run in this process
    parsl.load(Config(executors=[ThreadPoolExecutor(max_threads=2)], run_dir=str(tmp_path / "runinfo")))
    try:
        with pytest.raises(MontageStepFailed, match="mMakeHdr failed on .*images.tbl: no images in table"):
            mosaic_pipeline(SkyPlan(n_tiles=2, tile_pixels=64), tmp_path / "out")
    finally:
        parsl.dfk().cleanup()


def test_a_rerun_in_the_same_directory_replaces_the_previous_tiles(tmp_path):
    out = tmp_path / "out"
    (out / "raw").mkdir(parents=True)
    (out / "raw" / "tile_099.fits").write_bytes(b"left over from a larger run")
    montage.MosaicPaths(out).prepare()
    assert not list((out / "raw").iterdir())
    assert {p.name for p in out.iterdir()} == {"raw", "projected", "corrected", "diffs"}


def test_every_app_keeps_its_public_module_for_profile_keys():
    from parsl.app.python import PythonApp

    found = [value for value in vars(apps).values() if isinstance(value, PythonApp)]
    assert len(found) == len(STAGES)  # one app per stage ("mImgtbl" is one app, run three times)
    assert {app.func.__module__ for app in found} == {"scalpel_executor.workloads.montage"}
