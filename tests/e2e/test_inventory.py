"""`provision inventory` in the VM reports the virtio disks with the right sizes and serials
(the shared VM's: tests/e2e/conftest.py)."""

from tests.vmbench.vm import parse_size


def test_inventory_reports_disks_with_sizes_and_serials(shared_vm):
    disks = {d["name"]: d for d in shared_vm.inventory()["inventory"]["disks"]}
    expected = {"/dev/vda": ("4G", "SER-A4"), "/dev/vdb": ("6G", "SER-B6"),
                "/dev/vdc": ("8G", "SER-C8")}
    for name, (size, serial) in expected.items():
        assert name in disks, f"{name} missing from inventory: {sorted(disks)}"
        assert disks[name]["size"] == parse_size(size)
        assert disks[name]["serial"] == serial
    # nothing that is not a disk (the ramdisk itself, loop devices, the floppy controller's fd0)
    assert set(disks) == set(expected)
