#!/bin/bash
# Small bootable Debian bookworm test OS for the boot e2e tests, cached outside the clone keyed
# by this script's hash: prints the cache directory holding root.ext4.zst and root.tar.zst.
# `build-debian.sh crypt` builds the flavour the encryption tests boot (cached apart): plus
# cryptsetup-initramfs and clevis (TPM2, Tang; clevis-systemd for volumes opened after the
# root), and virtio_net in the initramfs, since MODULES=dep takes only what the root's block
# devices need and Tang needs the network. The other tests keep the smaller initramfs.
# `build-debian.sh secureboot` adds Debian's signed boot chain (shim-signed: shim signed by
# Microsoft's UEFI CA; grub-efi-amd64-signed: grub signed by Debian; the kernel is signed
# already) for the Secure Boot tests; the plain test OS lacks it on purpose, so it stands for
# an image that cannot boot under Secure Boot. `build-debian.sh iscsi` adds open-iscsi (its
# initramfs logs in to the target / is on; virtio_net in the initramfs, as for crypt).
# `build-debian.sh dracut` builds its initramfs with dracut instead of initramfs-tools (as
# RHEL-family images and some Debian sites do; issue 61): dracut, cryptsetup and clevis-dracut
# (TPM2) in, initramfs-tools and multipath-tools-boot (which needs it) out; dracut's generic
# (not host-only) image, zstd, without its network modules (minbase has no dbus-daemon, which
# they need, and the kernel's postinst failed on them; Tang is proven with initramfs-tools).
# The marker unit (boot-marker.sh, part of the cache key) prints PROVISION-BOOT-OK, the
# configdrive, the multipath maps, the chain of devices under /, and the SSH keys and user data
# it found on a config-2 configdrive to the serial console.
# MODULES=dep (set after the shipped initrd was built): provisioning regenerates the initramfs in
# the VM, and MODULES=most copies ~3000 modules one shell call at a time — over 5 min under TCG;
# dep takes what the VM's own devices need, and the test boots the same VM hardware.
# zstd at level 3: Debian's default COMPRESS=zstd fell back to gzip without the zstd package.
# The tar and the ext4 are compressed at level 10, as the ramdisks are: level 19 took 6.3
# minutes for the tar alone in a cold CI run on 2 cores, for 11 % fewer bytes than level 9
# (the ext4: 158 against 175 MB, 2026-11-27), a few seconds of a VM's download.
# DefaultDeviceTimeoutSec=600s: systemd gives a device in fstab 90 s by default; the multipath
# boot under TCG beside another VM had its /boot md array assembled at 139 s, after systemd
# had given up on it and gone to emergency mode (CI-style run, 2026-11-27).
# No recovery entries: fewer for grub-mkconfig to write. A provision of the test OS in the VM
# spends most of its time in update-initramfs (163 s) and grub-mkconfig (56 s).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${PROVISION_AGENT_CACHE:-$HOME/.cache/provision-agent}
flavour=${1:-}
case $flavour in
  "") extra="" prefix="" ;;
  crypt) extra=",cryptsetup-initramfs,clevis-luks,clevis-initramfs,clevis-tpm2,clevis-systemd"
         prefix="crypt-" ;;
  secureboot) extra=",shim-signed,grub-efi-amd64-signed" prefix="secureboot-" ;;
  iscsi) extra=",open-iscsi" prefix="iscsi-" ;;
  dracut) extra=",dracut,cryptsetup,clevis-luks,clevis-dracut,clevis-tpm2" prefix="dracut-" ;;
  *) echo "unknown flavour $flavour (none, crypt, secureboot, iscsi or dracut)" >&2; exit 2 ;;
esac
key=$( (cat "$here/build-debian.sh" "$here/boot-marker.sh"; echo "$flavour") | sha256sum | cut -c1-16)
out=$cache/test-os-$prefix$key
if [ -s "$out/root.ext4.zst" ] && [ -s "$out/root.tar.zst" ]; then echo "$out"; exit 0; fi
mkdir -p "$cache"
# two test workers (xdist) or sessions asking at once: one builds, the other waits and reuses it
exec 9>"$cache/.test-os${flavour:+-$flavour}.lock"
flock 9
if [ -s "$out/root.ext4.zst" ] && [ -s "$out/root.tar.zst" ]; then echo "$out"; exit 0; fi
# the mirror: the host's own apt sources for bookworm (as the ramdisk build does), or $TEST_OS_MIRROR
mirror=${TEST_OS_MIRROR:-}
if [ -z "$mirror" ]; then
  for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list; do
    [ -s "$f" ] && grep -qE "^(Suites:.*\bbookworm\b|deb .* bookworm )" "$f" && { mirror=$f; break; }
  done
