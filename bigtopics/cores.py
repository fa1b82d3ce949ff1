"""How many threads "workers" means, in one place: 0 is every core this process may run on.

The cores a run may use are its CPU affinity (taskset, cpusets) narrowed by its cgroup's CPU quota
(a container's --cpus, a systemd CPUQuota, a batch scheduler's limit): a quota of 1.5 cores on a
16-core host lets 2 threads run, not 16, and 16 threads would each be throttled and wait at every
barrier. The quota is found as the kernel applies it: this process's cgroup (/proc/self/cgroup)
under the cgroup file system's mount (/proc/self/mountinfo), and every cgroup above it up to the
mount, the smallest quota winning. A file that cannot be read or parsed counts as no quota.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numba

from .kernels.pieces import set_threads

PROC_CGROUP = Path("/proc/self/cgroup")
PROC_MOUNTINFO = Path("/proc/self/mountinfo")


def affinity_cores() -> int:
    """Cores this process may be scheduled on (its CPU affinity)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def available_cores(cgroup_file: Path = PROC_CGROUP, mountinfo_file: Path = PROC_MOUNTINFO) -> int:
    """Cores this process may use: its affinity, at most its cgroup's CPU quota rounded up, at least 1."""
    cores = affinity_cores()
    quota = cgroup_cpu_quota(cgroup_file, mountinfo_file)
    if quota is not None:
        cores = min(cores, math.ceil(quota))
    return max(1, cores)


def cgroup_cpu_quota(cgroup_file: Path = PROC_CGROUP, mountinfo_file: Path = PROC_MOUNTINFO) -> float | None:
    """The CPU time this process's cgroups allow per second of wall time (quota / period, e.g. 1.5),
    or None without a quota or where the files cannot be read (not Linux, no cgroup mounted)."""
    try:
        groups = _own_cgroups(cgroup_file.read_text())
        mounts = mountinfo_file.read_text()
    except (OSError, UnicodeDecodeError):
        return None
    quotas = []
    for version, mount_root, mount_point in _cgroup_mounts(mounts):
        path = groups.get(2 if version == 2 else "cpu")
        if path is not None:
            quotas.extend(q for d in _cgroup_dirs(mount_point, mount_root, path)
                          if (q := _read_quota(d, version)) is not None)
    return min(quotas, default=None)


def _own_cgroups(text: str) -> dict:
    """/proc/self/cgroup as {2: path} for the unified hierarchy ("0::/path") and
    {controller: path} for each v1 controller ("4:cpu,cpuacct:/path")."""
    groups: dict = {}
    for line in text.splitlines():
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if not path.startswith("/"):
            continue
        if number == "0" and controllers == "":
            groups[2] = path
        else:
            groups.update((c, path) for c in controllers.split(","))
    return groups


def _cgroup_mounts(text: str):
    """(version, root within the hierarchy, mount point) of each cgroup2 mount and each v1 mount
    carrying the cpu controller, from /proc/self/mountinfo (fields: id parent dev root point
    options [optional...] - fstype source super-options)."""
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        dash = fields.index("-")
        if dash < 5 or len(fields) < dash + 4:
            continue
        fstype, super_options = fields[dash + 1], fields[dash + 3].split(",")
        root, point = _unescape(fields[3]), _unescape(fields[4])
        if fstype == "cgroup2":
            yield 2, root, Path(point)
        elif fstype == "cgroup" and "cpu" in super_options:
            yield 1, root, Path(point)


def _unescape(field: str) -> str:
    """mountinfo writes a space, tab, newline and backslash in a path as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def _cgroup_dirs(mount_point: Path, mount_root: str, path: str) -> list[Path]:
    """The directory of cgroup `path` under a mount of the hierarchy's `mount_root`, and those of
    its ancestors up to the mount point. Inside a container the mount's root is often the
    container's own cgroup, and /proc/self/cgroup may name a path outside it; then only the mount
    point itself is this process's cgroup that can be read."""
    relative = os.path.relpath(path, mount_root)
    if relative == "." or relative.startswith(".."):
        return [mount_point]
    parts = Path(relative).parts
    return [mount_point.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]


def _read_quota(directory: Path, version: int) -> float | None:
    """quota / period of one cgroup directory, None for no limit or an unreadable or malformed file."""
    try:
        if version == 2:  # cpu.max: "quota period" or "max period"
            quota, period = (directory / "cpu.max").read_text().split()
            if quota == "max":
                return None
            quota_us, period_us = int(quota), int(period)
        else:  # cpu.cfs_quota_us is -1 without a limit
            quota_us = int((directory / "cpu.cfs_quota_us").read_text())
            period_us = int((directory / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if quota_us <= 0 or period_us <= 0:
        return None
    return quota_us / period_us


def thread_count(workers: int) -> int:
    """The threads a kernel runs for `workers` (0: all cores), at most NUMBA_NUM_THREADS (the
    machine's cores unless set: more threads than cores only take turns)."""
    return max(1, min(workers or available_cores(), numba.config.NUMBA_NUM_THREADS))


def use_threads(workers: int) -> int:
    """Run this thread's parallel kernels (kernels/pieces.py) on the threads for `workers`, and
    return how many that is."""
    n = thread_count(workers)
    set_threads(n)
    return n
