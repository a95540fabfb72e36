"""vmbench: boot the provision ramdisk in qemu and prove storage work on real (virtual) disks.

    from tests.vmbench import VM, FileServer, images

    with VM(disks=3, disk_size="4G") as vm:          # boots, waits for SSH (host key pinned)
        vm.ssh("mdadm --version")                     # Result; raises GuestCommandError on rc != 0
        run = vm.provision({"...": "..."}, ["--debug"])   # ProvisionRun(returncode, stdout, stderr, log)
        vm.lsblk(); vm.mdstat(); vm.lvs(); vm.mounts()     # parsed read-back
        vm.stop()                                     # power off; images stay until the with ends
        images.partition_table(vm.disk_images[0])     # inspect from outside

Full description: tests/vmbench/README.md.
"""

from tests.vmbench import images
from tests.vmbench.httpserve import FileServer
from tests.vmbench.ramdisk import Ramdisk, ensure_ramdisk
from tests.vmbench.ssh import GuestCommandError, Result
from tests.vmbench.vm import VM, ProvisionRun, VMError, parse_size

__all__ = ["VM", "FileServer", "images", "Ramdisk", "ensure_ramdisk", "GuestCommandError",
           "Result", "ProvisionRun", "VMError", "parse_size"]
