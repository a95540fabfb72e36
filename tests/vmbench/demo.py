"""The README's main job, end to end: boot the ramdisk with empty disks, provision a layout,
show what is on the disks. Run through scripts/demo (which builds the ramdisk first).

    python3 -m tests.vmbench.demo [LAYOUT.json] [--data-driver native|nailgun|ironic]
                                  [--disks 3] [--disk-size 4G] [--extra=--debug]

The VM's disks carry the serials the samples and their inventories name (disk0, disk1, ...).
The data driver is the one whose format the document has, unless --data-driver says otherwise.
A dry run comes first; when it fails, nothing is provisioned.
"""

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

from provision_agent.data_drivers import detect

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_LAYOUT = REPO_ROOT / "samples" / "single-disk.json"
IMAGE_HOST = "http://10.0.2.2:8080/"


def banner(text):
    print(f"\n=== {text}", flush=True)


def fail(message):
    print(f"demo: error: {message}", file=sys.stderr)
    return 2


def resolve_layout(arg):
    """The layout path as the caller meant it: scripts/demo changes to the repository, so a
    relative path is taken from the directory the caller ran it in (DEMO_CWD)."""
    path = Path(arg)
    if not path.is_absolute():
        path = Path(os.environ.get("DEMO_CWD") or os.getcwd()) / path
    return path


def load(path):
    """(document, None) or (None, why it cannot be provisioned as it is)."""
    if not path.is_file():
        return None, f"{path} does not exist"
    try:
        document = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"{path} is not a JSON document: {exc}"
    if IMAGE_HOST in path.read_text():
        return None, (f"{path.name} downloads its images from {IMAGE_HOST}, which the demo does "
                      "not serve yet; the e2e tests (tests/e2e/test_images.py, "
                      "test_fuel_sample.py) provision such documents with images they build")
    return document, None


# provision logs every command it runs at INFO; a person watching wants the steps, the image
# progress and anything that went wrong. Everything is in the log kept in the artefacts.
_WATCHED = (" provision_agent.executor: ", " provision_agent.drivers.image_progress: ",
            " WARNING ", " ERROR ")


_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d (\d\d:\d\d:\d\d),\d+ (\w+) [\w.]+: (.*)$")


def show_progress(line):
    m = _LOG_LINE.match(line)
    if m and any(w in line for w in _WATCHED):
        clock, level, text = m.groups()
        print(f"  {clock} {'' if level == 'INFO' else level + ' '}{text}", flush=True)


def not_logged(text):
    """What provision printed itself (its error and the problems listed under it)."""
    return "\n".join(ln for ln in text.splitlines() if not _LOG_LINE.match(ln))


def shown(path):
    return path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("layout", nargs="?", default=str(DEFAULT_LAYOUT))
    ap.add_argument("--data-driver", choices=sorted(detect.SHAPES),
                    help="the input's format (default: recognised from the document)")
    ap.add_argument("--disks", type=int, default=3)
    ap.add_argument("--disk-size", default="4G")
    ap.add_argument("--extra", action="append", default=[],
                    help="extra argument for provision (repeatable), e.g. --extra=--debug")
    ap.add_argument("--check", action="store_true",
                    help="only check the layout argument (scripts/demo does, before building)")
    args = ap.parse_args(argv)

    # Everything that can be wrong with the request is found before a VM boots for a minute.
    layout = resolve_layout(args.layout)
    document, why = load(layout)
    if why:
        return fail(why)
    driver = args.data_driver or detect.guess_driver(document)
    if driver is None:
        return fail(f"cannot tell the format of {layout}; give --data-driver")
    extra = [a for a in args.extra if not a.startswith("--data_driver")]
    extra = ["--data_driver", driver, *extra]
    if args.check:
        return 0
    # Imported here: the check above runs with the host's bare python3, before any install.
    from tests.vmbench import VM, GuestCommandError

    start = time.monotonic()
    banner(f"booting the ramdisk: {args.disks} x {args.disk_size} virtio disks (qemu TCG)")
    serials = [f"disk{i}" for i in range(args.disks)]
    with VM(disks=args.disks, disk_size=args.disk_size, serials=serials, name="demo") as vm:
        print(f"SSH ready after {vm.boot_seconds}s; console log: {vm.console_log}")

        banner("provision inventory (the disks provision sees)")
        inv = vm.provision(subcommand="inventory")
        if inv.returncode == 0:
            for d in json.loads(inv.stdout)["inventory"]["disks"]:
                print(f"  {d['name']:<10} {d['size'] / (1 << 30):6.1f} GiB  serial={d.get('serial')}")
        else:
            print(f"  (inventory failed, exit {inv.returncode}): {inv.stderr.strip()}")

        banner(f"provision --dry_run --data_driver {driver} {shown(layout)}")
        plan = vm.provision(layout, ["--dry_run", *extra])
        print(plan.stdout or plan.stderr)
        if plan.returncode != 0:
            banner(f"the dry run exited {plan.returncode}: nothing was provisioned "
                   f"(full log: {vm.artifacts})")
            return plan.returncode

        banner("provision (for real; its steps as they run)")
        run = vm.provision(layout, extra, echo=show_progress)
        print(run.stdout, end="")
        if run.returncode != 0:
            # The error is in the streamed lines above; the debug log (tracebacks included)
            # stays in the artefacts for whoever needs it.
            print(not_logged(run.stderr))
            print(f"provision exited {run.returncode}; full log: {vm.artifacts}")

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
