"""Head to head with ironic-python-agent (issue 35; a benchmark, not a test: root, libvirt lab).

    PYTHONPATH=$PWD .tox/ironic-lab/bin/python benchmarks/head_to_head.py [--order ipa,ours]

One libvirt machine (BIOS, 2 vCPUs, 2048 MiB, two 4 GiB virtio disks) in the lab of
tests/ironic/lab/env.py, one real Ironic 39, one node. Each side in turn, on that same node
and machine: the node is switched to the side's deploy interface and deploy ramdisk while
`available` (Ironic's `direct` + the IPA ramdisk of ramdisk/build-ipa.sh, or our `provision`
+ our ramdisk), deployed from `available` to `active` with the same image, checksum, root
device hint and configdrive, its instance booted to the test OS's marker on the serial
console, then undeployed and cleaned (automated cleaning, each side's metadata erase) back to
`available`. The node starts with one cleaning by the first side (enroll → provide).

--row 1: a bootable whole-disk raw image (benchmarks/head_to_head_image.py: GPT, bios_grub,
the test OS's ext4 root and grub, 1 GiB). --row 2: the test OS's ext4 root as a raw partition
image with root_gb 3 and swap_mb 256 (Nova flavor sizes), a gpt table, each side installing
the bootloader. BIOS; images served over HTTP from the lab's bridge.

Per side and phase (benchmarks/head_to_head_phases.py, from the conductor's log and
provision's events), the instance's boot to its marker (from `active`), the cleaning, and
ours/IPA, all from this one run. Written to artifacts/head-to-head/<time>.json and printed as
a Markdown table. Both ramdisks are copied into the lab's work directory first, so that a
ramdisk rebuilt by someone else meanwhile does not change one side half-way.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks import head_to_head_image as h2h_image  # noqa: E402
from benchmarks import head_to_head_phases as hp  # noqa: E402
from tests.ironic.lab import env as lablib  # noqa: E402
from tests.vmbench import testos  # noqa: E402
from tests.vmbench.ipa import IpaRamdisk  # noqa: E402
from tests.vmbench.ramdisk import Ramdisk, cache_dir  # noqa: E402

MACHINE = "bios"
DEPLOY_TIMEOUT = 1500
DEPLOY_INTERFACE = {"ipa": "direct", "ours": "provision"}
OUT = ROOT / "artifacts" / "head-to-head"


def snapshot(src, dst, cls):
    """The ramdisk's files, linked (or copied) into dst: build scripts replace files by
    renaming new ones over them, so a link keeps this run's bytes."""
    dst.mkdir(parents=True)
    for name in ("vmlinuz", "initramfs", "manifest.json", "ssh_host_ed25519_key.pub"):
        if (src / name).exists():
            try:
                os.link(src / name, dst / name)
            except OSError:
                shutil.copyfile(src / name, dst / name)
    return cls(dst)


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def switch(lab, uuid, side, ramdisk):
    info = lablib.deploy_ramdisk_info(ramdisk)
    lab.ironic.request("PATCH", f"/v1/nodes/{uuid}", [
        {"op": "replace", "path": "/deploy_interface", "value": DEPLOY_INTERFACE[side]},
        *({"op": "add", "path": f"/driver_info/{k}", "value": v} for k, v in info.items())])


def instance_info(lab, image, row):
    manifest = json.loads((image / "manifest.json").read_text())
    info = {"image_source": lab.images.url(manifest["file"]), "image_os_hash_algo": "sha256",
            "image_os_hash_value": manifest["sha256"], "image_disk_format": "raw"}
    if row == 2:
        # A Nova flavor's sizes, on 4 GiB disks: root, swap and the 64 MiB configdrive fit.
        # gpt on BIOS (a bios_grub partition on both sides); IPA's default would be msdos.
        info.update(image_type="partition", root_gb=3, swap_mb=256,
                    kernel=lab.images.url(manifest["kernel"]),
                    ramdisk=lab.images.url(manifest["ramdisk"]),
                    capabilities={"disk_label": "gpt"})
    return info


def row_image(row, ramdisk, test_os):
    if row == 1:
        return h2h_image.ensure_whole_disk(MACHINE, ramdisk, test_os)
    return h2h_image.ensure_partition_image(test_os)


def cycle(lab, uuid, side, ramdisk, image, row):
    """One side: deploy → marker → undeploy + cleaning; its phases."""
    dom = lab.domains[MACHINE]
    switch(lab, uuid, side, ramdisk)
    lablib.set_instance_info(lab.ironic, uuid, instance_info(lab, image, row))
    console_at = len(dom.console_text())
    started = time.time()
    # The configdrive as Nova sends it: Ironic builds the ISO and both agents get its bytes.
    lab.ironic.request("PUT", f"/v1/nodes/{uuid}/states/provision", {
        "target": "active", "configdrive": {"meta_data": {"uuid": f"h2h-{side}",
                                                          "hostname": f"h2h-{side}"}}})
    node = lablib.wait_state(lab.ironic, uuid, ["active"], DEPLOY_TIMEOUT)
    active = time.time()
    marker = dom.wait_console(lablib.MARKER, 900, since=console_at)
    booted = time.time()
    undeploy = time.time()
    lab.ironic.set_state(uuid, "deleted")
    lablib.wait_state(lab.ironic, uuid, ["available"], DEPLOY_TIMEOUT)
    events = hp.node_events(lab.ironic.log_text(), uuid)
    deploy = hp.deploy_phases([e for e in events if e[0] >= started - 1], side,
                              node["driver_internal_info"].get("provision_events", []))
    return {"deploy": deploy, "deploy_total": active - started,
            "power_on_to_active": sum(list(deploy.values())[1:]),
            "instance boot to marker (from active)": booted - active,
            "marker": marker.group(0),
            "cleaning": hp.clean_phases(events, undeploy - 1),
            "cleaning_total": time.time() - undeploy}


