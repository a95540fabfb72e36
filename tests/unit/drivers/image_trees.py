"""Image root trees laid out as the distributions lay them out, built in a test's tmp dir.

The layouts follow what the packages install (documented file lists, not a booted image):
- RHEL 9 family (Rocky 9, AlmaLinux 9, CentOS Stream 9, RHEL 9): /usr merged (sbin -> usr/sbin),
  grub2-tools (grub2-mkconfig, grub2-install), dracut with modules.d/90mdraid, 90lvm,
  90crypt, 90multipath, kernels as /boot/vmlinuz-<ver> + /boot/initramfs-<ver>.img, BLS entries
  /boot/loader/entries/<machine-id>-<ver>.conf, shim-x64 and grub2-efi-x64 in
  /boot/efi/EFI/<vendor>/ (shimx64.efi, grubx64.efi, mmx64.efi, BOOTX64.CSV, and grub.cfg: a
  stub that loads /boot/grub2/grub.cfg) and EFI/BOOT/ (BOOTX64.EFI, fbx64.efi),
  /etc/selinux/config SELINUX=enforcing.
- RHEL 8 family: the same, but EFI/<vendor>/grub.cfg is the whole configuration and the BLS
  entries' options are `$kernelopts $tuned_params` (grubenv holds kernelopts).
- Debian 12: grub-install, grub-mkconfig, update-initramfs, /boot/initrd.img-<ver>.
"""

import os

MACHINE_ID = "0123456789abcdef0123456789abcdef"
BUILDER_UUID = "11111111-2222-3333-4444-555555555555"
EL9 = "5.14.0-427.13.1.el9_4.x86_64"
RELEASES = {
    "rocky9": ("rocky", "Rocky Linux", "9.4", "rhel centos fedora", EL9),
    "alma9": ("almalinux", "AlmaLinux", "9.4", "rhel centos fedora", EL9),
    "centos9": ("centos", "CentOS Stream", "9", "rhel fedora", "5.14.0-480.el9.x86_64"),
    "rhel9": ("rhel", "Red Hat Enterprise Linux", "9.4", "fedora", EL9),
    "alma8": ("almalinux", "AlmaLinux", "8.10", "rhel centos fedora", "4.18.0-553.el8_10.x86_64"),
    "rocky8": ("rocky", "Rocky Linux", "8.10", "rhel centos fedora", "4.18.0-553.el8_10.x86_64"),
}
VENDOR = {"rocky": "rocky", "almalinux": "almalinux", "centos": "centos", "rhel": "redhat"}
SHIM_BYTES = b"MZ shim " + os.urandom(64)
GRUB_BYTES = b"MZ grub " + os.urandom(64)
DRACUT_MODULES = ("90mdraid", "90lvm", "90crypt", "90multipath", "95rootfs-block")


def put(root, rel, data=b"", mode=0o644):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    path.chmod(mode)
    return path


def tool(root, rel):
    return put(root, rel, b"#!/bin/sh\nexit 0\n", 0o755)


def rhel(root, release="rocky9", selinux="enforcing", esp=True, removable=True,
         dracut_modules=DRACUT_MODULES, bios_tools=True):
    os_id, name, version, like, kver = RELEASES[release]
    vendor = VENDOR[os_id]
    eight = version.startswith("8")
    (root / "usr/sbin").mkdir(parents=True, exist_ok=True)
    (root / "usr/bin").mkdir(parents=True, exist_ok=True)
    os.symlink("usr/sbin", root / "sbin")
    os.symlink("usr/bin", root / "bin")
    put(root, "etc/os-release", f'NAME="{name}"\nVERSION="{version}"\nID="{os_id}"\n'
        f'ID_LIKE="{like}"\nVERSION_ID="{version}"\nPLATFORM_ID="platform:el{version[0]}"\n')
    for t in ("usr/sbin/grub2-mkconfig", "usr/bin/grub2-editenv", "usr/bin/dracut",
              "usr/sbin/grubby", "usr/bin/kernel-install"):
        tool(root, t)
    if bios_tools:
        tool(root, "usr/sbin/grub2-install")
    for m in dracut_modules:
        (root / "usr/lib/dracut/modules.d" / m).mkdir(parents=True)
    put(root, f"boot/vmlinuz-{kver}", b"MZ kernel")
    put(root, f"boot/initramfs-{kver}.img", b"not a cpio")
    options = ("$kernelopts $tuned_params" if eight else
               f"root=UUID={BUILDER_UUID} console=tty0 rd.lvm.lv=rl/root crashkernel=1G-4G:192M "
               "$tuned_params")
    put(root, f"boot/loader/entries/{MACHINE_ID}-{kver}.conf",
        f"title {name} ({kver}) {version}\nversion {kver}\nlinux /vmlinuz-{kver}\n"
        f"initrd /initramfs-{kver}.img $tuned_initrd\noptions {options}\n"
        f"grub_users $grub_users\ngrub_arg --unrestricted\ngrub_class {os_id}\n")
    put(root, "boot/grub2/grubenv", "# GRUB Environment Block\n")
    put(root, "etc/default/grub", 'GRUB_TIMEOUT=5\nGRUB_DISTRIBUTOR="$(sed \'s, release .*$,,g\' '
        '/etc/system-release)"\nGRUB_CMDLINE_LINUX="console=tty0 rd.lvm.lv=rl/root"\n'
        "GRUB_ENABLE_BLSCFG=true\n")
    put(root, "etc/selinux/config", f"# This file controls SELinux\nSELINUX={selinux}\n"
        "SELINUXTYPE=targeted\n")
    if esp:
        efi = f"boot/efi/EFI/{vendor}"
        put(root, f"{efi}/shimx64.efi", SHIM_BYTES)
        put(root, f"{efi}/grubx64.efi", GRUB_BYTES)
        put(root, f"{efi}/mmx64.efi", b"MZ mm")
        put(root, f"{efi}/BOOTX64.CSV", f"shimx64.efi,{name},,This is the boot entry\n"
            .encode("utf-16"))
        put(root, f"{efi}/grub.cfg", "set timeout=5\nload_env -f $prefix/grubenv\nblscfg\n"
            "menuentry 'x' {\n}\n" if eight else
            f"search --no-floppy --root-dev-only --fs-uuid --set=dev {BUILDER_UUID}\n"
            "set prefix=($dev)/grub2\nexport $prefix\nconfigfile $prefix/grub.cfg\n")
        if removable:
            put(root, "boot/efi/EFI/BOOT/BOOTX64.EFI", SHIM_BYTES)
            put(root, "boot/efi/EFI/BOOT/fbx64.efi", b"MZ fallback")
    return {"vendor": vendor, "kver": kver, "name": name,
            "entry": f"boot/loader/entries/{MACHINE_ID}-{kver}.conf"}


def debian(root, os_release=True):
    kver = "6.1.0-28-amd64"
    for t in ("usr/sbin/grub-install", "usr/sbin/grub-mkconfig", "usr/sbin/update-initramfs"):
        tool(root, t)
    if os_release:
        put(root, "etc/os-release", 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n'
            'NAME="Debian GNU/Linux"\nVERSION_ID="12"\nID=debian\n')
    put(root, f"boot/vmlinuz-{kver}", b"MZ kernel")
    put(root, f"boot/initrd.img-{kver}", b"x")
    put(root, "etc/default/grub", 'GRUB_CMDLINE_LINUX=""\n')
    (root / "boot/efi/EFI/debian").mkdir(parents=True)
    return {"kver": kver}
