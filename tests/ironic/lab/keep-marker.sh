#!/bin/sh
# Run at boot by the lab's rebuild test images (tests/ironic/lab/test_rebuild.py puts it into
# copies of the test OS's ext4 root with debugfs): what this instance finds from before it was
# (re)built, then a fresh marker wherever there is none. Three places: the root filesystem (a
# rebuild writes a new one: nothing found there), the ephemeral filesystem (label ephemeral0,
# which nothing mounts: mounted here as cloud-init would), and /srv/data when something is
# mounted there (the templated layout's kept logical volume, mounted from fstab).
# found: the marker's value, "none" (the filesystem is there without one) or "absent".
image=$(cat /etc/lab-image)
token() { cut -c1-8 /proc/sys/kernel/random/uuid; }
read_marker() { if [ -f "$1" ]; then cat "$1"; else echo none; fi; }
root=$(read_marker /var/lib/lab-marker)
eph=absent
mkdir -p /mnt/ephemeral
mount LABEL=ephemeral0 /mnt/ephemeral 2>/dev/null && eph=$(read_marker /mnt/ephemeral/lab-marker)
data=absent
mountpoint -q /srv/data && data=$(read_marker /srv/data/lab-marker)
echo "LAB-FOUND image=$image root=$root eph=$eph data=$data" > /dev/ttyS0
[ "$root" = none ] && token > /var/lib/lab-marker
[ "$eph" = none ] && token > /mnt/ephemeral/lab-marker
[ "$data" = none ] && token > /srv/data/lab-marker
sync
root=$(read_marker /var/lib/lab-marker)
[ "$eph" = absent ] || eph=$(read_marker /mnt/ephemeral/lab-marker)
[ "$data" = absent ] || data=$(read_marker /srv/data/lab-marker)
mountpoint -q /mnt/ephemeral && umount /mnt/ephemeral
echo "LAB-WROTE root=$root eph=$eph data=$data" > /dev/ttyS0
