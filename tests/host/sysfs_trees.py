"""Fake ``/sys`` trees for topology tests, built on demand under a temporary directory.

Generating the trees keeps hundreds of tiny files out of the repository and lets each test
say what machine it needs in a line. The layout mirrors Linux:

``devices/system/cpu/cpuN/cache/indexK/{level,type,shared_cpu_list,size}``,
``devices/system/cpu/cpuN/topology/{physical_package_id,thread_siblings_list,core_cpus_list}``
and an optional ``devices/system/cpu/cpuN/online``. Decoy entries (``cpufreq``, ``cpuidle``,
``online``, ``possible``) sit next to the ``cpuN`` directories, as on a real machine.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from scalpel_executor.core.domains import format_cpu_list


def _write(path: Path, text: str) -> None:
    # The caller makes the directories: one mkdir per file would double the cost of a tree.
    path.write_text(text + "\n")


def build_tree(
    root: Path,
    n_cpus: int,
    *,
    llc_groups: Sequence[Iterable[int]] | None,
    llc_size: str = "32768K",
    llc_level: int = 3,
    siblings: Sequence[Iterable[int]] | None = None,
    packages: Sequence[Iterable[int]] | None = None,
    offline: Iterable[int] = (),
    core_cpus_list: bool = True,
    private_caches: bool = True,
) -> Path:
    """Write a fake sysfs tree for ``n_cpus`` CPUs under ``root`` and return ``root``.

    Parameters
    ----------
    llc_groups : sequence of CPU groups or None
        CPUs sharing each LLC. Every CPU also gets a private L1d, L1i and (for ``llc_level``
        above 2) a private L2. None writes no ``cache`` directories at all.
    siblings : sequence of CPU groups, optional
        Hardware threads of each physical core; default one thread per core.
    packages : sequence of CPU groups, optional
        CPUs of each physical package; default ``llc_groups`` (or one package).
    offline : iterable of int
        CPUs whose ``online`` file reads ``0``. Other CPUs except cpu0 get an ``online`` file
        reading ``1``; cpu0 gets none, as on most x86 machines.
    core_cpus_list : bool
        Also write ``topology/core_cpus_list`` (Linux 5.7+), not just ``thread_siblings_list``.
    private_caches : bool
        Write the private L1d/L1i/L2 entries. Big trees may skip them: every file costs time on
        a slow disk, and the small trees already cover them.
    """
    cpu_root = root / "devices" / "system" / "cpu"
    cpu_root.mkdir(parents=True, exist_ok=True)
    # Decoys that a careless glob for "cpu*" would pick up.
    (cpu_root / "cpufreq").mkdir(exist_ok=True)
    (cpu_root / "cpuidle").mkdir(exist_ok=True)
    _write(cpu_root / "online", f"0-{n_cpus - 1}")
    _write(cpu_root / "possible", f"0-{n_cpus - 1}")

    def group_of(groups: Sequence[Iterable[int]], cpu: int) -> list[int]:
        for group in groups:
            members = list(group)
            if cpu in members:
                return members
        return [cpu]

    llc_lists = [list(g) for g in llc_groups] if llc_groups is not None else None
    sibling_lists = [list(g) for g in siblings] if siblings is not None else []
    package_lists = (
        [list(g) for g in packages]
        if packages is not None
        else (llc_lists if llc_lists is not None else [list(range(n_cpus))])
    )
    offline = set(offline)

    for cpu in range(n_cpus):
        cpu_dir = cpu_root / f"cpu{cpu}"
        (cpu_dir / "topology").mkdir(parents=True)
        if cpu in offline:
            _write(cpu_dir / "online", "0")
        elif cpu != 0:
            _write(cpu_dir / "online", "1")

        threads = format_cpu_list(group_of(sibling_lists, cpu))
        package = next(i for i, g in enumerate(package_lists) if cpu in g)
        _write(cpu_dir / "topology" / "physical_package_id", str(package))
        _write(cpu_dir / "topology" / "thread_siblings_list", threads)
        if core_cpus_list:
            _write(cpu_dir / "topology" / "core_cpus_list", threads)

        if llc_lists is None:
            continue
        private = threads  # L1 and L2 are per physical core, shared by its threads
        caches = []
        if private_caches:
            caches += [(1, "Data", private, "48K"), (1, "Instruction", private, "32K")]
            if llc_level > 2:
                caches.append((2, "Unified", private, "2048K"))
        caches.append((llc_level, "Unified", format_cpu_list(group_of(llc_lists, cpu)), llc_size))
        for k, (level, kind, shared, size) in enumerate(caches):
            index = cpu_dir / "cache" / f"index{k}"
            index.mkdir(parents=True)
            _write(index / "level", str(level))
            _write(index / "type", kind)
            _write(index / "shared_cpu_list", shared)
            _write(index / "size", size)
    return root


def this_machine(root: Path) -> Path:
    """1 x 2: two CPUs, private L1d/L1i/L2, one L3 of 32 MiB shared by 0-1."""
    return build_tree(root, 2, llc_groups=[[0, 1]], llc_size="32768K")


def xeon_e5620_2s(root: Path, **kwargs) -> Path:
    """2 x 4 with hyperthreading, like two Xeon E5620: siblings N and N+8, 12 MiB L3 per socket."""
    return build_tree(
        root,
        16,
        llc_groups=[[0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15]],
        llc_size="12288K",
        siblings=[[n, n + 8] for n in range(8)],
        **kwargs,
    )


def amd_4ccx(root: Path, *, smt: bool) -> Path:
    """4 CCX x 8 cores, 32 MiB L3 per CCX; with ``smt`` the sibling of N is N+32.

    Only the L3 is written (no private L1/L2), to keep the 64-thread tree small.
    """
    ccx = [list(range(8 * i, 8 * i + 8)) for i in range(4)]
    if not smt:
        return build_tree(
            root, 32, llc_groups=ccx, llc_size="32768K", packages=[range(32)],
            private_caches=False,
        )
    return build_tree(
        root,
        64,
        llc_groups=[group + [cpu + 32 for cpu in group] for group in ccx],
        llc_size="32768K",
        siblings=[[n, n + 32] for n in range(32)],
        packages=[range(64)],
        private_caches=False,
    )


def two_packages_no_cache(root: Path) -> Path:
    """Two packages of 2 CPUs each and no cache directories (some VMs and ARM boards)."""
    return build_tree(root, 4, llc_groups=None, packages=[[0, 1], [2, 3]])


def pci_devices(root: Path, devices: list[tuple[str, str, int]], nodes: dict[int, str]) -> Path:
    """PCI devices (address, class, numa node) and NUMA nodes (cpulist), as Linux lays them out."""
    for address, pci_class, node in devices:
        directory = root / "bus" / "pci" / "devices" / address
        directory.mkdir(parents=True)
        (directory / "class").write_text(pci_class + "\n")
        (directory / "numa_node").write_text(f"{node}\n")
    for node, cpulist in nodes.items():
        directory = root / "devices" / "system" / "node" / f"node{node}"
        directory.mkdir(parents=True)
        (directory / "cpulist").write_text(cpulist + "\n")
    return root
