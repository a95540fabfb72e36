#!/usr/bin/env bash
# Installs the Debian packages the host needs to build the ramdisk, run the VM bench and the
# functional tests (`--bench`, once for MariaDB, now adds nothing). Idempotent: packages
# already present are not fetched again.
set -euo pipefail

packages=(
  # VM bench and ramdisk build
  qemu-system-x86 qemu-utils mmdebstrap cpio zstd xz-utils bzip2 ovmf
  openssh-client openssh-server
  # the VM's provisioning network (tap + DHCP), as Ironic's dnsmasq or Neutron serves it
  dnsmasq-base iproute2
  # the Ironic lab: machines as libvirt domains behind Redfish/IPMI emulators (whose libvirt
  # binding only Debian's python3 has), iPXE boot files, ipmitool for Ironic's ipmi driver
  libvirt-daemon-system libvirt-clients python3-libvirt ipxe ipmitool
  # Ironic's plain pxe boot interface, and the BIOS ISOs its redfish-virtual-media boot
  # builds (tox -e ironic-lab)
  pxelinux syslinux-common isolinux
  # functional tests on loop devices and the tools provision drives
  gdisk parted fdisk dosfstools xfsprogs btrfs-progs e2fsprogs util-linux udev
  # a stale bcache superblock for the wipe's functional test (make-bcache; no kernel module
  # needed: the test only writes the superblock and reads it back with blkid)
  bcache-tools
  # configdrive: config-2 ISO and NoCloud vfat
  genisoimage mtools
  # image tests (HTTPS certificates) and the image benchmark (curl | gzip | dd)
  openssl curl gzip
  # signed images: the verifier provision runs (as in the ramdisk), and gpg to make the
  # tests' keys and signatures
  sqv gpg gpg-agent
  # encryption (issue 32): a software TPM for the VMs, a Tang server on the host, and what the
  # tests use to read back LUKS headers and open the recovery keys (age's private side)
  swtpm swtpm-tools tang jose cryptsetup-bin age
  # iSCSI disks (issue 56): Debian's userspace target (tgtd, tgtadm) serves a file-backed LUN
  # with CHAP to the VMs (tests/vmbench/iscsi_target.py); the host needs no kernel module
  tgt
  # a Python to run tox from
  python3 python3-venv python3-pip
  # the ramdisk's HTTP stack (Debian's requests on urllib3 1.26): the functional tests fetch
  # through it under /usr/bin/python3, as provision does in the ramdisk
  python3-requests python3-urllib3 python3-tenacity
  # oci:// images: a local OCI registry (on 127.0.0.1 only) and skopeo to push artifacts to it
  docker-registry skopeo
  # Ironic on what its operators run: the conductor failover tests (two conductors and an API
  # over one database, tests/ironic/test_failover.py) and benchmarks/ironic_scale.py
  # --database mariadb
  mariadb-server mariadb-client
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "host packages: all present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "host packages missing (${missing[*]}); run as root or install them" >&2
  exit 1
fi
# apt and dpkg print hundreds of lines; keep them in a log and show it only when they fail.
source "$(dirname "$0")/lib.sh"
mkdir -p "$PROVISION_AGENT_CACHE"
log=$PROVISION_AGENT_CACHE/host-packages.log
export DEBIAN_FRONTEND=noninteractive
apt_step() {
  local what=$1; shift
  local t0=$SECONDS
  echo "host packages: $what"
  if ! "$@" >>"$log" 2>&1; then
    echo "host packages: '$*' failed; the end of $log:" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
  echo "host packages: $what: done in $((SECONDS - t0)) s"
}
: > "$log"
apt_step "updating the package lists" apt-get update -q
apt_step "installing ${#missing[@]} packages (${missing[*]})" \
  apt-get install -y -q --no-install-recommends "${missing[@]}"
# Where services start on install, docker-registry's package serves every address (:5000); the
# tests run registries of their own on 127.0.0.1.
if [[ " ${missing[*]} " == *" docker-registry "* ]] && command -v systemctl >/dev/null \
    && systemctl is-active -q docker-registry 2>/dev/null; then
  systemctl disable -q --now docker-registry
fi
