"""tmpfs, ramfs and bind mounts and fstab's dump frequency, as curtin's mount action says
them (issue 56; curtin's examples/tests/filesystem_battery.yaml), jfs, ntfs and reiserfs, and
ZFS refused with why."""

import pytest

from provision_agent.data_drivers.native import NativeDriver
from provision_agent.drivers import fstab
from provision_agent.errors import InputError
from provision_agent.plan import inventory as inv_mod
from provision_agent.plan import pipeline, render
from tests.unit.helpers import mutate

DISKS = [inv_mod.normalize({"name": "/dev/vda", "size": 8 << 30})]


def battery():
    """The mounts of curtin's filesystem_battery, here."""
    return {"version": 1,
            "disks": [{"id": "d", "match": {"name": "/dev/vda"}, "partitions": [
                {"id": "root", "size": "3GiB"}, {"id": "data", "size": "1GiB"}]}],
            "filesystems": [{"device": "root", "type": "ext4", "mount": "/"},
                            {"device": "data", "type": "xfs", "mount": "/srv",
                             "fstab_freq": 1}],
            "mounts": [
                {"type": "tmpfs", "mount": "/my/tmpfs", "mount_options": "size=4194304",
                 "fstab_pass": 1},
                {"type": "ramfs", "mount": "/my/ramfs"},
                {"type": "bind", "source": "/my/bind-over-var-cache", "mount": "/var/cache",
                 "fstab_freq": 3},
                {"type": "bind", "source": "/etc", "mount": "/my/bind-ro-etc",
                 "mount_options": "bind,ro", "fstab_freq": 1}]}


def planned(doc):
    return pipeline.build_plan(NativeDriver(doc).layout(), DISKS)


def problems(doc):
    with pytest.raises(InputError) as exc:
        planned(doc)
    return [str(p) for p in exc.value.problems]


def test_mounts_and_dump_frequency_go_into_fstab():
    p = planned(battery())
    (step,) = [s for s in p.steps if s.kind == "fstab"]
    entries = step.args["entries"]
    assert [e.get("device") for e in entries[:2]] == ["/dev/vda1", "/dev/vda2"]
    assert (entries[0]["dump"], entries[1]["dump"]) == (0, 1)
    assert entries[2:] == [
        {"spec": "tmpfs", "mount_point": "/my/tmpfs", "fs_type": "tmpfs",
         "options": "size=4194304", "dump": 0, "pass": 1, "make_dirs": ["/my/tmpfs"]},
        {"spec": "ramfs", "mount_point": "/my/ramfs", "fs_type": "ramfs",
         "options": "defaults", "dump": 0, "pass": 0, "make_dirs": ["/my/ramfs"]},
        {"spec": "/my/bind-over-var-cache", "mount_point": "/var/cache", "fs_type": "none",
         "options": "bind", "dump": 3, "pass": 0,
         "make_dirs": ["/my/bind-over-var-cache", "/var/cache"]},
        {"spec": "/etc", "mount_point": "/my/bind-ro-etc", "fs_type": "none",
         "options": "bind,ro", "dump": 1, "pass": 0,
         "make_dirs": ["/etc", "/my/bind-ro-etc"]}]
    # fstab only: nothing of them is mounted during the run
    assert not [s for s in p.steps if s.kind == "mount" and s.args["mount_point"].startswith(
        ("/my", "/var/cache"))]
    assert [fstab.line(None, e) for e in entries[2:4]] == [
        "tmpfs\t/my/tmpfs\ttmpfs\tsize=4194304\t0\t1", "ramfs\t/my/ramfs\tramfs\tdefaults\t0\t0"]
    assert fstab.line(None, entries[4]) == \
        "/my/bind-over-var-cache\t/var/cache\tnone\tbind\t3\t0"
    text = render.plan_text(p)
    assert "bind /my/bind-over-var-cache  → /var/cache (bind), fstab only" in text
    assert "with tmpfs /my/tmpfs, ramfs /my/ramfs, bind /var/cache, bind /my/bind-ro-etc" \
        in step.description


def test_a_bind_mounts_options_get_bind_first_unless_they_have_it():
    doc = mutate(battery(), lambda d: d["mounts"][2].__setitem__("mount_options",
                                                                   "ro,nosuid"))
    doc["mounts"][3]["mount_options"] = "rbind"
    entries = [s for s in planned(doc).steps if s.kind == "fstab"][0].args["entries"]
    assert [e["options"] for e in entries[4:]] == ["bind,ro,nosuid", "rbind"]