fi
[ -n "$mirror" ] || { echo "no apt source for bookworm; set TEST_OS_MIRROR" >&2; exit 1; }
work=$(mktemp -d "$cache/test-os-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
initramfs_tool=",multipath-tools-boot,initramfs-tools"
initramfs_conf='printf "MODULES=dep\nCOMPRESS=zstd\nCOMPRESSLEVEL=3\n" > "$1/etc/initramfs-tools/conf.d/provision-test-modules"'
if [ "$flavour" = dracut ]; then
  initramfs_tool=""
  # before the kernel is installed: its postinst builds the first initramfs with this
  initramfs_conf='true'
  dracut_conf='mkdir -p "$1/etc/dracut.conf.d" && printf "hostonly=\"no\"\ncompress=\"zstd\"\nomit_dracutmodules+=\" clevis-pin-tang ifcfg network systemd-networkd dbus \"\n" > "$1/etc/dracut.conf.d/provision-test.conf"'
fi
mmdebstrap --variant=minbase --skip=check/empty \
  ${dracut_conf:+--essential-hook="$dracut_conf"} \
  --include=linux-image-amd64,systemd-sysv,grub-pc-bin,grub-efi-amd64-bin,grub2-common,mdadm,lvm2,multipath-tools,zstd,util-linux,udev,e2fsprogs,dosfstools$initramfs_tool$extra \
  --dpkgopt=path-exclude=/usr/share/doc/* --dpkgopt=path-exclude=/usr/share/man/* \
  --dpkgopt=path-exclude=/usr/share/locale/* \
  --customize-hook='mkdir -p "$1/etc/default" && echo "GRUB_TERMINAL=serial" >> "$1/etc/default/grub" && echo "GRUB_TIMEOUT=1" >> "$1/etc/default/grub" && echo "GRUB_DISABLE_RECOVERY=true" >> "$1/etc/default/grub"' \
  --customize-hook="upload $here/boot-marker.sh /usr/local/sbin/boot-marker" \
  --customize-hook='chmod 755 "$1/usr/local/sbin/boot-marker"' \
  --customize-hook='cat > "$1/etc/systemd/system/boot-marker.service" <<UNIT
[Unit]
Description=print the provision boot marker
After=local-fs.target systemd-udev-settle.service
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/boot-marker
[Install]
WantedBy=multi-user.target
UNIT
ln -s /etc/systemd/system/boot-marker.service "$1/etc/systemd/system/multi-user.target.wants/boot-marker.service"' \
  --customize-hook="$initramfs_conf" \
  --customize-hook='mkdir -p "$1/etc/systemd/system.conf.d" && printf "[Manager]\nDefaultDeviceTimeoutSec=600s\n" > "$1/etc/systemd/system.conf.d/provision-test-emulated.conf"' \
  --customize-hook="if [ '$flavour' = crypt ] || [ '$flavour' = iscsi ]; then echo virtio_net >> \"\$1/etc/initramfs-tools/modules\"; fi" \
  --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*' \
  bookworm "$work/root" "$mirror"
tar -C "$work/root" --numeric-owner -cf - . | zstd -q -T0 -10 -o "$work/root.tar.zst"
size=$(du -sm "$work/root" | cut -f1)
truncate -s $((size * 13 / 10 + 64))M "$work/root.ext4"
mkfs.ext4 -q -L root -d "$work/root" "$work/root.ext4"
e2fsck -fy "$work/root.ext4" >/dev/null || true
resize2fs -M "$work/root.ext4" >/dev/null 2>&1
zstd -q -T0 -10 --rm -o "$work/root.ext4.zst" "$work/root.ext4"
rm -rf "$work/root"
mkdir -p "$out" && mv "$work/root.ext4.zst" "$work/root.tar.zst" "$out/"
# keep only the current key
for d in "$cache"/test-os-$prefix????????????????; do [ "$d" = "$out" ] || rm -rf "$d"; done
echo "$out"
