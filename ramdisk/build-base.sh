#!/usr/bin/env bash
# Builds the expensive, rarely changing layer of the ramdisk: a Debian bookworm minbase rootfs
# with the tools provision drives, plus a kernel and its trimmed modules.
# Usage (normally called by ramdisk/build.sh): build-base.sh OUTDIR SOURCES_OR_MIRROR SUITE
#   EXTRA_MODULES="kernel/drivers/... ..."   more module files or directories to keep
#   EXTRA_FIRMWARE_PACKAGES="firmware-... ..."   more Debian firmware packages to take files from
#   NO_FIRMWARE=1   neither firmware-packages.txt nor the non-free-firmware component
#   EXTRA_PACKAGES="pkg /abs/path/x.deb ..."   more Debian packages (build.sh --extra-package)
# Writes OUTDIR/vmlinuz, OUTDIR/base.cpio.zst, OUTDIR/packages.tsv, OUTDIR/kernel-version,
# OUTDIR/firmware.tsv (every firmware file a kept module names: present or missing).
set -euo pipefail

out=$1 mirror=$2 suite=$3
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/provision-ramdisk-base.XXXXXX")
# The rootfs holds device-less dirs only, but never leave a half-built tree behind.
trap 'rm -rf "$work"' EXIT
root=$work/root

firmware_list=$here/firmware-packages.txt
[ -n "${NO_FIRMWARE:-}" ] && firmware_list=/dev/null
include=$(grep -h -v -e '^\s*#' -e '^\s*$' "$here/packages.txt" "$firmware_list" \
          | tr -s ' \n' '\n' | cat - <(tr -s ' ' '\n' <<< "${EXTRA_FIRMWARE_PACKAGES:-}") \
                  <(tr -s ' ' '\n' <<< "${EXTRA_PACKAGES:-}" | grep -v '\.deb$') \
          | grep -v '^$' | paste -sd, -)

# NIC firmware lives in Debian's non-free-firmware component (bookworm and later): add it to
# whatever sources we were given. A sources file is copied with the component appended to its
# entries; a plain mirror URL gets it through mmdebstrap's --components.
components=(--components=main,non-free-firmware)
if [ -n "${NO_FIRMWARE:-}" ]; then
  components=()
elif [ -f "$mirror" ]; then
  sed -E -e '/^Components:/{/non-free-firmware/!s/$/ non-free-firmware/}' \
         -e '/^deb(-src)? /{/non-free-firmware/!s/$/ non-free-firmware/}' \
         "$mirror" > "$work/sources"
  [[ $mirror == *.sources ]] && mv "$work/sources" "$work/sources.sources" \
    && mirror=$work/sources.sources || mirror=$work/sources
  components=()
fi

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

# jfsutils, ntfs-3g, reiserfsprogs: provision runs their mkfs only; their fsck, debug, tune,
# resize and FUSE tools are 2.3 MB (0.75 MiB compressed). /bin/ntfs-3g stays: its postinst
# chmods it.
fs_trim=()
for f in /sbin/fsck.jfs /sbin/jfs_fsck /sbin/jfs_debugfs /sbin/jfs_fscklog /sbin/jfs_logdump \
         /sbin/jfs_tune '/bin/ntfs[a-z]*' '/sbin/ntfs[a-z]*' /usr/bin/ntfsdecrypt /bin/lowntfs-3g \
         /bin/ntfs-3g.probe /sbin/mount.lowntfs-3g /sbin/debugreiserfs /sbin/debugfs.reiserfs \
         /sbin/reiserfsck /sbin/fsck.reiserfs /sbin/reiserfstune /sbin/tunefs.reiserfs \
         /sbin/resize_reiserfs; do
  fs_trim+=("--dpkgopt=path-exclude=$f")
done

# A vendor's own .deb files (build.sh --extra-package FILE.deb): installed inside the finished
# chroot by its apt, which takes their dependencies from the mirror; mmdebstrap's own install
# step failed when given a local path here (2026-11-29, apt in its setup stage).
deb_hooks=()
for deb in ${EXTRA_PACKAGES:-}; do
  [[ $deb == *.deb ]] || continue
  deb_hooks+=(--customize-hook="mkdir -p \"\$1/.build/debs\"" --customize-hook="copy-in $deb /.build/debs")