@pytest.mark.parametrize("change,said", [
    (lambda d: d["mounts"][2].pop("source"),
     "$.mounts[2]: a bind mount needs source: the directory of the installed system"),
    (lambda d: d["mounts"][0].__setitem__("source", "/x"),
     "$.mounts[0]: source is for bind mounts: a tmpfs mount has none"),
    (lambda d: d["mounts"][1].__setitem__("mount", "/"),
     "$.mounts[1]: / is a filesystem on a device (filesystems), not a ramfs mount"),
    (lambda d: d["mounts"][1].__setitem__("mount", "/srv"),
     "$.mounts[1]: mount point /srv is also used at $.filesystems[1]"),
    (lambda d: d["mounts"][1].__setitem__("mount", "/my/tmpfs"),
     "$.mounts[1]: mount point /my/tmpfs is also used at $.mounts[0]"),
    (lambda d: d["mounts"][1].__setitem__("mount", "/my/../etc"),
     "$.mounts[1]: mount point '/my/../etc': a mount point may not contain '..'"),
    (lambda d: d["mounts"][0].__setitem__("mount_options", "size=1 mode=1777"),
     "$.mounts[0]: mount_options may not be empty or contain blanks"),
    (lambda d: d["mounts"][2].__setitem__("source", "/var/cache"),
     "$.mounts[2]: a bind mount of /var/cache onto itself changes nothing"),
    (lambda d: d["mounts"][3].__setitem__("source", "/etc/"),
     "$.mounts[3]: source '/etc/': write it as /etc"),
    (lambda d: d["filesystems"][0].__setitem__("mount", "/home"),
     "$.mounts[0]: mounts are written to the fstab of the root filesystem the layout makes"),
])
def test_mount_problems_are_located(change, said):
    got = problems(mutate(battery(), change))
    assert any(p.startswith(said) for p in got), got


@pytest.mark.parametrize("fs_type,mount", [
    ("jfs", "/srv"), ("reiserfs", "/srv"), ("jfs", None), ("ntfs", None), ("reiserfs", None)])
def test_jfs_ntfs_and_reiserfs_are_made(fs_type, mount):
    """The ramdisk carries mkfs.jfs, mkfs.ntfs and mkfs.reiserfs and the kernel's jfs and
    reiserfs modules: made, and mounted (into fstab) where the layout says."""
    def change(d):
        d["filesystems"][1].update(type=fs_type, label="myfs", mount=mount)
        if mount is None:
            del d["filesystems"][1]["mount"]
    doc = mutate(battery(), change)
    steps = planned(doc).steps
    (made,) = [s.args for s in steps if s.kind == "mkfs" and s.args["device"] == "/dev/vda2"]
    assert (made["fs_type"], made["label"]) == (fs_type, "myfs")
    (tab,) = [s for s in steps if s.kind == "fstab"]
    assert [(e["mount_point"], e["fs_type"]) for e in tab.args["entries"]
            if e.get("device") == "/dev/vda2"] == ([(mount, fs_type)] if mount else [])


def test_ntfs_with_a_mount_point_is_refused_saying_why():
    doc = mutate(battery(), lambda d: d["filesystems"][1].update(type="ntfs"))
    (problem,) = problems(doc)
    assert problem.startswith("$.filesystems[1]: filesystem type 'ntfs' is made but not "
                              "mounted by provision: Linux 6.1 (the ramdisk's kernel) mounts "
                              "NTFS as ntfs3"), problem


@pytest.mark.parametrize("change,where", [
    (lambda d: d["filesystems"][1].update(type="zfsroot"), "$.filesystems[1]: filesystem "
                                                           "type 'zfsroot': "),
    (lambda d: d["filesystems"][1].update(type="zfs"), "$.filesystems[1]: filesystem type "
                                                       "'zfs': "),
    (lambda d: d.update(zfs_pools=[{"pool": "rpool", "vdevs": ["data"]}]), "$.zfs_pools[0]: ")])
def test_zfs_is_refused_saying_why(change, where):
    """curtin's zpool and zfs actions and its zfsroot type: refused at the entry, with why
    (not in Debian main; what its modules would cost), not as an unknown field."""
    assert problems(mutate(battery(), change)) == [
        where + "ZFS is not made by provision: OpenZFS's kernel module is not in Debian main "
        "(Debian ships it in contrib as zfs-dkms, source compiled for each kernel, for its CDDL "
        "licence), and the ramdisk is built from main and non-free-firmware only; built, its "
        "modules are about 29 MiB (Alpine's zfs-lts package), a quarter of the ramdisk's 120 "
        "MiB budget. Use md RAID and LVM, or btrfs"]


@pytest.mark.parametrize("change,where", [
    (lambda d: d["filesystems"][1].__setitem__("fstab_freq", 10), "$.filesystems[1].fstab_freq"),
    (lambda d: d["mounts"][0].__setitem__("type", "overlay"), "$.mounts[0].type"),
    (lambda d: d["mounts"][2].__setitem__("source", "relative/dir"), "$.mounts[2].source"),
    (lambda d: d["mounts"][1].__setitem__("device", "root"), "$.mounts[1]")])
def test_schema_bounds_of_the_new_fields(change, where):
    with pytest.raises(InputError) as exc:
        NativeDriver(mutate(battery(), change)).layout()
    assert [p.location for p in exc.value.problems] == [where]


def test_curtins_fat16_and_fat32_are_vfat_with_mkfs_options():
    doc = mutate(battery(), lambda d: d["filesystems"][1].update(
        type="vfat", mkfs_options=["-F", "16"], label="myvfat16"))
    mkfs = [s.args for s in planned(doc).steps if s.kind == "mkfs"][1]
    assert (mkfs["fs_type"], mkfs["options"]) == ("vfat", ["-F", "16"])
