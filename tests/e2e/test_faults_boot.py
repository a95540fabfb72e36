"""A power cut (qemu SIGKILLed) at the bootloader phase of a re-provision that keeps a volume
group (issue 57): the test OS written to /, grub being installed into it and onto the disk
when the power goes. The kept LV's data reads back with its sha256 after the cut, the same
document run again completes, and the disk then boots the test OS to its marker.

Outside CI (tox -e e2e-faults, marker `faults`): two provisionings of the test OS and the cut
one, four boots. The other phases' cuts: tests/e2e/test_faults_power.py.
"""

import pytest

from tests.e2e.test_faults_power import BYSTANDER, Watcher, bystander_sha, seed_bystander
from tests.vmbench import FileServer, testos

pytestmark = pytest.mark.faults

MARKER = r"PROVISION-BOOT-OK cd=(\S+)"
KEPT_LV = "/dev/vgk/kept"
# the bootloader step of a test OS under TCG took 66 s (2026-11-29: grub-install from 4 s in,
# grub's config from 20 s in): 15 s in is inside grub's work, the image and fstab written
CUT_AFTER = 15.0


def layout(image_url, checksum, keep):
    kept = {"keep": True} if keep else {}
    return {
        "version": 1,
        "disks": [{"id": "d0", "match": {"serial": "PA-DISK0"}, "table": "gpt", "partitions": [
            {"id": "bios", "size": "1MiB", "type": "bios_grub"},
            {"id": "root", "size": "1536MiB", "type": "linux", "name": "root"},
            {"id": "pv", "size": "remaining", "type": "lvm", **kept}]}],
        "volume_groups": [{"id": "vg", "name": "vgk", "pvs": ["pv"], **kept,
                           "logical_volumes": [{"id": "lv", "name": "kept",
                                                "size": "256MiB"}]}],
        "filesystems": [{"device": "root", "type": "ext4", "mount": "/", "label": "root"},
                        {"device": "lv", "type": "ext4", "mount": "/srv/kept"}],
        "images": [{"uri": image_url, "format": "raw", "target": "root", "checksum": checksum}],
        "bootloader": {"kernel_params": "console=ttyS0"},
    }


def kept_sum(vm):
    vm.ssh(f"vgchange -ay vgk >/dev/null && mkdir -p /mnt/k && mount -o ro {KEPT_LV} /mnt/k")
    try:
        return vm.sha256("/mnt/k/kept.bin")
    finally:
        vm.ssh("umount /mnt/k && vgchange -an vgk >/dev/null")


def test_power_cut_at_the_bootloader_keeps_the_data_and_the_rerun_boots(make_vm):
    image = testos.ext4_zst()
    with FileServer(image.parent) as srv:
        url, checksum = srv.guest_url(image.name), testos.checksum(image)
        vm = make_vm(disks=2, disk_size="3G", keep_disks=True, name="cut-boot-0")
        disks = list(vm.disk_images)
        try:
            first = vm.provision(layout(url, checksum, False), ["--debug"])
            assert first.returncode == 0, first.stderr[-3000:] + first.log[-3000:]
            vm.ssh(f"vgchange -ay vgk >/dev/null && mkdir -p /mnt/k && mount {KEPT_LV} /mnt/k "
                   "&& head -c 8M /dev/urandom > /mnt/k/kept.bin && sync")
            total = vm.sha256("/mnt/k/kept.bin")
            vm.ssh("umount /mnt/k && vgchange -an vgk >/dev/null")
            bystander = seed_bystander(vm)
            vm.stop()
            doc = layout(url, checksum, True)
            cut = make_vm(disk_images=disks, name="cut-boot-1")
            watch = Watcher("bootloader", CUT_AFTER, cut.power_cut)
            run = cut.provision(doc, ["--debug", "--events_fd", "1"], echo=watch)
            assert watch.fired, (f"no bootloader step started: exit {run.returncode}\n"
                                 + "\n".join(watch.lines[-40:]))
            # the cut came while the bootloader step ran: it had not ended, nor had the run
            assert [e["kind"] for e in watch.started()][-1] == "bootloader"
            assert not [e for e in watch.events if e.get("event") == "result" or (
                e.get("kind") == "bootloader" and e.get("status") in ("done", "failed"))]
            assert not cut.running()
            cut.close()
            again = make_vm(disk_images=disks, name="cut-boot-2")
            assert kept_sum(again) == total, "the kept LV changed with the cut"
            rerun = again.provision(doc, ["--debug"])
            assert rerun.returncode == 0, rerun.stderr[-3000:] + rerun.log[-3000:]
            assert "keep volume group vgk" in rerun.log
            assert kept_sum(again) == total
            again.stop()
            assert bystander_sha(disks[BYSTANDER]) == bystander
            booted = make_vm(disk_images=disks[:1], boot="disk", name="cut-boot-3")
            booted.wait_console(MARKER, timeout=1800)
            print(f"bootloader cut {CUT_AFTER} s in: kept sha256 {total[:16]} unchanged, "
                  "the re-run exit 0, the disk boots")
        finally:
            vm.keep_disks = False
