"""What a non-editable install ships: every package under scalpel_executor/ is named in pyproject.toml.

The list is explicit (the profiles folder is mapped into the package from outside it), so a new
subpackage left off it installs as a missing module: `pip install .` or a wheel then fails at import,
while an editable install, which reads the checkout, hides it."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_in_the_checkout_is_listed_for_the_wheel():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "scalpel_executor").rglob("__init__.py")}
    assert found - listed == set(), f"packages missing from pyproject.toml's [tool.setuptools] packages: {sorted(found - listed)}"
    mapped = set(config.get("package-dir", {}))
    assert listed - found - mapped == set(), f"listed packages with no folder: {sorted(listed - found - mapped)}"
