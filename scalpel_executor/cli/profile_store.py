"""The profile store as the ``scalpel profile`` commands open it (``cli.profile`` and
``cli.profile_run``): the file of ``--store`` or the default, a refusal naming a store that is not
there or cannot be written, and seconds and sizes as they print."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
from collections.abc import Iterator

from scalpel_executor.core.units import format_size
from scalpel_executor.learning.store import ProfileStore, default_path

__all__ = ["named_store", "existing_store", "writing_store", "fmt_seconds", "fmt_bytes"]


def named_store(args: argparse.Namespace) -> ProfileStore:
    return ProfileStore(args.store or default_path())


def existing_store(args: argparse.Namespace) -> ProfileStore:
    """The store, for a command that only reads it: ValueError naming the path when no file is there,
    rather than creating one (a mistyped --store would otherwise look like an empty store)."""
    path = args.store or default_path()
    if path != ":memory:" and not os.path.exists(os.path.expanduser(str(path))):
        raise ValueError(f"no profile store at {path}: nothing has been learned there yet (a run with "
                         f"profiles={str(path)!r} writes one), or the path is mistyped")
    return ProfileStore(path)


def _unwritable(store: ProfileStore, doing: str) -> ValueError:
    return ValueError(
        f"cannot {doing}: the profile store {store.path} cannot be written ({store.problem}), so nothing was "
        "saved; move the file aside or pass --store with a writable file path"
    )


class _Quiet(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return False


@contextlib.contextmanager
def writing_store(args: argparse.Namespace, doing: str) -> Iterator[ProfileStore]:
    """The store, for a command that changes it: ValueError unless the change reaches the file.

    The store's own warning about falling back to memory is held back: the error says it instead.
    """
    store_logger = logging.getLogger("scalpel_executor.learning.store")
    quiet = _Quiet()
    store_logger.addFilter(quiet)
    try:
        with named_store(args) as store:
            if not store.persistent:
                raise _unwritable(store, doing)
            yield store
            if not store.persistent:  # it failed over to memory while writing
                raise _unwritable(store, doing)
    finally:
        store_logger.removeFilter(quiet)


def fmt_seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g} s"


def fmt_bytes(value: float | None) -> str:
    return "-" if value is None else format_size(value)
