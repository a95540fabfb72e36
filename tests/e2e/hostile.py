"""A hostile test OS for the multipath boot (tests/e2e/test_multipath.py, the BIOS boot that
rebuilds the image's initramfs and runs its own grub): the test OS tar with

- etc/fstab a link to an absolute path (/etc/fstab.real): provision must not follow it out of
  the target (it used to write the ramdisk's own file);
- an initramfs-tools hook that, run by update-initramfs in provision's chroot as root, tries
  to read and overwrite the conductor's job file in the ramdisk's /run, directly, through
  /proc/1/root and by leaving the chroot (the double chroot, in the image's perl), and to
  read a file of the ramdisk's root, and records what it saw in the target's
  /var/log/provision-chroot-probe.

Derived from root.tar.zst, so it is cached next to it under the same key and the hook's
digest.
"""

import hashlib
import pathlib
import shutil
import subprocess

NODE = "probe-node"
JOB_FILE = f"/run/provision-ironic/{NODE}/exit_code"
JOB_TEXT = "CONDUCTOR-READS-THIS"
RAMDISK_MARKER = "/etc/provision-ramdisk-marker"
PROBE_LOG = "/var/log/provision-chroot-probe"
# chroot into a subdirectory while the working directory stays outside, climb `..`, chroot
# there; then read the job file and overwrite it
ESCAPE = ('mkdir "/run/esc"; chroot "/run/esc" or die; chdir ".." for 1 .. 64; '
          'chroot "." or die; my $t = "absent"; if (open(my $f, "<", $ARGV[0])) { $t = <$f>; '
          'chomp $t; } if (open(my $w, ">", $ARGV[0])) { print $w "TAMPERED\\n"; } print $t;')
HOOK = f"""#!/bin/sh
# what an image's initramfs hook reaches of the ramdisk that provisions it
case "$1" in prereqs) exit 0 ;; esac
ESCAPE='{ESCAPE}'
{{
  echo "job=$(cat {JOB_FILE} 2>/dev/null || echo absent)"
  echo "via-pid1=$(cat /proc/1/root{JOB_FILE} 2>/dev/null || echo absent)"
  echo "ramdisk-root=$(cat /proc/1/root{RAMDISK_MARKER} 2>/dev/null || echo absent)"
  echo "pid1=$(cat /proc/1/comm)"
  echo "udev-entries=$(ls /run/udev/data 2>/dev/null | wc -l)"
  echo "escape=$(perl -e "$ESCAPE" {JOB_FILE} 2>/dev/null || echo perl-failed)"
}} > {PROBE_LOG}
echo TAMPERED > {JOB_FILE} 2>/dev/null
echo TAMPERED > /proc/1/root{JOB_FILE} 2>/dev/null
exit 0
"""


def tar(test_os):
    out = test_os / f"root-hostile-{hashlib.sha256(HOOK.encode()).hexdigest()[:12]}.tar.zst"
    if out.exists():
        return out
    plain = test_os / "root-hostile.tar.part"
    subprocess.run(["zstd", "-q", "-d", "-f", str(test_os / "root.tar.zst"), "-o", str(plain)],
                   check=True)
    subprocess.run(["tar", "--delete", "-f", str(plain), "./etc/fstab"], check=False)
    extra = test_os / "hostile"
    shutil.rmtree(extra, ignore_errors=True)
    hooks = extra / "etc" / "initramfs-tools" / "hooks"
    hooks.mkdir(parents=True)
    (extra / "etc" / "fstab").symlink_to("/etc/fstab.real")
    (hooks / "zz-provision-probe").write_text(HOOK)
    (hooks / "zz-provision-probe").chmod(0o755)
    subprocess.run(["tar", "-rf", str(plain), "--owner=0", "--group=0", "-C", str(extra),
                    "./etc/fstab", "./etc/initramfs-tools/hooks/zz-provision-probe"], check=True)
    shutil.rmtree(extra)
    subprocess.run(["zstd", "-q", "-T0", "--rm", "-f", str(plain), "-o", str(out) + ".part"],
                   check=True)
    pathlib.Path(str(out) + ".part").rename(out)
    return out


def prepare(vm):
    """Before provisioning: a conductor's job file in the ramdisk's /run, a file in its root."""
    vm.ssh(f"mkdir -p {JOB_FILE.rsplit('/', 1)[0]} && echo {JOB_TEXT} > {JOB_FILE} && "
           f"echo RAMDISK-ROOT > {RAMDISK_MARKER}")


def seen(vm, root):
    """After provisioning, with the target's / on device `root`: {"ramdisk fstab":
    clean|LEAKED, "job file": its text now, "target fstab": the target's link and what it
    points to, "probe": {what the hook saw}}."""
    leaked = vm.ssh("test -e /etc/fstab.real && echo LEAKED || echo clean").stdout.strip()
    job = vm.ssh(["cat", JOB_FILE]).stdout.strip()
    fstab = vm.ssh(f"mkdir -p /mnt/t && mount {root} /mnt/t && readlink /mnt/t/etc/fstab && "
                   "cat /mnt/t/etc/fstab.real").stdout
    probe = vm.ssh(f"cat /mnt/t{PROBE_LOG}; umount /mnt/t", check=False).stdout
    return {"ramdisk fstab": leaked, "job file": job, "target fstab": fstab,
            "probe": dict(ln.split("=", 1) for ln in probe.splitlines() if "=" in ln)}
