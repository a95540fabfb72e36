"""Re-reading a partition table: partprobe only when the kernel does not show the new table."""

from provision_agent.drivers import udev
from tests.unit.fakes import FakeRunner


def sysfs(tmp_path, parts, disk="vda"):
    base = tmp_path / disk
    (base / "queue").mkdir(parents=True)          # not a partition: no 'partition' file
    (base / "size").write_text("8388608\n")
    for number, (start, size) in parts.items():
        d = base / f"{disk}{number}"
        d.mkdir()
        for name, value in (("partition", number), ("start", start), ("size", size)):
            (d / name).write_text(f"{value}\n")
    return str(tmp_path)


PLAN = {1: (2048, 2048), 2: (4096, 8192), 4: (12288, None), 5: (14336, 2048)}
KERNEL = {1: (2048, 2048), 2: (4096, 8192), 4: (12288, 2), 5: (14336, 2048)}


def test_the_kernel_showing_the_planned_table_needs_no_partprobe(tmp_path):
    r = FakeRunner()
    udev.reread_partitions(r, "/dev/vda", PLAN, sys_block=sysfs(tmp_path, KERNEL))
    assert r.lines() == ["udevadm settle --timeout=120"]
    assert udev.kernel_partitions("/dev/vda", sys_block=str(tmp_path)) == KERNEL


def test_any_difference_from_the_plan_still_runs_partprobe(tmp_path):
    for kernel in ({**KERNEL, 2: (4096, 4096)},            # an old size
                   {**KERNEL, 3: (20480, 2048)},           # a stale partition
                   {n: v for n, v in KERNEL.items() if n != 5}):   # one missing
        root = tmp_path / str(len(list(tmp_path.iterdir())))
        r = FakeRunner()
        udev.reread_partitions(r, "/dev/vda", PLAN, sys_block=sysfs(root, kernel))
        assert "partprobe /dev/vda" in r.lines(), kernel
    r = FakeRunner()      # a disk sysfs does not know, and no plan to compare with
    udev.reread_partitions(r, "/dev/vdq", PLAN, sys_block=str(tmp_path))
    udev.reread_partitions(r, "/dev/vda", None, sys_block=sysfs(tmp_path / "x", KERNEL))
    assert r.lines().count("partprobe /dev/vdq") == 1 and "partprobe /dev/vda" in r.lines()


def test_the_kernels_name_for_a_partition(tmp_path):
    disk = tmp_path / "nvme0n1"
    for child, number in (("nvme0n1p1", "1"), ("nvme0n1p2", "2")):
        (disk / child).mkdir(parents=True)
        (disk / child / "partition").write_text(number + "\n")
    (disk / "queue").mkdir()
    assert udev.partition_node("/dev/nvme0n1", 2, str(tmp_path)) == "/dev/nvme0n1p2"
    assert udev.partition_node("/dev/nvme0n1", 3, str(tmp_path)) is None
