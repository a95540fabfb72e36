"""tmpfs, ramfs and bind mounts and fstab's dump frequency through the whole run on a loop
device (issue 56): the installed system's /etc/fstab read back from the device, with the
directories the mounts need made in it and a bind source the image has left as it is."""

import os
from types import SimpleNamespace

from provision_agent.data_drivers.native import NativeDriver
from provision_agent.plan import inventory, pipeline
from provision_agent.run import apply
from provision_agent.run.runner import Runner
from tests.functional.prereq import require, sh

pytestmark = require("losetup", "mkfs.ext4", "wipefs", "blkid", "mount")


def test_mounts_are_written_to_fstab_with_their_directories(tmp_path, loop):
    dev = loop(256 << 20)
    doc = {"version": 1, "disks": [{"id": "a", "match": {"name": dev}}],
           "filesystems": [{"device": "a", "type": "ext4", "mount": "/", "fstab_freq": 1}],
           "mounts": [
               {"type": "tmpfs", "mount": "/my/tmpfs", "mount_options": "size=4194304"},
               {"type": "ramfs", "mount": "/my/ramfs"},
               {"type": "bind", "source": "/my/bind-over-var-cache", "mount": "/var/cache",
                "fstab_freq": 3},
               {"type": "bind", "source": "/etc/hostname", "mount": "/my/hostname",
                "mount_options": "ro"}]}
    live = [inventory.normalize({"name": dev, "size": 256 << 20})]
    planned = pipeline.build_plan(NativeDriver(doc).layout(), live)
    conf = SimpleNamespace(target_root=str(tmp_path / "target"), events_file=None,
                           events_fd=None)
    report = apply.provision(planned, conf, runner=Runner(), live_disks=live)
    uuid = report["filesystems"][0]["uuid"]

    check = tmp_path / "check"
    check.mkdir()
    sh("mount", dev, str(check))
    try:
        fstab = (check / "etc" / "fstab").read_text().splitlines()[1:]
        dirs = {d: os.path.isdir(check / d) for d in ("my/tmpfs", "my/ramfs", "var/cache",
                                                      "my/bind-over-var-cache", "my/hostname")}
    finally:
        sh("umount", str(check))
    assert fstab == [f"UUID={uuid}\t/\text4\tdefaults\t1\t1",
                     "tmpfs\t/my/tmpfs\ttmpfs\tsize=4194304\t0\t0",
                     "ramfs\t/my/ramfs\tramfs\tdefaults\t0\t0",
                     "/my/bind-over-var-cache\t/var/cache\tnone\tbind\t3\t0",
                     "/etc/hostname\t/my/hostname\tnone\tbind,ro\t0\t0"]
    # /etc/hostname is absent on this bare root: made a directory, as every missing source
    assert dirs == dict.fromkeys(dirs, True)
