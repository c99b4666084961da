"""The synthetic sky: a tile grid, a TAN WCS per tile, stars and background offsets, all from one seed.

Pure and deterministic: astropy is imported only where a WCS or a tile is made, in the worker
that makes it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass

import numpy as np


def grid_shape(n_tiles: int) -> tuple[int, int]:
    """Rows and columns of the squarest grid holding ``n_tiles`` tiles (the last row may be short).

    >>> grid_shape(16), grid_shape(17), grid_shape(2)
    ((4, 4), (4, 5), (1, 2))
    """
    if isinstance(n_tiles, bool) or not isinstance(n_tiles, int) or n_tiles < 1:
        raise ValueError(f"n_tiles must be a positive integer, got {n_tiles!r}")
    cols = math.isqrt(n_tiles - 1) + 1  # ceil(sqrt(n))
    rows = -(-n_tiles // cols)
    return rows, cols


def check_tile_count(n_tiles: object) -> int:
    """``n_tiles`` if a mosaic can be made of that many tiles (an integer >= 2), else ValueError.

    The one rule for a tile count: :class:`SkyPlan` applies it, and so does the example's
    ``--tiles``.
    """
    if isinstance(n_tiles, bool) or not isinstance(n_tiles, int) or n_tiles < 2:
        raise ValueError(f"n_tiles must be an integer >= 2 (a mosaic needs overlapping tiles), got {n_tiles!r}")
    return n_tiles


@dataclass(frozen=True)
class SkyPlan:
    """Where the synthetic tiles lie and what they hold, all derived from ``seed``.

    Tiles sit on a row-major grid in one tangent plane around ``center``; each has its own TAN
    projection centred on itself (so ``mProject`` really reprojects), ``overlap`` of its width
    shared with each neighbour. Stars are Gaussian PSFs at fixed sky positions, so they agree
    between tiles; each tile adds Gaussian noise and its own background offset, uniform in
    ``[-offset_range, offset_range]``, on top of ``sky_level``.
    """

    n_tiles: int
    seed: int = 0
    tile_pixels: int = 256
    overlap: float = 0.15
    pixel_scale_arcsec: float = 1.0
    center: tuple[float, float] = (180.0, 30.0)
    sky_level: float = 100.0
    noise_sigma: float = 2.0
    offset_range: float = 50.0
    star_density: float = 0.003  # stars per square pixel
    psf_sigma: float = 1.5  # pixels

    def __post_init__(self) -> None:
        check_tile_count(self.n_tiles)
        if not isinstance(self.tile_pixels, int) or self.tile_pixels < 32:
            raise ValueError(f"tile_pixels must be an integer >= 32, got {self.tile_pixels!r}")
        if not 0.05 <= self.overlap < 0.5:
            raise ValueError(f"overlap must be a fraction in [0.05, 0.5), got {self.overlap!r}")
        for name in ("pixel_scale_arcsec", "noise_sigma", "offset_range", "star_density", "psf_sigma"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        object.__setattr__(self, "center", tuple(float(c) for c in self.center))

    @property
    def grid(self) -> tuple[int, int]:
        """(rows, columns) of the tile grid."""
        return grid_shape(self.n_tiles)

    @property
    def pixel_scale(self) -> float:
        """Degrees per pixel."""
        return self.pixel_scale_arcsec / 3600.0

    @property
    def step_pixels(self) -> float:
        """Distance between neighbouring tile centres, in pixels."""
        return self.tile_pixels * (1.0 - self.overlap)

    def tile_name(self, index: int) -> str:
        """File name of tile ``index`` (the same in the raw, projected and corrected directories)."""
        return f"tile_{index:03d}.fits"

    def background_offsets(self) -> np.ndarray:
        """The injected background offset of every tile, in tile order."""
        rng = np.random.default_rng([self.seed, 2])
        return rng.uniform(-self.offset_range, self.offset_range, self.n_tiles)

    def tile_offset_pixels(self, index: int) -> tuple[float, float]:
        """Centre of tile ``index`` in the field's tangent plane, in pixels from the field centre."""
        rows, cols = self.grid
        row, col = divmod(index, cols)
        return (col - (cols - 1) / 2) * self.step_pixels, (row - (rows - 1) / 2) * self.step_pixels

    def field_wcs(self):
        """The TAN WCS of the whole field (tangent point ``center``, pixel 0,0 at the centre)."""
        from astropy.wcs import WCS

        wcs = WCS(naxis=2)
        wcs.wcs.ctype = ["RA---TAN", "DEC--TAN"]
        wcs.wcs.crval = list(self.center)
        wcs.wcs.crpix = [0.0, 0.0]
        wcs.wcs.cdelt = [-self.pixel_scale, self.pixel_scale]
        return wcs

    def tile_wcs(self, index: int):
        """The TAN WCS of tile ``index``: tangent point at the tile's centre, north up, east left."""
        from astropy.wcs import WCS

        x, y = self.tile_offset_pixels(index)
        (ra, dec), = self.field_wcs().wcs_pix2world([[x, y]], 0)
        wcs = WCS(naxis=2)
        wcs.wcs.ctype = ["RA---TAN", "DEC--TAN"]
        wcs.wcs.crval = [float(ra), float(dec)]
        wcs.wcs.crpix = [(self.tile_pixels + 1) / 2] * 2
        wcs.wcs.cdelt = [-self.pixel_scale, self.pixel_scale]
        wcs.wcs.cunit = ["deg", "deg"]
        wcs.wcs.radesys = "ICRS"
        wcs.wcs.equinox = 2000.0
        return wcs

    def star_catalogue(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ra, dec, flux) of every star in the field, plus a margin; deterministic from ``seed``."""
        rows, cols = self.grid
        margin = 4 * self.psf_sigma + 2
        half_width = ((cols - 1) * self.step_pixels + self.tile_pixels) / 2 + margin
        half_height = ((rows - 1) * self.step_pixels + self.tile_pixels) / 2 + margin
        rng = np.random.default_rng([self.seed, 3])
        count = round(self.star_density * 4 * half_width * half_height)
        x = rng.uniform(-half_width, half_width, count)
        y = rng.uniform(-half_height, half_height, count)
        flux = rng.lognormal(mean=math.log(1500.0), sigma=0.7, size=count)
        ra, dec = self.field_wcs().wcs_pix2world(x, y, 0)
        return ra, dec, flux

    def to_json(self) -> str:
        """The plan as JSON (what :meth:`from_json` reads back)."""
        return json.dumps(dataclasses.asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> SkyPlan:
        """The plan :meth:`to_json` wrote."""
        values = json.loads(text)
        values["center"] = tuple(values["center"])
        return cls(**values)


def render_tile(plan: SkyPlan, index: int):
    """The pixels (float32) and FITS header of tile ``index``: sky + offset + stars + noise.

    The header carries the tile's TAN WCS and, for the record, ``BGOFFSET`` (its injected offset).
    """
    if not 0 <= index < plan.n_tiles:
        raise IndexError(f"tile index must be in [0, {plan.n_tiles}), got {index!r}")
    wcs = plan.tile_wcs(index)
    size = plan.tile_pixels
    offset = float(plan.background_offsets()[index])
    rng = np.random.default_rng([plan.seed, 1, index])
    image = plan.sky_level + offset + rng.normal(0.0, plan.noise_sigma, (size, size))

    ra, dec, flux = plan.star_catalogue()
    x, y = wcs.wcs_world2pix(ra, dec, 0)
    radius = math.ceil(5 * plan.psf_sigma)
    inside = (x > -radius) & (x < size + radius) & (y > -radius) & (y < size + radius)
    norm = 1.0 / (2 * math.pi * plan.psf_sigma**2)
    for xs, ys, fs in zip(x[inside], y[inside], flux[inside]):
        x0, x1 = max(0, int(xs) - radius), min(size, int(xs) + radius + 1)
        y0, y1 = max(0, int(ys) - radius), min(size, int(ys) + radius + 1)
        if x0 >= x1 or y0 >= y1:
            continue
        yy, xx = np.mgrid[y0:y1, x0:x1]
        image[y0:y1, x0:x1] += fs * norm * np.exp(-((xx - xs) ** 2 + (yy - ys) ** 2) / (2 * plan.psf_sigma**2))

    header = wcs.to_header()
    header["BUNIT"] = ("counts", "synthetic")
    header["TILEIDX"] = (index, "index of this tile in the plan")
    header["BGOFFSET"] = (offset, "injected background offset")
    return image.astype(np.float32), header
