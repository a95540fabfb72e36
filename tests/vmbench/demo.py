"""The README's main job, end to end: boot the ramdisk with empty disks, provision a layout,
show what is on the disks. Run through scripts/demo (which builds the ramdisk first).

    python3 -m tests.vmbench.demo [LAYOUT.json] [--data-driver native|nailgun|ironic]
                                  [--disks N] [--disk-size 4G] [--extra=--debug]

The VM's disks carry the serials the samples and their inventories name (disk0, disk1, ...);
a Fuel document gets the disks it describes (Fuel's provision.json: three 466 GiB sparse SATA
disks). Images a sample downloads from http://10.0.2.2:8080/ are served from the test OS,
their checksums filled in (tests/vmbench/demo_images.py). The data driver is the one whose
format the document has, unless --data-driver says otherwise. A dry run comes first; when it
fails, nothing is provisioned.
"""

import argparse
import contextlib
import json
import os
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from provision_agent.plan import detect
from tests.vmbench import demo_crypt, demo_images

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_LAYOUT = REPO_ROOT / "samples" / "single-disk.json"


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
    cannot = demo_images.problems(document)
    if cannot:
        return None, "; ".join(cannot)
    return document, None


def machine(document, driver):
    """(disk sizes, bus) of the VM a document was written for: a Fuel document names its disks
    with sizes and by-path names (SATA on 00:1f.2 for the full-size sample); everything else
    fits the bench's three 4 GiB virtio disks."""
    if driver == "nailgun":
        spaces = document.get("ks_meta", {}).get("pm_data", {}).get("ks_spaces", [])
        disks = [s for s in spaces if isinstance(s, dict) and s.get("type") == "disk"]
        if disks and all(isinstance(d.get("size"), int) for d in disks):
            bus = "sata" if any("-ata-" in str(d.get("id")) for d in disks) else "virtio"
            return [f"{d['size']}M" for d in disks], bus
    return ["4G"] * 3, "virtio"


# provision logs every command it runs at INFO; a person watching wants the steps, the image
# progress and anything that went wrong. Everything is in the log kept in the artefacts.
_WATCHED = (" provision_agent.run.executor: ", " provision_agent.drivers.images.progress: ",
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


def disks_for(args, document, driver):
    """(sizes, bus): the sample's own machine unless --disks / --disk-size say otherwise."""
    sizes, bus = machine(document, driver)
    if args.disks:
        sizes = [args.disk_size or sizes[0]] * args.disks
    elif args.disk_size:
        sizes = [args.disk_size] * len(sizes)
    return sizes, bus


def serve_images(document, directory, stack):
    """The document as provisioned: its images served (on 10.0.2.2:8080 when the host's port
    8080 is free, else on another port, the URLs changed to match) and their checksums."""
    from tests.vmbench import FileServer
    files = demo_images.link_files(document, directory)
    for name, path in files.items():
        what = demo_images.shape(name)[1]
        print(f"  {name}: {what}, {path.stat().st_size / (1 << 20):.0f} MiB ({path})")
    document = json.loads(json.dumps(document))
    for note in demo_images.fill_checksums(document, files):
        print(f"  checksum filled in for the served file: {note}")
    try:
        server = stack.enter_context(FileServer(directory, port=demo_images.IMAGE_PORT))
    except OSError as exc:
        server = stack.enter_context(FileServer(directory))
        print(f"  port {demo_images.IMAGE_PORT} is taken here ({exc.strerror}); serving on "
              f"{server.port} and changing the document's URLs to match")
        text = json.dumps(document).replace(demo_images.IMAGE_HOST, server.guest_url())
        document = json.loads(text)
    return document, server


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("layout", nargs="?", default=str(DEFAULT_LAYOUT))
    ap.add_argument("--data-driver", choices=sorted(detect.SHAPES),
                    help="the input's format (default: recognised from the document)")
    ap.add_argument("--disks", type=int,
                    help="number of disks (default: the sample's machine, else 3)")
    ap.add_argument("--disk-size",
                    help="size of each disk, e.g. 8G (default: the sample's, else 4G)")
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
    sizes, bus = disks_for(args, document, driver)
    if args.check:
        return 0
    # Imported here: the check above runs with the host's bare python3, before any install.
    from tests.vmbench import VM, GuestCommandError

    start = time.monotonic()
    with contextlib.ExitStack() as stack:
        if demo_images.wanted(document):
            banner(f"serving the images {layout.name} downloads (the test OS, built once "
                   "and cached)")
            served = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="demo-images-")))
            document, server = serve_images(document, served, stack)
        else:
            server = None
        tpm = None
        if demo_crypt.wanted(document):
            banner(f"{layout.name} encrypts volumes")
            keys = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="demo-keys-")))
            document, more, tpm = demo_crypt.prepare(document, keys)
            extra += more
        shape = " + ".join(f"{n} x {s}" for s, n in Counter(sizes).items())
        banner(f"booting the ramdisk: {shape} {bus} disks (qemu TCG)")
        serials = [f"disk{i}" for i in range(len(sizes))]
        vm = stack.enter_context(VM(disks=sizes, serials=serials, bus=bus, name="demo",
                                    tpm=tpm))
        print(f"SSH ready after {vm.boot_seconds}s; console log: {vm.console_log}")

        banner("provision inventory (the disks provision sees)")
        inv = vm.provision(subcommand="inventory")
        if inv.returncode == 0:
            for d in json.loads(inv.stdout)["inventory"]["disks"]:
                gib = d["size"] / (1 << 30)
                print(f"  {d['name']:<10} {gib:6.1f} GiB  serial={d.get('serial')}")
        else:
            print(f"  (inventory failed, exit {inv.returncode}): {inv.stderr.strip()}")

        banner(f"provision --dry_run --data_driver {driver} {shown(layout)}")
        plan = vm.provision(document, ["--dry_run", *extra])
        print(plan.stdout or plan.stderr)
        if plan.returncode != 0:
            banner(f"the dry run exited {plan.returncode}: nothing was provisioned "
                   f"(full log: {vm.artifacts})")
            return plan.returncode

        banner("provision (for real; its steps as they run)")
        run = vm.provision(document, extra, echo=show_progress)
        print(run.stdout, end="")
        if run.returncode != 0:
            # The error is in the streamed lines above; the debug log (tracebacks included)
            # stays in the artefacts for whoever needs it.
            print(not_logged(run.stderr))
            print(f"provision exited {run.returncode}; full log: {vm.artifacts}")
        if server is not None:
            print(f"served to the VM: {', '.join(sorted(set(server.requested))) or 'nothing'}")

        if tpm and run.returncode == 0:
            banner("the encrypted volumes and their recovery keys")
            demo_crypt.show(vm, document, keys)

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
