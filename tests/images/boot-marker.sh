#!/bin/sh
# The test OS's first-boot unit. First what cloud-init or glean would do with a config-2
# configdrive, as far as the tests look: root gets the public keys of its meta_data. Then the
# marker line the tests wait for on the serial console: the configdrive's device, the
# multipath maps, the chain of devices under /, the keys root got (their base64, or none) and
# the first 16 hex digits of the user data's sha256 (or none), and the Secure Boot state the
# firmware reports (sb=1 enforced, sb=0 UEFI without it, sb=bios).
cd=$(blkid -L config-2 || blkid -L cidata || echo none)
keys=none ud=none
if [ "$cd" != none ] && mkdir -p /run/configdrive && mount -o ro "$cd" /run/configdrive 2>/dev/null; then
  latest=/run/configdrive/openstack/latest
  if [ -f "$latest/meta_data.json" ]; then
    mkdir -p /root/.ssh && chmod 700 /root/.ssh
    grep -o 'ssh-[a-z0-9-]* [A-Za-z0-9+/=]*' "$latest/meta_data.json" > /root/.ssh/authorized_keys
    keys=$(cut -d' ' -f2 /root/.ssh/authorized_keys | paste -sd, | grep . || echo none)
  fi
  [ -f "$latest/user_data" ] && ud=$(sha256sum < "$latest/user_data" | cut -c1-16)
  umount /run/configdrive
fi
# (without maps, dmsetup says "No devices found" on stdout)
mpath=$(dmsetup ls --target multipath 2>/dev/null | grep -v '^No devices found' | cut -f1 \
        | paste -sd, | grep . || echo none)
root=$(lsblk -nrs -o NAME,TYPE "$(findmnt -n -o SOURCE /)" | tr ' ' : | paste -sd,)
# the SecureBoot variable: 4 bytes of attributes, then one byte, 1 when enforced
sb=bios
if [ -d /sys/firmware/efi ]; then
  sb=0
  var=/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c
  [ -r $var ] && [ "$(od -An -tu1 -j4 -N1 $var | tr -d ' ')" = 1 ] && sb=1
fi
echo "PROVISION-BOOT-OK cd=$cd mpath=$mpath root=$root keys=$keys ud=$ud sb=$sb" > /dev/ttyS0
