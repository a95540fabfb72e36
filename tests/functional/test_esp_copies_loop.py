"""A second ESP the layout lists with a filesystem is made a copy of the ESP (issue 56), with
real mkfs.vfat on image files: the plan's own mkfs steps run and the copy answers to the
primary's UUID, which fstab names, with its listed label. The copy of the loader onto it is
the bootloader step's, after grub-install (tests/unit/drivers/test_bootloader.py runs that
step on the plan's arguments; the host kernel has no vfat to mount, and the VM bench boots a
copy alone: tests/e2e/test_boot.py)."""

from provision_agent.data_drivers.native import NativeDriver
from provision_agent.plan import inventory, pipeline
from provision_agent.plan.steps import make as Step
from provision_agent.run.events import Events
from provision_agent.run.executor import Executor
from provision_agent.run.runner import Runner
from tests.functional.prereq import require, sh
from tests.unit.plan.test_esp_copies import mirrorboot_uefi

pytestmark = require("mkfs.vfat", "blkid", root=False)

PLAN_DISKS = [inventory.normalize({"name": f"/dev/{n}", "size": 8 << 30}) for n in ("vda", "vdb")]


def _esp_file(path):
    """An image file for a partition: dosfstools refuses a whole loop device without -I, as
    it would a whole disk, and the plan's step has none."""
    with open(path, "wb") as f:
        f.truncate(512 << 20)
    return str(path)


def test_curtins_second_esp_listed_with_a_filesystem_is_made_a_copy(tmp_path):
    planned = pipeline.build_plan(NativeDriver(mirrorboot_uefi()).layout(), PLAN_DISKS)
    files = {d: _esp_file(tmp_path / f"{d[5:]}.img") for d in ("/dev/vda1", "/dev/vdb1")}
    steps = [Step(s.kind, {k: files.get(v, v) if isinstance(v, str) else v
                           for k, v in s.args.items()}, s.description)
             for s in planned.steps if s.kind == "mkfs" and s.args["device"] in files]
    (bl,) = [s for s in planned.steps if s.kind == "bootloader"]
    assert bl.args["esp_copies"] == ["/dev/vdb1"]
    Executor(Runner(), Events(), str(tmp_path / "target")).execute(steps)

    def blkid(tag, name):
        return sh("blkid", "-p", "-s", tag, "-o", "value", files[name]).strip()
    primary = blkid("UUID", "/dev/vda1")
    assert [blkid("TYPE", "/dev/vdb1"), blkid("UUID", "/dev/vdb1"),
            blkid("LABEL", "/dev/vdb1")] == ["vfat", primary, "efi"]
    fstab = next(s for s in planned.steps if s.kind == "fstab").args["entries"]
    assert [e["device"] for e in fstab if e["mount_point"] == "/boot/efi"] == ["/dev/vda1"]
