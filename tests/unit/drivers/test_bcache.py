"""The bcache driver against a fake sysfs: make-bcache's commands, the kernel's registration
waited for, the bcache device read back from the backing device's sysfs (never guessed), the
attach, mode and label written, the label's link made; stopping before a wipe; the image
checked for bcache-tools."""

import os

import pytest

from provision_agent.drivers import bcache
from provision_agent.errors import MachineMismatch
from tests.unit.fakes import FakeRunner

CSET = "5d2a1c8e-0b7f-4e36-9a51-3c1f2b7d9e40"


class Kernel:
    """What the kernel does on its own time, done when the driver sleeps: the device last
    written to /sys/fs/bcache/register is registered; a stopped device or set goes away."""

    def __init__(self, tmp_path, number=3):
        self.block, self.fs = tmp_path / "block", tmp_path / "fs"
        for name in ("sda3", "nvme0n1p1"):
            (self.block / name).mkdir(parents=True)
        self.fs.mkdir()
        (self.fs / "register").write_text("")
        self.number = number

    def register(self, device):
        name = os.path.basename(device)
        here = self.block / name / "bcache"
        here.mkdir()
        if name.startswith("nvme"):
            (self.fs / CSET).mkdir()
            (self.fs / CSET / "stop").write_text("")
            (here / "set").symlink_to(self.fs / CSET)
            return
        disk = self.block / f"bcache{self.number}"
        (disk / "bcache").mkdir(parents=True)
        for f in ("attach", "cache_mode", "label", "stop"):
            (disk / "bcache" / f).write_text("")
        (here / "dev").symlink_to(disk)

    def sleep(self, _seconds):
        device = (self.fs / "register").read_text()
        if device and not (self.block / os.path.basename(device) / "bcache").exists():
            self.register(device)
        (self.fs / "register").write_text("")
        for stop in list(self.block.glob("bcache*/bcache/stop")) + list(self.fs.glob("*/stop")):
            if stop.read_text() == "1":
                _remove(stop.parent.parent if stop.parent.name == "bcache" else stop.parent)


def _remove(path):
    for p in sorted(path.rglob("*"), reverse=True):
        p.unlink() if p.is_file() or p.is_symlink() else p.rmdir()
    path.rmdir()


def args(tmp_path, **over):
    return {"device": str(tmp_path / "dev" / "bcache" / "by-label" / "root"), "name": "root",
            "backing": "/dev/sda3", "cache": "/dev/nvme0n1p1", "cache_mode": "writeback",
            "block_size": 4096, "format_cache": True, **over}


def test_create_formats_registers_attaches_and_links_by_label(tmp_path):
    kernel, runner = Kernel(tmp_path), FakeRunner()
    made = bcache.create(runner, args(tmp_path), str(kernel.block), str(kernel.fs),
                         sleep=kernel.sleep)
    assert runner.lines()[:3] == [
        "modprobe bcache",
        "make-bcache -C --block 4096 --wipe-bcache /dev/nvme0n1p1",
        "make-bcache -B --block 4096 --wipe-bcache /dev/sda3"]
    # the kernel's number, read from the backing device's sysfs link: 3 here, not 0
    assert made == {"kernel_device": "/dev/bcache3"}
    control = kernel.block / "bcache3" / "bcache"
    assert (control / "attach").read_text() == CSET
    assert (control / "cache_mode").read_text() == "writeback"
    assert (control / "label").read_text() == "root"
    assert os.readlink(args(tmp_path)["device"]) == "/dev/bcache3"


def test_a_second_device_of_a_set_registered_by_udev_only_attaches(tmp_path):
    kernel, runner = Kernel(tmp_path, number=0), FakeRunner()
    kernel.register("/dev/nvme0n1p1")
    kernel.register("/dev/sda3")            # udev's rule was first
    made = bcache.create(runner, args(tmp_path, format_cache=False, cache_mode="writearound"),
                         str(kernel.block), str(kernel.fs), sleep=kernel.sleep)
    assert made == {"kernel_device": "/dev/bcache0"}
    assert not any(" -C " in line for line in runner.lines())
    assert (kernel.fs / "register").read_text() == ""
    assert (kernel.block / "bcache0" / "bcache" / "attach").read_text() == CSET
    assert (kernel.block / "bcache0" / "bcache" / "cache_mode").read_text() == "writearound"


def test_a_backing_device_without_a_cache_sets_no_mode(tmp_path):
    kernel, runner = Kernel(tmp_path), FakeRunner()
    bcache.create(runner, args(tmp_path, cache=None, cache_mode="none", format_cache=False),
                  str(kernel.block), str(kernel.fs), sleep=kernel.sleep)
    assert [line for line in runner.lines() if line.startswith("make-bcache")] == [
        "make-bcache -B --block 4096 --wipe-bcache /dev/sda3"]
    control = kernel.block / "bcache3" / "bcache"
    assert (control / "attach").read_text() == (control / "cache_mode").read_text() == ""


def test_a_device_the_kernel_never_registers_fails_within_the_bound(tmp_path):
    kernel, now = Kernel(tmp_path), [0.0]

    def sleep(seconds):
        now[0] += seconds       # the kernel does nothing

    with pytest.raises(MachineMismatch, match="/dev/nvme0n1p1 was not registered within 30 s"):
        bcache.create(FakeRunner(), args(tmp_path), str(kernel.block), str(kernel.fs),
                      sleep=sleep, clock=lambda: now[0])