done
[ "${#deb_hooks[@]}" -eq 0 ] || deb_hooks+=(--customize-hook='chroot "$1" sh -c "apt-get install -y -qq /.build/debs/*.deb >/dev/null"')

echo "base: mmdebstrap $suite (minbase) from $mirror"
mmdebstrap --mode=root --variant=minbase --quiet "${components[@]}" \
  --include="$include" \
  --aptopt='APT::Install-Recommends "false"' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' "${fs_trim[@]}" \
  --customize-hook="$kernel_hook" \
  --customize-hook="$perl_hook" \
  "${deb_hooks[@]}" \
  --customize-hook='chroot "$1" dpkg-query -W -f="\${Package}\t\${Version}\t\${Installed-Size}\n" > "$1/.build/packages.tsv"' \
  "$suite" "$root" "$mirror"

# Kernel: keep only what a storage ramdisk on virtual or real servers needs: disks, RAID,
# filesystems, crypto, and every Ethernet driver the kernel has (servers ship Intel, Broadcom,
# Mellanox, QLogic, Emulex, Cisco, Solarflare, Netronome NICs; cloud bare metal ENA, gVNIC,
# MANA): a ramdisk without its NIC's driver never heartbeats, which Ironic reports only as a
# timeout. All of drivers/net/ethernet is ~8 MB of the compressed initramfs (measured
# 2026-11-28), less than choosing families would save being worth a missed NIC.
# Fusion-MPT (mptsas, mptspi: LSI SAS1068 and 53c1030 HBAs of older servers, and qemu's
# mptsas1068) lives outside drivers/scsi; USB host controllers and usb-storage/uas let the
# ramdisk see a USB stick or a BMC's virtual media, so that it is listed as removable and left
# alone rather than unknown.
kx=$root/.build/kernel/x
kver=$(ls "$kx/lib/modules")
cp "$kx/boot/vmlinuz-$kver" "$out/vmlinuz"
echo "$kver" > "$out/kernel-version"
mods=$kx/lib/modules/$kver
keep=(
  kernel/block kernel/drivers/md kernel/drivers/block kernel/drivers/scsi kernel/drivers/ata
  kernel/drivers/nvme kernel/drivers/virtio kernel/drivers/cdrom kernel/drivers/firmware
  kernel/drivers/message/fusion kernel/drivers/usb/host kernel/drivers/usb/storage
  kernel/drivers/net/virtio_net.ko kernel/drivers/net/net_failover.ko
  kernel/drivers/net/ethernet kernel/drivers/net/vmxnet3 kernel/drivers/net/hyperv
  kernel/drivers/char/hw_random kernel/drivers/char/virtio_console.ko
  kernel/net/core kernel/net/packet
  kernel/fs/ext4 kernel/fs/jbd2 kernel/fs/mbcache.ko kernel/fs/xfs kernel/fs/fat kernel/fs/btrfs
  kernel/fs/isofs kernel/fs/nls kernel/fs/efivarfs kernel/fs/overlayfs kernel/fs/squashfs
  kernel/crypto kernel/arch/x86/crypto kernel/lib
  kernel/fs/jfs kernel/fs/reiserfs
)
read -r -a extra_modules <<< "${EXTRA_MODULES:-}"
dest=$root/lib/modules/$kver
mkdir -p "$dest"
for k in "${keep[@]}" "${extra_modules[@]}"; do
  if [ ! -e "$mods/$k" ]; then
    # ours may name what another kernel lacks; a site's own addition must exist
    [[ " ${extra_modules[*]} " == *" $k "* ]] && { echo "base: no $k in $kver" >&2; exit 1; }
    continue
  fi
  mkdir -p "$dest/$(dirname "$k")"
  cp -a "$mods/$k" "$dest/$(dirname "$k")/"
