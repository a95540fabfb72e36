"""fstab's tmpfs, ramfs and bind lines (issue 56): written by their spec, no device looked up,
and the directories they need made in the target unless something is there already."""

import os
from types import SimpleNamespace

import pytest

from provision_agent.plan.steps import make as Step
from provision_agent.run.runner import Result
from provision_agent.run.target_files import TargetFiles


class Blkid:
    def __init__(self):
        self.calls = []

    def run(self, argv, **kw):
        self.calls.append(list(argv))
        return Result(tuple(argv), 0, "1111-2222\n", "", 0.0)


def test_spec_entries_need_no_device_and_get_their_directories(tmp_path):
    root = tmp_path / "t"
    (root / "etc").mkdir(parents=True)
    (root / "etc/hostname").write_text("node\n")
    (root / "srv").symlink_to("/data")          # the image's link, resolved inside the target
    runner = Blkid()
    files = TargetFiles(runner, str(root), SimpleNamespace(stack=[str(root)]))
    entries = [{"device": "/dev/vda1", "mount_point": "/", "fs_type": "ext4",
                "options": "defaults", "dump": 0, "pass": 1},
               {"spec": "tmpfs", "mount_point": "/my/tmpfs", "fs_type": "tmpfs",
                "options": "size=1m", "dump": 0, "pass": 0, "make_dirs": ["/my/tmpfs"]},
               {"spec": "/etc/hostname", "mount_point": "/srv/name", "fs_type": "none",
                "options": "bind", "dump": 2, "pass": 0,
                "make_dirs": ["/etc/hostname", "/srv/name"]}]
    got = files.fstab(Step("fstab", {"entries": entries}))
    assert [c[-1] for c in runner.calls] == ["/dev/vda1"]       # one lookup: the device's
    assert got["fstab"].splitlines()[1:] == [
        "UUID=1111-2222\t/\text4\tdefaults\t0\t1",
        "tmpfs\t/my/tmpfs\ttmpfs\tsize=1m\t0\t0",
        "/etc/hostname\t/srv/name\tnone\tbind\t2\t0"]
    assert (root / "etc/fstab").read_text() == got["fstab"]
    assert os.path.isdir(root / "my/tmpfs")
    assert (root / "etc/hostname").read_text() == "node\n"        # a file source stays one
    assert os.path.isdir(root / "data/name") and not os.path.exists("/data/name")


ROOT_ENTRY = {"device": "/dev/vda1", "mount_point": "/", "fs_type": "xfs",
              "options": "defaults", "dump": 0, "pass": 1}


def _image(root, family):
    from tests.unit.drivers import image_trees
    if family == "debian":
        image_trees.debian(root)
    else:
        image_trees.rhel(root, family, selinux="permissive" if family == "alma8" else "enforcing")


@pytest.mark.parametrize("family,path", [("rocky9", "etc/mdadm.conf"), ("rhel9", "etc/mdadm.conf"),
                                         ("debian", "etc/mdadm/mdadm.conf")])
def test_mdadm_conf_goes_where_the_images_family_reads_it(tmp_path, family, path):
    root = tmp_path / "t"
    _image(root, family)
    files = TargetFiles(Blkid(), str(root), SimpleNamespace(stack=[str(root)]))
    got = files.mdadm_conf(Step("mdadm_conf", {"arrays": []}))
    assert got["path"] == "/" + path
    assert (root / path).read_text() == got["mdadm_conf"]
    other = {"etc/mdadm.conf", "etc/mdadm/mdadm.conf"} - {path}
    assert not os.path.exists(root / other.pop())


@pytest.mark.parametrize("family,relabel", [("rocky9", True), ("alma8", False),
                                            ("debian", False)])
def test_autorelabel_when_the_image_runs_selinux_enforcing(tmp_path, family, relabel):
    root = tmp_path / "t"
    _image(root, family)
    files = TargetFiles(Blkid(), str(root), SimpleNamespace(stack=[str(root)]))
    got = files.fstab(Step("fstab", {"entries": [ROOT_ENTRY]}))
    assert os.path.exists(root / ".autorelabel") == relabel
    assert got.get("autorelabel", False) == relabel


@pytest.mark.parametrize("family,written", [("rocky9", True), ("debian", False)])
def test_a_rhel_image_without_multipath_conf_gets_mpathconfs(tmp_path, family, written):
    from tests.unit.drivers import image_trees
    root = tmp_path / "t"
    _image(root, family)
    image_trees.tool(root, "usr/sbin/multipath")
    files = TargetFiles(Blkid(), str(root), SimpleNamespace(stack=[str(root)]))
    got = files.multipath_conf(Step("multipath_conf", {"wwids": ["3600a0b800012"]}))
    assert "/3600a0b800012/" in (root / "etc/multipath/wwids").read_text()
    conf = root / "etc/multipath.conf"
    assert conf.exists() == written and ("conf" in got) == written
    if written:
        assert "find_multipaths yes" in conf.read_text()
        conf.write_text("defaults { find_multipaths strict }\n")     # the image's own stays
        files.multipath_conf(Step("multipath_conf", {"wwids": ["3600a0b800012"]}))
        assert conf.read_text() == "defaults { find_multipaths strict }\n"
