"""The sampler's file: it starts isolated, its smaps parser, its descendant scan."""

import os
import subprocess
import sys
import tempfile

import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.host.probe import MemorySample, descendants, sampler, smaps_totals

try:
    from proc_trees import smaps_entry
except ImportError:
    # Under --import-mode=importlib (see pyproject.toml) pytest does not put tests/host/ on sys.path.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from proc_trees import smaps_entry


def test_the_sampler_file_runs_isolated_with_the_standard_library_only():
    # The probe starts it this way: no site-packages, no script folder on sys.path, so an import of
    # anything outside the standard library (this package included) fails here.
    result = subprocess.run([sys.executable, "-I", "-S", os.path.abspath(sampler.__file__), "--help"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "--sampler" in result.stdout


KINDS = ["anonymous", "heap", "stack", "library", "data file", "writable file", "vdso"]


@st.composite
def mappings(draw):
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=12))
    entries, start = [], 0x7F0000000000
    for index, kind in enumerate(kinds):
        rss = draw(st.integers(0, 4096))
        referenced = draw(st.integers(0, rss))
        private = draw(st.integers(0, rss))
        if kind == "library":  # code, then its data: both belong to the image
            path = f"/usr/lib/lib{index}.so"
            entries.append((start, "r-xp", path, rss, 0, referenced, False))
            start += 0x10000000
            entries.append((start, "rw-p", path, rss, private, referenced, False))
        else:
            perms, path, counted = {
                "anonymous": ("rw-p", "", True), "heap": ("rw-p", "[heap]", True),
                "stack": ("rw-p", "[stack]", True), "data file": ("r--p", f"/data/input{index}.bin", False),
                "writable file": ("rw-s", f"/dev/shm/buffer{index}", True), "vdso": ("r-xp", "[vdso]", False),
            }[kind]
            entries.append((start, perms, path, rss, private, referenced, counted))
        start += 0x10000000
    return entries


@given(mappings())
@settings(max_examples=150, deadline=None)
def test_smaps_totals_counts_data_mappings_and_sums_memory(entries):
    text = "".join(smaps_entry(start, perms, path, rss, private, referenced)
                   for start, perms, path, rss, private, referenced, _ in entries)
    expected = MemorySample(
        sum(e[5] for e in entries if e[6]) * 1024,
        sum(e[3] for e in entries) * 1024,
        sum(e[4] for e in entries) * 1024,
    )
    assert smaps_totals(text.encode()) == expected


def test_smaps_totals_reads_this_process():
    with open(f"/proc/{os.getpid()}/smaps", "rb") as file:
        totals = smaps_totals(file.read())
    rss = psutil.Process().memory_info().rss
    assert 0 < totals.referenced_data <= totals.rss
    assert abs(totals.rss - rss) < 0.1 * rss


def test_smaps_totals_rejects_text_that_is_not_smaps():
    with pytest.raises(ValueError, match="Referenced"):
        smaps_totals(b"7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \nRss: 4 kB\nVmFlags: rd\n")



@given(st.lists(st.integers(0, 30), min_size=1, max_size=30))
@settings(max_examples=50, deadline=None)
def test_descendants_follow_parent_links_transitively(parents):
    # process 100 + i has parent 100 + parents[i] when that is an earlier process, else init
    with tempfile.TemporaryDirectory() as root:
        links = {}
        for index, parent in enumerate(parents):
            pid = 100 + index
            ppid = 100 + parent if parent < index else 1
            links[pid] = ppid
            os.makedirs(os.path.join(root, str(pid)))
            with open(os.path.join(root, str(pid), "stat"), "w") as file:
                file.write(f"{pid} (a (tricky) name) S {ppid} 0 0\n")
        expected = {pid for pid in links if pid != 100 and _ancestors(pid, links) >= {100}}
        found = descendants(100, root)
    assert set(found) == expected and len(found) == len(expected)


def _ancestors(pid, links):
    seen = set()
    while pid in links and links[pid] not in seen:
        pid = links[pid]
        seen.add(pid)
    return seen


def test_descendants_of_this_process_include_a_real_child():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        assert child.pid in descendants(os.getpid())
    finally:
        child.kill()
        child.wait()
