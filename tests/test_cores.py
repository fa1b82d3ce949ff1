"""The cores a run may use (bigtopics/cores.py): CPU affinity narrowed by the cgroup CPU quota,
read from crafted /proc/self/cgroup, /proc/self/mountinfo and cgroup files, and from this machine."""

import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bigtopics.cores import affinity_cores, available_cores, cgroup_cpu_quota

AFFINITY = affinity_cores()


def machine(tmp_path, cgroup: str, mounts: list[tuple[str, str, str, str]], files: dict[str, str]):
    """Crafted proc files: `mounts` are (root, mount point under tmp_path, fstype, super options);
    `files` maps paths under tmp_path to their text. Returns (cgroup file, mountinfo file)."""
    lines = [f"{30 + i} 23 0:{40 + i} {root} {tmp_path / point} rw,relatime shared:{i} - {fstype} {fstype} {options}"
             for i, (root, point, fstype, options) in enumerate(mounts)]
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "cgroup").write_text(cgroup)
    (tmp_path / "mountinfo").write_text("\n".join(lines) + "\n")
    return tmp_path / "cgroup", tmp_path / "mountinfo"


V2 = [("/", "fs/cgroup", "cgroup2", "rw,nsdelegate")]


@pytest.mark.parametrize(("cpu_max", "quota"), [("150000 100000\n", 1.5), ("max 100000\n", None),
                                                 ("50000 100000", 0.5), ("200000 100000", 2.0)])
def test_cgroup_v2_quota(tmp_path, cpu_max, quota):
    files = machine(tmp_path, "0::/user.slice/job\n", V2, {"fs/cgroup/user.slice/job/cpu.max": cpu_max})
    assert cgroup_cpu_quota(*files) == quota
    expected = AFFINITY if quota is None else max(1, min(AFFINITY, math.ceil(quota)))
    assert available_cores(*files) == expected


def test_cgroup_v2_smallest_quota_of_the_ancestors_wins(tmp_path):
    files = machine(tmp_path, "0::/a/b/c\n", V2, {"fs/cgroup/a/cpu.max": "100000 100000",
                                                  "fs/cgroup/a/b/cpu.max": "max 100000",
                                                  "fs/cgroup/a/b/c/cpu.max": "300000 100000"})
    assert cgroup_cpu_quota(*files) == 1.0
    assert available_cores(*files) == 1


def test_cgroup_v1_quota(tmp_path):
    mounts = [("/", "fs/cgroup/memory", "cgroup", "rw,memory"),
              ("/", "fs/cgroup/cpu,cpuacct", "cgroup", "rw,cpu,cpuacct")]
    files = machine(tmp_path, "4:memory:/other\n3:cpu,cpuacct:/docker/abc\n0::/\n", mounts,
                    {"fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "250000\n",
                     "fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
                     "fs/cgroup/cpu,cpuacct/docker/cpu.cfs_quota_us": "-1\n",
                     "fs/cgroup/cpu,cpuacct/docker/cpu.cfs_period_us": "100000\n",
                     # the memory controller's hierarchy holds no CPU quota; one placed there is not read
                     "fs/cgroup/memory/other/cpu.cfs_quota_us": "10000\n",
                     "fs/cgroup/memory/other/cpu.cfs_period_us": "100000\n"})
    assert cgroup_cpu_quota(*files) == 2.5
    assert available_cores(*files) == min(AFFINITY, 3)


def test_cgroup_v1_without_a_quota(tmp_path):
    files = machine(tmp_path, "1:cpu:/\n", [("/", "cpu", "cgroup", "rw,cpu")],
                    {"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"})
    assert cgroup_cpu_quota(*files) is None
    assert available_cores(*files) == AFFINITY


def test_inside_a_container_the_mount_is_the_own_cgroup(tmp_path):
    """The mount's root is the container's cgroup (/kubepods/pod1) and /proc/self/cgroup names a
    path the container cannot see from its mount: the mount point's own quota applies."""
    files = machine(tmp_path, "0::/../../elsewhere\n", [("/kubepods/pod1", "fs/cgroup", "cgroup2", "rw")],
                    {"fs/cgroup/cpu.max": "100000 100000\n"})
    assert cgroup_cpu_quota(*files) == 1.0
    files = machine(tmp_path, "0::/kubepods/pod1/app\n", [("/kubepods/pod1", "fs/cgroup", "cgroup2", "rw")],
                    {"fs/cgroup/cpu.max": "400000 100000\n", "fs/cgroup/app/cpu.max": "120000 100000\n"})
    assert cgroup_cpu_quota(*files) == 1.2


