"""A benchmark's scratch folder never costs it the record."""

import os
from unittest import mock

from scalpel_executor.experiments.records import scratch_folder, write_record


def test_a_folder_a_late_writer_keeps_from_being_removed_raises_nothing(tmp_path):
    """A run's detached refit writes its store's journal again while the folder is removed: the
    removal fails, the benchmark goes on to write its record."""
    real = os.rmdir
    with scratch_folder("scalpel-test-") as folder:
        (open(os.path.join(folder, "store.sqlite-wal"), "w")).close()

        def late(path, *args, **kwargs):
            if path == folder:
                raise OSError(39, "Directory not empty", path)
            return real(path, *args, **kwargs)

        patch = mock.patch("os.rmdir", late)
        patch.start()
    patch.stop()
    assert os.path.basename(folder).startswith("scalpel-test-")
    assert write_record({"runs": 5}, tmp_path / "r.json").read_text() == '{\n "runs": 5\n}'
    real(folder)  # what the late writer left


def test_a_scratch_folder_is_removed_when_nothing_writes_in_it():
    with scratch_folder("scalpel-test-") as folder:
        open(os.path.join(folder, "x"), "w").close()
    assert not os.path.exists(folder)