def test_stop_device_and_set_wait_until_they_are_gone(tmp_path):
    kernel = Kernel(tmp_path)
    kernel.register("/dev/nvme0n1p1")
    kernel.register("/dev/sda3")
    bcache.stop_device("/dev/bcache3", str(kernel.block), sleep=kernel.sleep)
    assert not (kernel.block / "bcache3").exists()
    bcache.stop_set("/dev/nvme0n1p1", str(kernel.block), sleep=kernel.sleep)
    assert not (kernel.fs / CSET).exists()
    # nothing registered: nothing to stop, nothing written
    bcache.stop_device("/dev/bcache3", str(kernel.block), sleep=kernel.sleep)
    bcache.stop_set("/dev/sda3", str(kernel.block), sleep=kernel.sleep)


@pytest.mark.parametrize("present, missing", [
    (["/lib/udev/rules.d/69-bcache.rules", "/usr/share/initramfs-tools/hooks/bcache"], []),
    (["/usr/lib/udev/rules.d/69-bcache.rules", "/usr/lib/dracut/modules.d/90bcache"], []),
    (["/lib/udev/rules.d/69-bcache.rules"], ["bcache-tools"]),
    ([], ["bcache-tools"]),
])
def test_boot_support_is_bcache_tools_rule_and_hook(present, missing):
    assert bcache.has_boot_support(lambda p: p in present) == missing


def test_the_bcache_boot_step_refuses_an_image_without_bcache_tools(tmp_path):
    """exit 5 naming the package; the same image with the rule and hook passes."""
    from types import SimpleNamespace

    from provision_agent.errors import EXIT_IMAGE_ERROR, ImageError
    from provision_agent.plan.steps import make as Step
    from provision_agent.run.target_files import TargetFiles

    root = tmp_path / "t"
    root.mkdir()
    files = TargetFiles(FakeRunner(), str(root), SimpleNamespace(stack=[str(root)]))
    step = Step("bcache_boot", {"devices": ["/dev/bcache/by-label/root"]})
    with pytest.raises(ImageError, match="install bcache-tools in it") as exc:
        files.bcache_boot(step)
    assert exc.value.exit_code == EXIT_IMAGE_ERROR
    assert "/dev/bcache/by-label/root" in str(exc.value)
    for path in ("usr/lib/udev/rules.d/69-bcache.rules",
                 "usr/share/initramfs-tools/hooks/bcache"):
        (root / path).parent.mkdir(parents=True)
        (root / path).write_text("")
    assert files.bcache_boot(step) == {"bcache_tools": True}


def test_the_executor_makes_the_device_then_clears_what_it_shows(tmp_path, monkeypatch):
    """The step's report carries the kernel's name; the new device is cleared like a new array
    (an old filesystem or PV at the backing device's offset would show through)."""
    import io

    from provision_agent.drivers import wipe
    from provision_agent.plan.steps import make as Step
    from provision_agent.run.events import Events
    from provision_agent.run.executor import Executor

    done = []
    monkeypatch.setattr(bcache, "create", lambda runner, a: done.append(("create", a["name"]))
                        or {"kernel_device": "/dev/bcache7"})
    monkeypatch.setattr(wipe, "clear_new", lambda runner, devices: done.append(("clear",
                                                                                devices)))
    step = Step("bcache_create", args(tmp_path, device="/dev/bcache/by-label/root"))
    report = Executor(FakeRunner(), Events([io.StringIO()]), str(tmp_path / "t")).execute([step])
    assert done == [("create", "root"), ("clear", ["/dev/bcache/by-label/root"])]
    assert report["steps"][0]["result"] == {"kernel_device": "/dev/bcache7"}


def test_partitions_are_linked_beside_the_label_to_the_kernels_names(tmp_path, monkeypatch):
    """The kernel names them /dev/bcacheNpM; the plan by the label's link."""
    from provision_agent.drivers import udev

    label = tmp_path / "by-label"
    label.mkdir()
    disk = str(label / "srv")
    nodes = {1: "/dev/bcache3p1", 2: None}
    monkeypatch.setattr(udev, "partition_node", lambda d, n, sys_block: nodes[n])
    monkeypatch.setattr(udev, "settle", lambda runner: nodes.update({2: "/dev/bcache3p2"}))
    bcache.link_partitions(FakeRunner(), disk, [disk + "1", disk + "2", "/dev/sda1"])
    assert os.readlink(disk + "1") == "/dev/bcache3p1"
    assert os.readlink(disk + "2") == "/dev/bcache3p2"      # after udev settled
    nodes[2] = None
    monkeypatch.setattr(udev, "settle", lambda runner: None)
    with pytest.raises(udev.DeviceMissing, match="shows no partition 2"):
        bcache.link_partitions(FakeRunner(), disk, [disk + "2"])


def test_a_registration_refused_while_udev_registers_it_is_waited_out(tmp_path, monkeypatch):
    """The kernel refuses a second registration as busy; udev's own is then waited for."""
    kernel = Kernel(tmp_path)
    real_write = bcache._write

    def busy(path, value):
        if path.endswith("register"):
            kernel.register(value)          # udev's rule was quicker
            raise OSError(16, "Device or resource busy")
        real_write(path, value)

    monkeypatch.setattr(bcache, "_write", busy)
    made = bcache.create(FakeRunner(), args(tmp_path), str(kernel.block), str(kernel.fs),
                         sleep=kernel.sleep)
    assert made == {"kernel_device": "/dev/bcache3"}
