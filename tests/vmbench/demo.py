"""The README's main job, end to end: boot the ramdisk with empty disks, provision a layout,
show what is on the disks. Run through scripts/demo (which builds the ramdisk first).

    python3 -m tests.vmbench.demo [LAYOUT.json] [--disks 3] [--disk-size 4G]
"""

import argparse
import json
import sys
import time
from pathlib import Path

from tests.vmbench import VM, GuestCommandError
from tests.vmbench.ramdisk import REPO_ROOT

DEFAULT_LAYOUT = REPO_ROOT / "samples" / "single-disk.json"


def banner(text):
    print(f"\n=== {text}", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("layout", nargs="?", type=Path, default=DEFAULT_LAYOUT)
    ap.add_argument("--disks", type=int, default=3)
    ap.add_argument("--disk-size", default="4G")
    ap.add_argument("--extra", action="append", default=[],
                    help="extra argument for provision (repeatable), e.g. --extra=--debug")
    args = ap.parse_args(argv)

    start = time.monotonic()
    banner(f"booting the ramdisk: {args.disks} x {args.disk_size} virtio disks (qemu TCG)")
    with VM(disks=args.disks, disk_size=args.disk_size, name="demo") as vm:
        print(f"SSH ready after {vm.boot_seconds}s; console log: {vm.console_log}")

        banner("provision inventory (the disks provision sees)")
        inv = vm.provision(subcommand="inventory")
        if inv.returncode == 0:
            for d in json.loads(inv.stdout)["inventory"]["disks"]:
                print(f"  {d['name']:<10} {d['size'] / (1 << 30):6.1f} GiB  serial={d.get('serial')}")
        else:
            print(f"  (inventory failed, exit {inv.returncode}): {inv.stderr.strip()}")

        if not args.layout.exists():
            banner(f"{args.layout} does not exist: showing provision --help instead")
            print(vm.ssh("provision --help").stdout)
            return 1

        banner(f"provision --dry_run {args.layout.relative_to(REPO_ROOT) if args.layout.is_relative_to(REPO_ROOT) else args.layout}")
        plan = vm.provision(args.layout, ["--dry_run", *args.extra])
        print(plan.stdout or plan.stderr)

        banner("provision (for real)")
        run = vm.provision(args.layout, args.extra)
        print(run.stdout, end="")
        if run.returncode != 0:
            print(f"provision exited {run.returncode}:\n{run.stderr}")
            print("--- log tail\n" + "\n".join(run.log.splitlines()[-30:]))

        banner("lsblk in the VM after provisioning")
        try:
            print(vm.ssh("udevadm settle; lsblk -o NAME,SIZE,TYPE,FSTYPE,LABEL,MOUNTPOINTS").stdout)
        except GuestCommandError as exc:
            print(exc)
        print(f"artefacts (console, provision logs): {vm.artifacts}")
    banner(f"done in {time.monotonic() - start:.0f}s, provision exit code {run.returncode}")
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
