import pytest

from provision_agent.drivers import bootloader, grub_config
from provision_agent.errors import ImageError
from provision_agent.run.runner import Result


def _boot(tmp_path, names):
    boot = tmp_path / "boot"
    boot.mkdir(parents=True, exist_ok=True)
    for n in names:
        (boot / n).write_text("")
    return boot


def test_kernels_newest_first_with_their_initrds(tmp_path):
    boot = _boot(tmp_path, ["vmlinuz-6.1.0-9-amd64", "vmlinuz-6.1.0-10-amd64",
                            "initrd.img-6.1.0-10-amd64", "vmlinuz-5.10.0-1",
                            "initramfs-5.10.0-1.img",
                            "vmlinuz-6.1.0-9-amd64.sig", "config-6.1.0-10-amd64"])
    assert grub_config.kernels(str(boot)) == [("6.1.0-10-amd64", "initrd.img-6.1.0-10-amd64"),
                                              ("6.1.0-9-amd64", None),
                                              ("5.10.0-1", "initramfs-5.10.0-1.img")]


def test_render_finds_boot_by_uuid_and_uses_paths_relative_to_it():
    text = grub_config.render("Debian", [("6.1", "initrd.img-6.1")], "B-UUID", "ext2", "",
                              "root=UUID=R console=ttyS0")
    assert "search --no-floppy --fs-uuid --set=root B-UUID" in text
    assert "    linux /vmlinuz-6.1 root=UUID=R console=ttyS0\n" in text
    assert "    initrd /initrd.img-6.1\n" in text
    assert "insmod ext2" in text and "insmod lvm" in text and "insmod mdraid1x" in text
    same_fs = grub_config.render("Debian", [("6.1", None)], "R", "xfs", "/boot", "")
    assert "    linux /boot/vmlinuz-6.1\n" in same_fs and "initrd" not in same_fs
    assert "insmod xfs" in same_fs


class FindmntRunner:
    """Answers findmnt -o COLUMNS from one mount's "UUID FSTYPE TARGET"."""

    def __init__(self, mount):
        self.mount = dict(zip(("UUID", "FSTYPE", "TARGET"), mount.split()))
        self.calls = []

    def run(self, argv, **kw):
        argv = [str(a) for a in argv]
        self.calls.append(argv)
        out = ""
        if argv[0] == "findmnt" and self.mount:
            out = " ".join(self.mount.get(c, "") for c in argv[argv.index("-o") + 1].split(","))
        return Result(tuple(argv), 0, out + "\n", "", 0.0)


@pytest.mark.parametrize("separate", [True, False])
def test_write_knows_whether_boot_is_its_own_filesystem(tmp_path, separate):
    _boot(tmp_path, ["vmlinuz-6.1", "initrd.img-6.1"])
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/os-release").write_text('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n')
    where = tmp_path / "boot" if separate else tmp_path
    path = grub_config.write(FindmntRunner(f"U1 ext4 {where}"), str(tmp_path), "root=UUID=X")
    text = open(path).read()
    assert path == str(tmp_path / "boot/grub/grub.cfg")
    assert "menuentry 'Debian GNU/Linux 12 (bookworm), Linux 6.1'" in text
    assert ("linux /vmlinuz-6.1 root=UUID=X" if separate
            else "linux /boot/vmlinuz-6.1 root=UUID=X") in text


def test_no_kernel_is_an_image_error(tmp_path):
    _boot(tmp_path, [])
    with pytest.raises(ImageError, match="no vmlinuz"):
        grub_config.write(FindmntRunner(""), str(tmp_path), "")


def test_install_without_image_grub_uses_the_ramdisks_and_writes_its_own_config(tmp_path):
    # an image with a kernel and update-initramfs but no grub tools at all
    tool = tmp_path / "usr/sbin/update-initramfs"
    tool.parent.mkdir(parents=True)
    tool.write_text("")
    tool.chmod(0o755)
    _boot(tmp_path, ["vmlinuz-6.1", "initrd.img-6.1"])
    r = FindmntRunner(f"RU ext4 {tmp_path}")
    bootloader.install(r, str(tmp_path), {"boot_mode": "bios", "targets": ["/dev/vda"],
                                          "kernel_params": "console=ttyS0"})
    grub = [c for c in r.calls if "grub-install" in c]
    assert grub == [["grub-install", "--target=i386-pc", f"--boot-directory={tmp_path}/boot",
                     "/dev/vda"]]
    assert not any("grub-mkconfig" in c for c in r.calls)
    text = (tmp_path / "boot/grub/grub.cfg").read_text()
    assert "linux /boot/vmlinuz-6.1 root=UUID=RU console=ttyS0" in text
