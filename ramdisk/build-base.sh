#!/usr/bin/env bash
# Builds the expensive, rarely changing layer of the ramdisk: a Debian bookworm minbase rootfs
# with the tools provision drives, plus a kernel and its trimmed modules.
# Usage (normally called by ramdisk/build.sh): build-base.sh OUTDIR SOURCES_OR_MIRROR SUITE
# Writes OUTDIR/vmlinuz, OUTDIR/base.cpio.zst, OUTDIR/packages.tsv, OUTDIR/kernel-version.
set -euo pipefail

out=$1 mirror=$2 suite=$3
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/provision-ramdisk-base.XXXXXX")
# The rootfs holds device-less dirs only, but never leave a half-built tree behind.
trap 'rm -rf "$work"' EXIT
root=$work/root

include=$(grep -v -e '^\s*#' -e '^\s*$' "$here/packages.txt" | paste -sd, -)

# The kernel comes from the same mirror as everything else: download it inside the chroot
# and unpack it with dpkg -x, so no initramfs-tools/hooks run and nothing is "installed".
# (/.build, not /tmp: mmdebstrap empties /tmp at the end.)
kernel_hook='set -e
pkg=$(chroot "$1" apt-cache depends linux-image-amd64 | awk "/Depends: linux-image-[0-9]/ {print \$2; exit}")
mkdir -p "$1/.build/kernel"
chroot "$1" sh -c "cd /.build/kernel && apt-get download -q $pkg" 2>&1 | { grep -v unsandboxed || true; }
test -n "$(ls "$1"/.build/kernel/*.deb)"
dpkg-deb -x "$1"/.build/kernel/*.deb "$1/.build/kernel/x"
'

# mmdebstrap's essential set resolves init-system-helpers' "usrmerge | usr-is-merged" to usrmerge
# before our usr-is-merged is seen; usrmerge drags in all of perl (~50 MB, 8 MiB compressed).
perl_hook='set -e
pkgs=$(chroot "$1" dpkg-query -W -f="\${db:Status-Abbrev} \${Package}\n" usrmerge "libfile-find-rule-perl" \
       "libnumber-compare-perl" "libtext-glob-perl" perl "perl-modules-*" "libperl5*" 2>/dev/null \
       | awk "/^ii/ {print \$2}")
[ -z "$pkgs" ] || chroot "$1" apt-get -y -qq purge $pkgs >/dev/null
'

echo "base: mmdebstrap $suite (minbase) from $mirror"
mmdebstrap --mode=root --variant=minbase --quiet \
  --include="$include" \
  --aptopt='APT::Install-Recommends "false"' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --customize-hook="$kernel_hook" \
  --customize-hook="$perl_hook" \
  --customize-hook='chroot "$1" dpkg-query -W -f="\${Package}\t\${Version}\t\${Installed-Size}\n" > "$1/.build/packages.tsv"' \
  "$suite" "$root" "$mirror"

# Kernel: keep only what a storage ramdisk on virtual or real servers needs.
kx=$root/.build/kernel/x
kver=$(ls "$kx/lib/modules")
cp "$kx/boot/vmlinuz-$kver" "$out/vmlinuz"
echo "$kver" > "$out/kernel-version"
mods=$kx/lib/modules/$kver
keep=(
  kernel/block kernel/drivers/md kernel/drivers/block kernel/drivers/scsi kernel/drivers/ata
  kernel/drivers/nvme kernel/drivers/virtio kernel/drivers/cdrom kernel/drivers/firmware
  kernel/drivers/net/virtio_net.ko kernel/drivers/net/net_failover.ko
  kernel/drivers/net/ethernet/intel/e1000 kernel/drivers/net/ethernet/intel/e1000e
  kernel/drivers/char/hw_random kernel/drivers/char/virtio_console.ko
  kernel/net/core kernel/net/packet
  kernel/fs/ext4 kernel/fs/jbd2 kernel/fs/mbcache.ko kernel/fs/xfs kernel/fs/fat kernel/fs/btrfs
  kernel/fs/isofs kernel/fs/nls kernel/fs/efivarfs kernel/fs/overlayfs kernel/fs/squashfs
  kernel/crypto kernel/arch/x86/crypto kernel/lib
)
dest=$root/lib/modules/$kver
mkdir -p "$dest"
for k in "${keep[@]}"; do
  [ -e "$mods/$k" ] || continue
  mkdir -p "$dest/$(dirname "$k")"
  cp -a "$mods/$k" "$dest/$(dirname "$k")/"
done
# Fibre Channel / iSCSI offload HBAs are the largest SCSI drivers (~8 MB); a provisioning ramdisk
# writes to local disks.
for big in qla2xxx qla4xxx lpfc qedf qedi bfa csiostor be2iscsi bnx2i bnx2fc cxgbi fcoe fnic snic \
           pm8001 esas2r; do
  rm -rf "$dest/kernel/drivers/scsi/$big"
done
cp -a "$mods"/modules.order "$mods"/modules.builtin* "$dest/"
chroot "$root" /sbin/depmod -a "$kver"
mv "$root/.build/packages.tsv" "$out/packages.tsv"
rm -rf "$root/.build"

# Size: nothing in the ramdisk reads these.
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/cache/debconf/*-old \
       "$root"/usr/share/man "$root"/usr/share/locale "$root"/usr/share/info \
       "$root"/usr/share/lintian "$root"/var/log/*.log "$root"/usr/lib/udev/hwdb.d

echo "base: packing $(du -sh "$root" | cut -f1) of rootfs"
(cd "$root" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet) \
  | zstd -q -T0 -10 -o "$out/base.cpio.zst"