def recover(lab, uuid):
    """Back to available after a side failed, with that side's cleaning; False if not."""
    state = lab.ironic.node(uuid)["provision_state"]
    try:
        if state in ("active", "deploy failed", "wait call-back", "deploying"):
            lab.ironic.set_state(uuid, "deleted")
        elif state == "clean failed":
            lab.ironic.set_state(uuid, "manage")
            lab.ironic.wait_state(uuid, ["manageable"], 60)
            lab.ironic.set_state(uuid, "provide")
        lab.ironic.wait_state(uuid, ["available"], DEPLOY_TIMEOUT)
        return True
    except Exception as exc:
        print(f"no way back to available: {exc!r}", flush=True)
        return False


def report(results):
    ipa, ours = results["sides"]["ipa"], results["sides"]["ours"]
    rows = [(k, ipa["deploy"][k], ours["deploy"][k]) for k in ipa["deploy"]]
    rows.append(("**power on → active**", ipa["power_on_to_active"], ours["power_on_to_active"]))
    key = "instance boot to marker (from active)"
    rows.append((key, ipa[key], ours[key]))
    rows += [(k, ipa["cleaning"][k], ours["cleaning"][k]) for k in ipa["cleaning"]]
    rows.append(("**undeploy + cleaning → available**", ipa["cleaning_total"],
                 ours["cleaning_total"]))
    return hp.table(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--order", default="ipa,ours", help="which side goes first")
    ap.add_argument("--row", type=int, choices=(1, 2), default=1,
                    help="1: whole-disk raw image; 2: partition image, root_gb and swap_mb")
    ap.add_argument("--ramdisk", default=os.environ.get("PROVISION_RAMDISK_DIR")
                    or str(cache_dir() / "ramdisk" / "current"))
    ap.add_argument("--ipa-ramdisk", default=os.environ.get("IPA_RAMDISK_DIR")
                    or str(cache_dir() / "ipa-ramdisk" / "current"))
    args = ap.parse_args()
    order = args.order.split(",")
    assert sorted(order) == ["ipa", "ours"], order
    missing = lablib.missing()
    if missing:
        sys.exit(f"missing: {', '.join(missing)}")
    results = {"uptime_before": uptime(), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
               "row": args.row, "firmware": MACHINE, "order": order, "sides": {}}
    test_os = testos.build_dir()
    image = row_image(args.row, Ramdisk(Path(args.ramdisk)), test_os)
    results["image"] = json.loads((image / "manifest.json").read_text())
    workdir = Path(lablib.workdir())
    ramdisks = {"ours": snapshot(Path(args.ramdisk).resolve(), workdir / "rd-ours", Ramdisk),
                "ipa": snapshot(Path(args.ipa_ramdisk).resolve(), workdir / "rd-ipa",
                                IpaRamdisk)}
    results["ramdisks"] = {side: {"source": str(Path(src).resolve()), "initramfs_bytes":
                                  rd.initramfs.stat().st_size, "built_at":
                                  rd.manifest.get("built_at"), "layers": {
                                      k: v.get("sha256") for k, v in
                                      rd.manifest.get("layers", {}).items()}}
                           for (side, rd), src in zip(ramdisks.items(),
                                                      (args.ramdisk, args.ipa_ramdisk))}
    opts = lablib.provision_opts(DEPLOY_TIMEOUT)
    with lablib.Lab(workdir, ramdisks["ours"], {MACHINE: MACHINE}, opts, serve_dir=image,
                    disks=2, cpus=2, ipa_ramdisk=ramdisks["ipa"]) as lab:
        first = order[0]
        t = time.time()
        uuid = lab.enroll(MACHINE, provide_timeout=DEPLOY_TIMEOUT, ramdisk=ramdisks[first],
                          interfaces={"deploy": DEPLOY_INTERFACE[first]},
                          properties={"root_device": {"name": "/dev/vda"}})
        results["enroll_provide_first_cleaning"] = {"side": first, "seconds": time.time() - t}
        for side in order:
            print(f"{time.strftime('%H:%M:%S')} {side}: deploy, boot, undeploy, cleaning",
                  flush=True)
            try:
                results["sides"][side] = cycle(lab, uuid, side, ramdisks[side], image,
                                               args.row)
            except Exception as exc:      # the other side's numbers are still worth having
                node = lab.ironic.node(uuid)
                results["sides"][side] = {"error": repr(exc), "state": node["provision_state"],
                                          "last_error": node["last_error"]}
                print(f"{side} failed: {exc!r}", flush=True)
                if not recover(lab, uuid):
                    break
    results["artifacts"] = str(getattr(lab, "artifacts", ""))
    results["uptime_after"] = uptime()
    OUT.mkdir(parents=True, exist_ok=True)
    out = OUT / f"{time.strftime('%Y%m%d-%H%M%S')}-row{args.row}.json"
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results, indent=1))
    if all("deploy" in results["sides"].get(s, {}) for s in order):
        print(report(results))
    print(f"before: {results['uptime_before']}\nafter:  {results['uptime_after']}\n{out}")


if __name__ == "__main__":
    main()
