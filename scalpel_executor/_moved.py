"""The old module paths of the 0.1 layout (``scalpel_executor.executor``, ``.topology``,
``.grouping``, ``.errors``): each still imports, re-exporting its new module, and warns once that
it goes away. The package root (``from scalpel_executor import ScalpelExecutor``) is the path that
stays."""

from __future__ import annotations

import warnings

#: The release, and the date after which it may ship, that removes the old paths.
REMOVED_IN = "0.3.0 (not before 2027-06-30)"


def warn_moved(old: str, new: str) -> None:
    """Warn, at the importer's line, that module ``old`` moved to ``new``.

    A ``FutureWarning``, which Python shows by default, since the reader is a workflow's author;
    attributed to the line that imported ``old`` (``warnings`` skips the import machinery's frames).
    """
    warnings.warn(f"{old} is deprecated and will be removed in {REMOVED_IN}: import from {new} "
                  f"(or from scalpel_executor)", FutureWarning, stacklevel=3)
