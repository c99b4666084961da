"""Every module of the package and every benchmark script over 500 lines has its reason written in
docs/design.md's "Module size" paragraph (named as design.md names modules: ``runtime/node/pool.py``,
``benchmarks/whole_process.py``). A module that grows past the line is either split or explained."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 500


def _explained() -> str:
    design = (ROOT / "docs" / "design.md").read_text()
    start = design.index("**Module size.**")
    return " ".join(design[start:design.index("\n\n", start)].split())


def _long_modules() -> list[str]:
    named = []
    for folder, prefix in (("scalpel_executor", ""), ("benchmarks", "benchmarks/")):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if len(path.read_text().splitlines()) > LIMIT:
                named.append(prefix + str(path.relative_to(ROOT / folder)))
    return named


def test_every_module_over_500_lines_has_its_reason_in_design_md():
    paragraph = _explained()
    unexplained = [name for name in _long_modules() if f"`{name}` (~" not in paragraph]
    assert not unexplained, f"over {LIMIT} lines with no reason in design.md's Module size paragraph: {unexplained}"


def test_the_paragraph_names_no_module_that_is_short_or_gone():
    paragraph = _explained()
    long = set(_long_modules())
    for name in re.findall(r"`([\w/]+\.py)` \(~", paragraph):
        assert name in long, f"design.md explains {name}, which is not over {LIMIT} lines (or is gone)"