def test_an_escaped_mount_point(tmp_path):
    mount = tmp_path / "my cgroups"
    mount.mkdir()
    (mount / "cpu.max").write_text("100000 100000")
    (tmp_path / "cgroup").write_text("0::/\n")
    escaped = str(mount).replace(" ", "\\040")
    (tmp_path / "mountinfo").write_text(f"30 23 0:40 / {escaped} rw - cgroup2 none rw\n")
    assert cgroup_cpu_quota(tmp_path / "cgroup", tmp_path / "mountinfo") == 1.0


@pytest.mark.parametrize("cpu_max", ["", "garbage", "150000", "abc 100000", "100000 0", "0 100000",
                                     "-5 100000", "1 2 3", "\xff\xfe"])
def test_a_malformed_quota_falls_back_to_the_affinity(tmp_path, cpu_max):
    files = machine(tmp_path, "0::/job\n", V2, {"fs/cgroup/job/cpu.max": cpu_max})
    assert cgroup_cpu_quota(*files) is None
    assert available_cores(*files) == AFFINITY


@pytest.mark.parametrize(("cgroup", "mountinfo"), [
    (None, "30 23 0:40 / /sys/fs/cgroup rw - cgroup2 none rw\n"),  # no /proc/self/cgroup
    ("0::/job\n", None),                                           # no mountinfo
    ("0::/job\n", "garbage line\n- - -\n30 23 0:40 /\n"),          # mountinfo malformed
    ("nonsense\n1:cpu\n", "30 23 0:40 / /nonexistent rw - cgroup2 none rw\n"),
    (b"\xff\xfe\x00", "30 23 0:40 / /nonexistent rw - cgroup2 none rw\n"),
])
def test_unreadable_proc_files_fall_back_to_the_affinity(tmp_path, cgroup, mountinfo):
    for name, text in (("cgroup", cgroup), ("mountinfo", mountinfo)):
        if isinstance(text, bytes):
            (tmp_path / name).write_bytes(text)
        elif text is not None:
            (tmp_path / name).write_text(text)
    assert cgroup_cpu_quota(tmp_path / "cgroup", tmp_path / "mountinfo") is None
    assert available_cores(tmp_path / "cgroup", tmp_path / "mountinfo") == AFFINITY


def test_a_quota_below_one_core_still_gives_one_thread(tmp_path):
    files = machine(tmp_path, "0::/\n", V2, {"fs/cgroup/cpu.max": "1000 100000"})
    assert available_cores(*files) == 1


def real_quota() -> float | None:
    """This machine's quota as a person would look it up: the usual mounts, the process's own
    cgroup and its ancestors, read directly."""
    quotas = []
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        parts = Path(path).relative_to("/").parts
        for i in range(len(parts) + 1):
            here = "/".join(parts[:i])
            if number == "0":
                cpu_max = Path("/sys/fs/cgroup", here, "cpu.max")
                if cpu_max.exists() and (text := cpu_max.read_text().split())[0] != "max":
                    quotas.append(int(text[0]) / int(text[1]))
            elif "cpu" in controllers.split(","):
                for mount in ("cpu", "cpu,cpuacct"):
                    quota_file = Path("/sys/fs/cgroup", mount, here, "cpu.cfs_quota_us")
                    if quota_file.exists() and int(quota_file.read_text()) > 0:
                        period = int(quota_file.with_name("cpu.cfs_period_us").read_text())
                        quotas.append(int(quota_file.read_text()) / period)
    return min(quotas, default=None)


@pytest.mark.skipif(not Path("/proc/self/cgroup").exists(), reason="Linux only")
def test_this_machine():
    quota = real_quota()
    assert cgroup_cpu_quota() == quota
    affinity = len(os.sched_getaffinity(0))
    assert available_cores() == (affinity if quota is None else max(1, min(affinity, math.ceil(quota))))


@pytest.mark.skipif(shutil.which("taskset") is None or AFFINITY < 2, reason="needs taskset and 2 cores")
def test_a_narrowed_affinity_is_seen_by_a_new_process():
    out = subprocess.run(["taskset", "-c", "0", sys.executable, "-c",
                          "from bigtopics.cores import available_cores, thread_count; "
                          "print(available_cores(), thread_count(0))"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "1"]
