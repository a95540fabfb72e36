# Sourced by /init (installed as /usr/lib/provision/netdiag.sh). A ramdisk whose NICs got no
# address never heartbeats, and Ironic reports only a timeout; the console and the log must say
# why: no NIC at all, a NIC with no driver in this ramdisk, a driver that lacks its firmware, no
# link, or no DHCP answer.

# nic_report [SYSFS]: one line per PCI network device (class 0x02xxxx), e.g.
#   0000:00:03.0 8086:1572 driver=i40e iface=enp0s3 carrier=1
#   0000:00:04.0 14e4:16d7 driver=none (no driver for it in this ramdisk: ramdisk/README.md, Hardware)
# or one line saying there is none.
nic_report() {
  sys=${1:-/sys} found=""
  for d in "$sys"/bus/pci/devices/*; do
    [ -r "$d/class" ] || continue
    case $(cat "$d/class") in 0x02*) ;; *) continue ;; esac
    found=1
    line="${d##*/} $(sed 's/^0x//' "$d/vendor"):$(sed 's/^0x//' "$d/device")"
    if [ -L "$d/driver" ]; then
      line="$line driver=$(basename "$(readlink "$d/driver")")"
    else
      line="$line driver=none (no driver for it in this ramdisk: ramdisk/README.md, Hardware)"
    fi
    for n in "$d"/net/*; do
      [ -e "$n" ] || continue
      line="$line iface=${n##*/} carrier=$(cat "$sys/class/net/${n##*/}/carrier" 2>/dev/null || echo ?)"
    done
    echo "$line"
  done
  [ -n "$found" ] || echo "no PCI network device found"
}

# firmware_failures: reads the kernel log on stdin, prints the firmware loads that failed
# (a driver that binds but cannot start its NIC without them).
firmware_failures() {
  grep -E 'Direct firmware load for [^ ]+ failed|firmware: failed to load|[Ff]ailed to load (the )?firmware|DDP package file was not found' \
    | sed -E 's/^\[[ 0-9.]+\] //' | cut -c1-200
}
