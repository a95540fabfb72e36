"""What validation lets through was once a problem only execution (or nothing) caught;
each is now refused with its place, exit 2."""

import pytest

from tests.unit.helpers import mutate, run_cli, sample


def fs_set(i, key, value):
    return lambda d: d["filesystems"][i].__setitem__(key, value)


@pytest.mark.parametrize("change,expected", [
    (fs_set(2, "mount", "/../../etc"), "may not contain '..' (it would leave the target)"),
    (fs_set(2, "mount", "/srv/data/"), "write it as /srv/data"),
    (fs_set(2, "mount", "//"), "write it as /"),
    (fs_set(2, "mount", "/srv/./data"), "write it as /srv/data"),
    (fs_set(2, "mount", "/srv/my data"), "may not contain blanks"),
    (fs_set(2, "mount_options", "defaults\tnoatime"), "would split the fstab line"),
    (fs_set(0, "label", "boot\x00"), "control characters"),
    (lambda d: d["volume_groups"][0].__setitem__("name", "mapper"), "clashes under /dev"),
    (lambda d: d["volume_groups"][0]["logical_volumes"][0].__setitem__("name", "snapshot1"),
     "LVM reserves"),
    (lambda d: d["volume_groups"][0]["logical_volumes"][0].__setitem__("name", "root_mlog"),
     "'_mlog'"),
    (lambda d: d.__setitem__("bootloader", {"kernel_params": 'acpi_osi="!Windows 2015'}),
     "a double quote is not closed"),
    (lambda d: d.__setitem__("bootloader", {"kernel_params": "quiet; reboot"}),
     "';' outside double quotes"),
    (lambda d: d.__setitem__("bootloader", {"kernel_params": 'x="$(reboot)"'}),
     "'$' inside double quotes"),
    (lambda d: d.__setitem__("images", [{"uri": "http://h/i.img", "target": "boot0",
                                          "allow_no_checksum": True}]),
     "is a member of raid 'md-boot'"),
    (lambda d: d.__setitem__("configdrive", {"partition": "boot0"}),
     "the configdrive needs a partition of its own"),
])
def test_accepted_although_wrong_is_now_refused(tmp_path, change, expected):
    rc, _, err = run_cli(tmp_path, mutate(sample("two-disk-raid-lvm"), change))
    assert rc == 2, err
    assert expected in err


def test_vfat_label_characters(tmp_path):
    doc = mutate(sample("uefi"), lambda d: d["filesystems"][0].__setitem__("label", "EFI:SYS"))
    rc, _, err = run_cli(tmp_path, doc, "single-disk")
    assert rc == 2 and "vfat labels may not contain :" in err


def test_kernel_params_that_grub_reads_as_words_pass(tmp_path):
    doc = mutate(sample("two-disk-raid-lvm"), lambda d: d.update(bootloader={
        "kernel_params": 'console=ttyS0,115200n8 acpi_osi="!Windows 2015" quiet'},
        images=sample("uefi")["images"]))
    rc, _, err = run_cli(tmp_path, doc)
    assert rc == 0, err