done
# Fibre Channel / iSCSI offload HBAs are the largest SCSI drivers (~8 MB); a provisioning ramdisk
# writes to local disks. PCMCIA NICs (*_cs) are laptop cards of the 1990s.
for big in qla2xxx qla4xxx lpfc qedf qedi bfa csiostor be2iscsi bnx2i bnx2fc cxgbi fcoe fnic snic \
           pm8001 esas2r; do
  rm -rf "$dest/kernel/drivers/scsi/$big"
done
find "$dest/kernel/drivers/net" -name '*_cs.ko*' -delete
# What the kept modules need (mii, libphy, mdio, ptp, psample, tls, ...): the full tree's
# modules.dep lists each module's whole dependency chain, so one pass is the closure.
chroot "$root" /sbin/depmod -b /.build/kernel/x "$kver"
(cd "$dest" && find kernel -name '*.ko*') | sort > "$work/kept"
awk -F': ' 'NR == FNR { kept[$1] = 1; next }
            ($1 in kept) && NF > 1 { n = split($2, d, " "); for (i = 1; i <= n; i++) print d[i] }' \
    "$work/kept" "$mods/modules.dep" | sort -u | while read -r k; do
  [ -e "$dest/$k" ] && continue
  mkdir -p "$dest/$(dirname "$k")"
  cp -a "$mods/$k" "$dest/$k"
done
cp -a "$mods"/modules.order "$mods"/modules.builtin* "$dest/"
chroot "$root" /sbin/depmod -a "$kver"

# Firmware: the firmware packages put hundreds of MB under /lib/firmware (GPUs, Wi-Fi, ...);
# keep exactly the files the kept modules name (modinfo's firmware fields), symlinks
# dereferenced, and say which are missing: a driver that asks for a file Debian does not ship
# (old cards whose firmware licence forbids it) still binds, or logs why not.
fw=$root/usr/lib/firmware
mv "$fw" "$work/firmware.all" 2>/dev/null || mkdir -p "$work/firmware.all"
mkdir -p "$fw"
cat > "$root/.build/firmware-wanted.sh" <<'EOS'
# prints "FILE MODULE" for each firmware file each module under $1 names
find "$1" -name '*.ko*' | while read -r m; do
  for f in $(modinfo -F firmware "$m"); do echo "$f $(basename "$m" | sed 's/\.ko.*//')"; done
done
EOS
chroot "$root" sh /.build/firmware-wanted.sh "/lib/modules/$kver" \
  | sort -u > "$work/firmware.wanted"
: > "$out/firmware.tsv"
while read -r name module; do
  if [ -e "$work/firmware.all/$name" ]; then
    mkdir -p "$(dirname "$fw/$name")"
    cp -L "$work/firmware.all/$name" "$fw/$name"
    printf '%s\t%s\tpresent\n' "$name" "$module" >> "$out/firmware.tsv"
  else
    printf '%s\t%s\tmissing\n' "$name" "$module" >> "$out/firmware.tsv"
  fi
done < "$work/firmware.wanted"
echo "base: firmware: $(grep -c present "$out/firmware.tsv") files kept" \
     "($(du -sh "$fw" | cut -f1)), $(grep -c missing "$out/firmware.tsv") named but not in" \
     "Debian's packages"
mv "$root/.build/packages.tsv" "$out/packages.tsv"
rm -rf "$root/.build"
# open-iscsi's postinst names an initiator at build time: every machine booting this ramdisk
# would log in under that one name. provision names one per run (iscsi-iname).
rm -f "$root/etc/iscsi/initiatorname.iscsi"

# Size: nothing in the ramdisk reads these.
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/cache/debconf/*-old \
       "$root"/usr/share/man "$root"/usr/share/locale "$root"/usr/share/info \
       "$root"/usr/share/lintian "$root"/var/log/*.log "$root"/usr/lib/udev/hwdb.d

echo "base: packing $(du -sh "$root" | cut -f1) of rootfs"
(cd "$root" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet) \
  | zstd -q -T0 -10 -o "$out/base.cpio.zst"
