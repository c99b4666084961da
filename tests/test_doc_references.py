"""Every file, section and link the code and the docs cite exists.

A reference rots quietly: a page is split, a module moves, a section is renamed, and the sentence
that sent a reader there still reads well. Three kinds are checked, in the README, every page under
docs/ and every Python file of the package, the benchmarks, the examples and the scripts:

- a repository path (``docs/results/throughput.md``, ``benchmarks/throughput.py``,
  ``scalpel_executor/runtime/node/pool.py``) or a package path as design.md writes them
  (``runtime/node/pool.py``, ``core/scheduler.py``): the file or folder exists, or, for an output
  prefix (``--out docs/figures/scale``), files that start with it;
- a cited section, ``docs/profiles.md, "The profile store"``, ```docs/profiles.md`, "The profile store"`` or
  ``docs/design.md ("Import rules")``: the page has a heading, or a paragraph or list item (numbered too)
  opening in bold, that starts with those words; a row of a page's table of moved sections does not count,
  nor a section left holding only where it moved ("*Moved to ...*"): cite the page the section moved to;
- a dotted name, ``scalpel_executor.runtime.driver.report.run_summary``: a module of the package, or a
  name defined or imported in one;
- a Markdown link between pages, ``[text](results/throughput.md#provider-mode)``: the page exists
  and, with an anchor, has a heading whose GitHub anchor that is.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "scalpel_executor"
PACKAGE_FLOORS = ("core", "runtime", "learning", "host", "experiments", "cli", "workloads", "stress")

_PATH = re.compile(r"(?<![\w./-])((?:docs|benchmarks|scalpel_executor|examples|scripts|tests)/[\w./-]*[\w/])")
_PACKAGE_PATH = re.compile(rf"(?<![\w./-])((?:{'|'.join(PACKAGE_FLOORS)})/[\w/-]+\.py)\b")
_SECTION = re.compile(r"((?:docs/)?[\w/-]+\.md)`?,? \(?\"([^\"]{3,})\"")
_DOTTED = re.compile(r"(?<![\w.])(scalpel_executor(?:\.\w+)+)")
_BOLD = re.compile(r"^\s*(?:(?:[-*]|\d+\.)\s+)?\*\*(.+?)\*\*")
_LINK = re.compile(r"\]\(([^)\s#]+\.md)(?:#([^)\s]+))?\)")


def _sources() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for folder in ("scalpel_executor", "benchmarks", "examples", "scripts"):
        files += sorted((ROOT / folder).rglob("*.py"))
    return [path for path in files if path.is_file()]


def _page(name: str, citing: Path) -> Path:
    """The page a citation names: a repository path, else one beside the citing page or under docs/."""
    for candidate in (ROOT / name, citing.parent / name, ROOT / "docs" / name):
        if candidate.is_file():
            return candidate
    return ROOT / name


def _titles(page: Path) -> list[str]:
    """The page's headings and the bold openings of its paragraphs and list items, lower-cased."""
    titles = []
    for line in page.read_text().splitlines():
        if line.startswith("#"):
            titles.append(line.lstrip("#").strip())
        elif _BOLD.match(line):
            titles.append(_BOLD.match(line).group(1))
    return [" ".join(title.replace("`", "").split()).lower() for title in titles]


def _moved(page: Path) -> list[str]:
    """The page's headings whose section holds nothing but a date and a "Moved to ..." line, lower-cased:
    a stub left where a section was, which a citation should not stop at."""
    stubs, heading, body = [], None, []
    for line in [*page.read_text().splitlines(), "# end"]:
        if line.startswith("#"):
            if heading is not None and body and all(re.match(r"^\*(Written|Moved to)\b", b) for b in body) \
                    and any(b.startswith("*Moved to") for b in body):
                stubs.append(heading)
            heading, body = " ".join(line.lstrip("#").replace("`", "").split()).lower(), []
        elif line.strip():
            body.append(line.strip())
    return stubs


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


#: Dotted names that are no module: the package's loggers (runtime/logs.py) and its data folder,
#: a package by pyproject.toml's package-dir.
NOT_MODULES = {"scalpel_executor.summary": "a logger", "scalpel_executor.manager": "a logger",
               "scalpel_executor.profiles": "profiles/, the shipped profiles"}


