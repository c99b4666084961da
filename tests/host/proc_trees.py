"""Fake /proc trees for the probe's tests: smaps entries in the kernel's layout, whole processes.

Imported by tests/host/test_probe.py (the probe on fake trees) and tests/host/test_sampler.py (the
smaps parser), so both read text of one layout.
"""

import os

FAKE_PID = 4242


def smaps_entry(start, perms, path, rss_kb, private_kb, referenced_kb):
    """One entry of /proc/PID/smaps in the kernel's layout."""
    header = f"{start:012x}-{start + max(rss_kb, 4) * 1024:012x} {perms} 00000000 fe:00 {1000 if path else 0}"
    header = f"{header:<73}{path}" if path else header + " "
    fields = [
        ("Size", max(rss_kb, 4)), ("KernelPageSize", 4), ("MMUPageSize", 4), ("Rss", rss_kb), ("Pss", rss_kb),
        ("Pss_Dirty", 0), ("Shared_Clean", rss_kb - private_kb), ("Shared_Dirty", 0),
        ("Private_Clean", 0), ("Private_Dirty", private_kb), ("Referenced", referenced_kb),
        ("Anonymous", private_kb), ("KSM", 0), ("LazyFree", 0), ("AnonHugePages", 0), ("Swap", 0), ("Locked", 0),
    ]
    lines = [header] + [f"{name + ':':<16}{value:>8} kB" for name, value in fields]
    lines += ["THPeligible:           0", "VmFlags: rd wr mr mw me ac"]
    return "\n".join(lines) + "\n"


def write_fake_process(root, pid, ppid, data_kb, library_kb=512):
    folder = os.path.join(root, str(pid))
    os.makedirs(folder, exist_ok=True)
    text = "".join([
        smaps_entry(0x7F0000000000, "r-xp", "/usr/lib/libfake.so", library_kb, 0, library_kb),
        smaps_entry(0x7F0000100000, "rw-p", "/usr/lib/libfake.so", 8, 8, 8),
        smaps_entry(0x7F0000200000, "r--p", "/usr/lib/locale/C.utf8/LC_CTYPE", 120, 0, 120),
        smaps_entry(0x7F0001000000, "rw-p", "", data_kb * 4, data_kb * 4, data_kb),
        smaps_entry(0x7FFF00000000, "r-xp", "[vdso]", 8, 0, 8),
    ])
    with open(os.path.join(folder, "smaps"), "w") as file:
        file.write(text)
    with open(os.path.join(folder, "clear_refs"), "w"):
        pass
    with open(os.path.join(folder, "stat"), "w") as file:
        file.write(f"{pid} (fake task) S {ppid} {pid} {pid} 0 -1 4194304 0 0 0 0\n")
    return folder
