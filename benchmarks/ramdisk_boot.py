"""Boot to SSH of two ramdisk builds, rounds interleaved, medians and the ratio to the first:
what a change of the ramdisk's size or its /init costs every deploy.

    PYTHONPATH=$PWD .tox/e2e/bin/python benchmarks/ramdisk_boot.py OLD_DIR NEW_DIR [ROUNDS]

Each DIR is a built ramdisk (vmlinuz, initramfs, ssh_host_ed25519_key.pub; copy
$PROVISION_AGENT_CACHE/ramdisk/current away before rebuilding). One guest at a time, 1 vCPU,
one 1 GiB disk, virtio NIC; qemu start to the first SSH command answered (VM.boot_seconds).
"""

import statistics
import sys
from pathlib import Path

from tests.vmbench import VM
from tests.vmbench.ramdisk import Ramdisk


def main(argv):
    dirs = [Path(argv[1]), Path(argv[2])]
    rounds = int(argv[3]) if len(argv) > 3 else 5
    times = {d: [] for d in dirs}
    for r in range(rounds):
        # alternate which goes first: a host that speeds up or slows down over the run
        # then weighs on both alike
        for d in (dirs if r % 2 == 0 else dirs[::-1]):
            rd = Ramdisk(d)
            with VM(disks=1, disk_size="1G", name=f"boot-{d.name}", ramdisk=rd, cpus=1) as vm:
                times[d].append(vm.boot_seconds)
            print(f"round {r} {d}: {times[d][-1]:.1f} s", flush=True)
    base = statistics.median(times[dirs[0]])
    for d in dirs:
        size = (d / "initramfs").stat().st_size / (1 << 20)
        med = statistics.median(times[d])
        print(f"{d}: initramfs {size:.1f} MiB, boot to SSH median {med:.1f} s of "
              f"{[round(t, 1) for t in times[d]]} ({med / base:.2f}x)")


if __name__ == "__main__":
    main(sys.argv)