def _resolves(dotted: str) -> bool:
    """Whether ``scalpel_executor.a.b[.name[.attribute]]`` is a module or package of the package, or
    a name defined or imported at the top of one, or a module's own attribute such as ``__file__``
    (read as text: nothing is imported)."""
    if dotted in NOT_MODULES or re.search(r"\.__\w+__$", dotted):
        return True
    parts = dotted.split(".")
    for length in range(len(parts), 0, -1):
        path = ROOT.joinpath(*parts[:length])
        module = path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py"
        if not module.is_file():
            continue
        if length == len(parts):
            return True
        name = re.escape(parts[length])
        return bool(re.search(rf"^(?:def |class |async def )?{name}\b|^\s*(?:def |class ){name}\b|import .*\b{name}\b|"
                              rf"^\s+\"?{name}\"?[,):]|\b{name}\s*(?::[^=]+)?=", module.read_text(), re.MULTILINE))
    return False


def _problems(source: Path, text: str) -> list[str]:
    """What ``text``, read as the file ``source``, cites that does not exist."""
    problems = []
    where = source.relative_to(ROOT)
    for path in set(_PATH.findall(text)):
        path = path.rstrip(".")
        if not (ROOT / path).exists() and not any((ROOT / path).parent.glob((ROOT / path).name + "*")):
            problems.append(f"{where}: {path} does not exist")
    for path in set(_PACKAGE_PATH.findall(text)):
        if not (PACKAGE / path).exists() and not (ROOT / path).exists():
            problems.append(f"{where}: {path} is not a module of the package")
    for name, section in set(_SECTION.findall(text)):
        page = _page(name, source)
        cited = " ".join(section.replace("`", "").split()).lower().rstrip(".")
        if page.is_file() and not any(title.startswith(cited) for title in _titles(page)):
            problems.append(f"{where}: {name} has no section \"{section}\"")
        elif page.is_file() and any(title.startswith(cited) for title in _moved(page)):
            problems.append(f"{where}: {name}'s section \"{section}\" only says where it moved: cite that page")
    for dotted in set(_DOTTED.findall(text)):
        if not _resolves(dotted):
            problems.append(f"{where}: {dotted} names no module of the package, nor anything in one")
    if source.suffix == ".md":
        for name, anchor in set(_LINK.findall(text)):
            page = source.parent / name
            if "://" in name:
                continue
            if not page.is_file():
                problems.append(f"{where}: the link to {name} leads nowhere")
            elif anchor and anchor not in {_anchor(line.lstrip("#")) for line in page.read_text().splitlines()
                                           if line.startswith("#")}:
                problems.append(f"{where}: {name} has no heading for #{anchor}")
    return problems


def test_every_cited_file_section_and_link_exists():
    problems = sorted({problem for source in _sources() for problem in _problems(source, source.read_text())})
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("text, found", [
    ("see docs/machines.md for the presets", "docs/machines.md does not exist"),
    ('as docs/profiles.md, "A section nobody wrote" says', 'has no section "A section nobody wrote"'),
    ("the pool (runtime/no_such_module.py)", "runtime/no_such_module.py is not a module of the package"),
    ("[the figures](results/no-such-page.md)", "the link to results/no-such-page.md leads nowhere"),
    ("[the figures](profiles.md#no-such-heading)", "profiles.md has no heading for #no-such-heading"),
    ("``scalpel_executor.runtime.gone.Thing``", "scalpel_executor.runtime.gone.Thing names no module"),
    ("``scalpel_executor.runtime.driver.report.no_such_function``", "report.no_such_function names no module"),
    ('(`docs/profiles.md`, "A section nobody wrote")', 'has no section "A section nobody wrote"'),
    ('docs/notebook.md, "The machine\'s cache, measured first"', "only says where it moved: cite that page"),
])
def test_a_broken_reference_is_named(text, found):
    problems = _problems(ROOT / "docs" / "a-page.md", text + "\n")
    assert any(found in problem for problem in problems), problems
    assert not _problems(ROOT / "docs" / "a-page.md", "docs/design.md, \"Import rules\" and [x](profiles.md)\n")
