"""A / on a multipath disk, rebuilt by a Debian image's dracut: dracut 059's multipath module
installs the udev rules by RHEL's file names, which Debian's multipath-tools and kpartx do
not use, so the rebuild names the image's own rules and their helpers (drivers/dracut.py,
multipath_files); and dracut 059 enables multipathd.socket in the initramfs, whose socket
activation after initrd-parse-etc stopped multipathd cancels the switch root, so the socket is
masked in the initramfs (masked_units). Trees laid out as Debian 12's packages lay them out
(merged /usr)."""

import os

from provision_agent.drivers import chroot, dracut
from tests.unit.fakes import FakeRunner

# Debian 12: multipath-tools, kpartx, util-linux (partx)
DEBIAN_RULES = ("56-dm-mpath.rules", "56-dm-parts.rules", "60-kpartx.rules",
                "60-multipath.rules", "68-del-part-nodes.rules")
PLUGINS = ("libcheckdirectio.so", "libchecktur.so", "libprioalua.so", "libprioconst.so")
OTHER_RULES = ("55-dm.rules", "56-lvm.rules", "60-persistent-storage-dm.rules",
               "64-md-raid-assembly.rules", "69-lvm.rules")


def _file(root, rel, mode=0o644):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    path.chmod(mode)


def _debian_dracut_image(root):
    for name in DEBIAN_RULES + OTHER_RULES:
        _file(root, f"usr/lib/udev/rules.d/{name}")
    _file(root, "usr/lib/udev/kpartx_id", 0o755)
    _file(root, "usr/bin/partx", 0o755)
    _file(root, "usr/bin/dracut", 0o755)
    for plugin in PLUGINS:
        _file(root, f"usr/lib/multipath/{plugin}")
    for module in ("90multipath", "90lvm", "90mdraid", "90dm"):
        (root / "usr/lib/dracut/modules.d" / module).mkdir(parents=True)
    for top in ("lib", "bin", "sbin"):       # merged /usr, as bookworm installs
        os.symlink(f"usr/{top}", root / top)


class _SeesIncludes(FakeRunner):
    """Records, at each dracut run, what the directory given to --include holds in the
    target (name -> link target): what dracut copies into the initramfs."""

    def __init__(self, root):
        super().__init__()
        self.root, self.included = root, []

    def run(self, argv, **kw):
        argv = [str(a) for a in argv]
        if "--include" in argv:
            src = argv[argv.index("--include") + 1]
            where = os.path.join(self.root, src.lstrip("/"))
            self.included.append({n: os.readlink(os.path.join(where, n))
                                  for n in sorted(os.listdir(where))})
        return super().run(argv, **kw)


def _dracut_runs(runner):
    runs = [call[call.index(chroot.ENTER) + 2:] for call in runner.calls if chroot.ENTER in call]
    return [run for run in runs if run and run[0] == "dracut"]


def test_a_multipath_root_gets_the_images_own_rules_and_helpers_once(tmp_path):
    _debian_dracut_image(tmp_path)
    r = FakeRunner()
    dracut.rebuild(chroot.Chroot(r, str(tmp_path)), ["6.1.0-56-amd64"], ["lvm", "multipath"],
                   600)
    (run,) = _dracut_runs(r)
    assert run[:4] == ["dracut", "--force", "--add", "lvm multipath"]
    assert run[4] == "--install" and run[-2:] == ["--kver", "6.1.0-56-amd64"]
    assert run[6:9] == ["--include", dracut.INITRD_MASK_DIR, "/etc/systemd/system"]
    # each once, under /usr/lib (not again through the /lib link); no other package's rules
    assert run[5].split() == [f"/usr/lib/udev/rules.d/{n}" for n in DEBIAN_RULES] + [
        "/usr/lib/udev/kpartx_id", "/usr/bin/partx"] + [f"/usr/lib/multipath/{p}" for p in PLUGINS]


def test_every_kernel_regenerated_gets_them_too(tmp_path):
    _debian_dracut_image(tmp_path)
    r = FakeRunner()
    dracut.rebuild(chroot.Chroot(r, str(tmp_path)), [], ["multipath"], 600)
    (run,) = _dracut_runs(r)
    assert run[:5] == ["dracut", "--force", "--add", "multipath", "--install"]
    assert {"/usr/lib/udev/rules.d/60-multipath.rules", "/usr/lib/multipath/libchecktur.so"} \
        <= set(run[5].split())
    assert run[-1] == "--regenerate-all"


def test_a_root_without_multipath_installs_nothing_more(tmp_path):
    _debian_dracut_image(tmp_path)
    r = FakeRunner()
    dracut.rebuild(chroot.Chroot(r, str(tmp_path)), ["6.1.0-56-amd64"], ["mdraid", "lvm"], 600)
    assert _dracut_runs(r) == [["dracut", "--force", "--add", "mdraid lvm",
                                "--kver", "6.1.0-56-amd64"]]


def test_multipathd_socket_is_masked_in_the_initramfs_and_nothing_stays_in_the_image(tmp_path):
    """dracut 059 (Debian 12) enables multipathd.socket in the initramfs: after initrd-parse-etc
    stopped multipathd (it conflicts with initrd-cleanup), the cleanup hook's `multipath -l`
    started it again through the socket and the switch root never came. Each dracut run gets
    the socket masked (a /dev/null link in /etc/systemd/system of the initramfs), from a
    directory in the target's /run, the chroot's own tmpfs, not in the image's files."""
    _debian_dracut_image(tmp_path)
    r = _SeesIncludes(str(tmp_path))
    dracut.rebuild(chroot.Chroot(r, str(tmp_path)), ["6.1.0-55-amd64", "6.1.0-56-amd64"],
                   ["lvm", "multipath"], 600)
    runs = _dracut_runs(r)
    assert len(runs) == 2
    for run in runs:
        i = run.index("--include")
        assert run[i + 2] == "/etc/systemd/system", run
        assert run[i + 1].startswith("/run/"), run
    assert r.included == [{"multipathd.socket": "/dev/null"}] * 2


def test_a_root_without_multipath_masks_nothing(tmp_path):
    _debian_dracut_image(tmp_path)
    r = _SeesIncludes(str(tmp_path))
    dracut.rebuild(chroot.Chroot(r, str(tmp_path)), ["6.1.0-56-amd64"], ["lvm"], 600)
    assert "--include" not in _dracut_runs(r)[0] and r.included == []
    assert not (tmp_path / "run").exists()
