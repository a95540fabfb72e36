"""vmbench: boot the provision ramdisk in qemu and prove storage work on real (virtual) disks.

    from tests.vmbench import VM, FileServer, images

    with VM(disks=3, disk_size="4G") as vm:          # boots, waits for SSH (host key pinned)
        vm.ssh("mdadm --version")                     # Result; raises GuestCommandError on rc != 0
        # a ProvisionRun(returncode, stdout, stderr, log)
        run = vm.provision({"...": "..."}, ["--debug"])
        vm.lsblk(); vm.mdstat(); vm.lvs(); vm.mounts()     # parsed read-back
        vm.stop()                                     # power off; images stay until the with ends
        images.partition_table(vm.disk_images[0])     # inspect from outside

Full description: tests/vmbench/README.md.
"""

import importlib

# Loaded on first use, so that `python3 -m tests.vmbench.demo --check` runs with a bare python3
# (vm.py needs tenacity, installed later by scripts/demo).
_WHERE = {"images": None, "FileServer": "httpserve", "Ramdisk": "ramdisk",
          "ensure_ramdisk": "ramdisk", "GuestCommandError": "ssh", "Result": "ssh", "VM": "vm",
          "ProvisionRun": "vm", "VMError": "vm", "parse_size": "vm", "BootNetwork": "bootnet"}
__all__ = list(_WHERE)


def __getattr__(name):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{_WHERE[name] or name}")
    value = module if _WHERE[name] is None else getattr(module, name)
    globals()[name] = value
    return value
