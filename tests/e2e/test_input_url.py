"""provision fetches its input over HTTP inside the real ramdisk (requests, DNS-less URL to the
host through qemu's user network), and a missing document is a fetch failure (exit 6)."""

import json

from tests.vmbench import FileServer
from tests.vmbench.ramdisk import REPO_ROOT

SAMPLES = REPO_ROOT / "samples"


def test_dry_run_from_input_data_url(shared_vm, tmp_path):
    (tmp_path / "layout.json").write_text((SAMPLES / "two-disk-raid-lvm.json").read_text())
    shared_vm.put(SAMPLES / "inventory" / "three-disks.json", "/tmp/three-disks.json")
    with FileServer(tmp_path) as srv:
        run = shared_vm.provision(args=["--input_data_url", srv.guest_url("layout.json"),
                                        "--inventory_file", "/tmp/three-disks.json",
                                        "--dry_run", "--plan_format", "json"])
        missing = shared_vm.provision(args=["--input_data_url", srv.guest_url("nope.json"),
                                            "--inventory_file", "/tmp/three-disks.json",
                                            "--dry_run"])
    assert run.returncode == 0, run.stderr + run.log
    plan = json.loads(run.stdout)
    assert [d["device"] for d in plan["layout"]["disks"]] == ["/dev/vda", "/dev/vdb"]
    assert plan["steps"], "a dry run of a two-disk RAID+LVM layout plans steps"
    assert "/layout.json" in srv.requested
    assert missing.returncode == 6, missing.stderr
    assert "nope.json" in missing.stderr
