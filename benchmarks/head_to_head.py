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

--row 1: a bootable whole-disk image (benchmarks/head_to_head_image.py: GPT, bios_grub, the
test OS's ext4 root and grub, 1 GiB), raw or (--format qcow2) compressed qcow2. --row 2: the
test OS's ext4 root as a raw partition image with root_gb 3 and swap_mb 256 (Nova flavor
sizes), a gpt table, each side installing the bootloader. --row 3: that partition image on
software RAID-1 across both disks, asked for the same way on both sides (target_raid_config
and a raid.apply_configuration deploy step with the same raid_config; IPA's `agent` RAID
interface, ours' `provision`). --row 4, ours only (IPA has no entry): the RAID-1 with LVM on
it, root and swap as logical volumes (instance_info/provision_layout). BIOS; images served
over HTTP from the lab's bridge.

--fast-track: Ironic's fast track on the node (driver_info/fast_track) for both sides. Each
side's ramdisk is booted by a cleaning (manage, provide; the other side's switched off through
Ironic first) and left running, and the deploy runs in it: the phases go from the request
straight to the image, and a power action before the image is written fails the side.

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
from tests.ironic import realenv  # noqa: E402
from tests.ironic.lab import env as lablib  # noqa: E402
from tests.vmbench import testos  # noqa: E402
from tests.vmbench.ipa import IpaRamdisk  # noqa: E402
from tests.vmbench.ramdisk import Ramdisk, cache_dir, ensure_ramdisk  # noqa: E402

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


# Rows 3 and 4: both disks as RAID-1 members. is_root_volume: IPA writes to the array (its
# root device otherwise follows the node's hint, /dev/vda, a member); ours ignores the key.
RAID1 = {"logical_disks": [{"size_gb": "MAX", "raid_level": "1", "controller": "software",
                            "is_root_volume": True,
                            "physical_disks": [{"name": "/dev/vda"}, {"name": "/dev/vdb"}]}]}
# The raid.apply_configuration deploy step's priority: IPA's runs in the ramdisk, after
# deploy.deploy (100) boots it and before write_image (80); ours builds the layout the
# deploy step (100) uploads, so it must come first (docs/ironic.md).
RAID_STEP_PRIORITY = {"ipa": 90, "ours": 150}
# Row 4: what IPA cannot build, LVM on the RAID-1; / and swap are logical volumes sized by
# the flavor, /boot inside / (a partition image carries its /boot).
def lvm_on_raid1(firmware):
    """Row 4's layout. BIOS: a bios_grub partition on each disk. UEFI: an ESP on each disk,
    mirrored by md RAID-1 with metadata 1.0 (the firmware reads either member as plain vfat),
    as ours does for Ironic's software RAID on UEFI (row 3)."""
    first = ({"size": "1MiB", "type": "bios_grub"} if firmware == "bios"
             else {"size": "128MiB", "type": "esp"})
    boot = "bios" if firmware == "bios" else "esp"
    layout = {
        "version": 1,
        "disks": [{"id": f"disk{i}", "match": {"name": f"/dev/vd{c}"}, "table": "gpt",
                   "partitions": [dict(first, id=f"{boot}{i}"),
                                  {"id": f"os{i}", "size": "remaining", "type": "raid"}]}
                  for i, c in enumerate("ab")],
        "raids": [{"id": "md-os", "name": "os", "level": 1, "members": ["os0", "os1"]}],
        "volume_groups": [{"id": "vg-os", "name": "os", "pvs": ["md-os"], "logical_volumes": [
            {"id": "lv-root", "name": "root", "size": "root_gb"},
            {"id": "lv-swap", "name": "swap", "size": "swap_mb"}]}],
        "filesystems": [{"device": "lv-root", "type": "ext4", "mount": "/", "label": "root"},
                        {"device": "lv-swap", "type": "swap"}],
    }
    if firmware == "uefi":
        layout["raids"].append({"id": "md-esp", "name": "esp", "level": 1,
                                "members": ["esp0", "esp1"], "metadata": "1.0"})
        layout["filesystems"].append({"device": "md-esp", "type": "vfat",
                                      "mount": "/boot/efi", "label": "EFI"})
    return layout


ROW_SIDES = {1: ("ipa", "ours"), 2: ("ipa", "ours"), 3: ("ipa", "ours"), 4: ("ours",)}


def instance_info(lab, image, row, image_file=None, root_gb=3, firmware="bios"):
    manifest = json.loads((image / "manifest.json").read_text())
    name = image_file or manifest["file"]
    info = {"image_source": lab.images.url(name), "image_os_hash_algo": "sha256",
            "image_os_hash_value": manifest["sha256"] if name == manifest["file"]
            else h2h_image.sha256(image / name),
            "image_disk_format": "qcow2" if name.endswith(".qcow2") else "raw"}
    if row >= 2:
        # A Nova flavor's sizes, on 4 GiB disks: root, swap and the 64 MiB configdrive fit.
        # gpt on BIOS (a bios_grub partition on both sides); IPA's default would be msdos.
        info.update(image_type="partition", root_gb=root_gb,
                    kernel=lab.images.url(manifest["kernel"]),
                    ramdisk=lab.images.url(manifest["ramdisk"]),
                    capabilities={"disk_label": "gpt"})
        # Row 3: a RAID-1 of the whole disks; ours puts / on the array (no swap partition in
        # Ironic's software RAID), so neither side is asked for swap.
        if row != 3:
            info["swap_mb"] = 256
    if row == 4:
        info["provision_layout"] = lvm_on_raid1(firmware)
    return info


def raid_setup(lab, uuid, side, row):
    """Rows 3: the side's RAID interface, target_raid_config (IPA's install_bootloader looks
    there for software RAID) and the deploy step that builds it; the deploy_steps to send."""
    if row != 3:
        return None
    lab.ironic.request("PATCH", f"/v1/nodes/{uuid}", [
        {"op": "replace", "path": "/raid_interface",
         "value": "agent" if side == "ipa" else "provision"}])
    lab.ironic.request("PUT", f"/v1/nodes/{uuid}/states/raid", RAID1)
    return [{"interface": "raid", "step": "apply_configuration", "args": {"raid_config": RAID1},
             "priority": RAID_STEP_PRIORITY[side]}]


def row_image(row, ramdisk, test_os, firmware):
    if row == 1:
        return h2h_image.ensure_whole_disk(firmware, ramdisk, test_os)
    return h2h_image.ensure_partition_image(test_os)


def power_off(lab, uuid):
    """The node off through Ironic (which wipes the recorded agent and its token with it)."""
    lab.ironic.request("PUT", f"/v1/nodes/{uuid}/states/power", {"target": "power off"})
    realenv.wait_for(lambda: lab.ironic.node(uuid)["power_state"] == "power off",
                     120, interval=1, what="the node powered off")


def keep_ramdisk(lab, uuid):
    """--fast-track: the side's ramdisk booted by a cleaning (manage, provide) and left
    running; the seconds it took. The other side's ramdisk, if running, is switched off
    first through Ironic (neither side may be handed the other's ramdisk)."""
    power_off(lab, uuid)
    t = time.time()
    lab.ironic.set_state(uuid, "manage")
    lab.ironic.wait_state(uuid, ["manageable"], 60)
    lab.ironic.set_state(uuid, "provide")
    lablib.wait_state(lab.ironic, uuid, ["available"], DEPLOY_TIMEOUT)
    node = lab.ironic.node(uuid)
    assert node["power_state"] == "power on", "fast track did not keep the ramdisk running"
    return time.time() - t


def cycle(lab, uuid, side, ramdisk, image, row, image_file=None, root_gb=3, firmware="bios",
          fast_track=False):
    """One side: deploy → marker → undeploy + cleaning; its phases. fast_track: the deploy
    runs in the ramdisk a cleaning just before left running (keep_ramdisk)."""
    (dom,) = lab.domains.values()
    if fast_track:
        power_off(lab, uuid)
    switch(lab, uuid, side, ramdisk)
    kept = keep_ramdisk(lab, uuid) if fast_track else None
    steps = raid_setup(lab, uuid, side, row)
    lablib.set_instance_info(lab.ironic, uuid,
                            instance_info(lab, image, row, image_file, root_gb, firmware))
    console_at = len(dom.console_text())
    started = time.time()
    # The configdrive as Nova sends it: Ironic builds the ISO and both agents get its bytes.
    request = {"target": "active", "configdrive": {"meta_data": {"uuid": f"h2h-{side}",
                                                                 "hostname": f"h2h-{side}"}}}
    if steps:
        request["deploy_steps"] = steps
    lab.ironic.request("PUT", f"/v1/nodes/{uuid}/states/provision", request)
    node = lablib.wait_state(lab.ironic, uuid, ["active"], DEPLOY_TIMEOUT)
    active = time.time()
    marker = dom.wait_console(lablib.MARKER, 900, since=console_at)
    booted = time.time()
    console = dom.console_text()[console_at:]
    undeploy = time.time()
    lab.ironic.set_state(uuid, "deleted")
    lablib.wait_state(lab.ironic, uuid, ["available"], DEPLOY_TIMEOUT)
    events = hp.node_events(lab.ironic.log_text(), uuid)
    mine = [e for e in events if e[0] >= started - 1]      # this deploy's lines
    dii = node["driver_internal_info"]
    deploy = hp.deploy_phases(mine, side, dii.get("provision_events", []),
                              fast_track=fast_track)
    first = hp.first_byte(mine, side, fast_track, dii.get("provision_events", []), console)
    return {"deploy": deploy, "deploy_total": active - started,
            "first_byte": first,
            # ours: the conductor's seconds from the heartbeat (or the step) to the job's start
            "start_timings": dii.get("provision_start_timings"),
            "power_on_to_active": sum(list(deploy.values())[1:]),
            "request_to_active": sum(deploy.values()),
            "cleaning that booted the kept ramdisk": kept,
            "instance boot to marker (from active)": booted - active,
            "marker": marker.group(0),
            "cleaning": hp.clean_phases(events, undeploy - 1),
            "cleaning_total": time.time() - undeploy,
            # ours: provision's own step events (where its seconds went, step by step)
            "provision_events": dii.get("provision_events", [])}


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
    ours = results["sides"]["ours"]
    ipa = results["sides"].get("ipa")
    pick = (lambda *keys: _dig(ipa, keys)) if ipa else (lambda *keys: None)
    rows = [(k, pick("deploy", k), ours["deploy"][k]) for k in ours["deploy"]]
    if results.get("fast_track"):
        rows.append(("**request → active (fast track)**", pick("request_to_active"),
                     ours["request_to_active"]))
    else:
        rows.append(("**power on → active**", pick("power_on_to_active"),
                     ours["power_on_to_active"]))
    key = "instance boot to marker (from active)"
    rows.append((key, pick(key), ours[key]))
    rows += [(k, pick("cleaning", k), ours["cleaning"][k]) for k in ours["cleaning"]]
    rows.append(("**undeploy + cleaning → available**", pick("cleaning_total"),
                 ours["cleaning_total"]))
    out = hp.table(rows)
    if ours.get("first_byte") and ipa and ipa.get("first_byte"):
        begin = "request" if results.get("fast_track") else "heartbeat"
        out += "\n\n" + hp.table([
            (f"{begin} → the agent is handed the image (conductor)",
             ipa["first_byte"]["handed over"], ours["first_byte"]["handed over"]),
            ("→ the agent opens the image's download (its own clock)",
             ipa["first_byte"]["agent"], ours["first_byte"]["agent"]),
            (f"**{begin} → first byte**", ipa["first_byte"]["total"],
             ours["first_byte"]["total"])])
    if ours.get("start_timings"):
        out += "\n\nours' start (the conductor, s): " + ", ".join(
            f"{k} {v:.3f}" for k, v in ours["start_timings"].items())
    return out


def _dig(side, keys):
    for key in keys:
        side = side[key]
    return side


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--order", default="ipa,ours", help="which side goes first")
    ap.add_argument("--row", type=int, choices=sorted(ROW_SIDES), default=1,
                    help="1: whole-disk image; 2: partition image, root_gb and swap_mb; 3: "
                         "the partition image on software RAID-1; 4: ours only, LVM on the "
                         "RAID-1")
    ap.add_argument("--firmware", choices=("bios", "uefi"), default="bios",
                    help="the machine's firmware (uefi: OVMF, Ironic's default boot mode)")
    ap.add_argument("--format", choices=("raw", "qcow2"), default="raw",
                    help="row 1's image format (qcow2: compressed, as Glance images often are)")
    ap.add_argument("--root-gb", type=int, default=3,
                    help="rows 2-4's root_gb; IPA on UEFI software RAID puts a 550 MiB ESP "
                         "inside the array too, and 3 does not fit its 4 GiB disks then")
    ap.add_argument("--ramdisk", default=os.environ.get("PROVISION_RAMDISK_DIR"),
                    help="ours' ramdisk, built with the bench's --authorized-key (default: "
                         "built, or reused, from the working tree as the lab's tests do)")
    ap.add_argument("--ipa-ramdisk", default=os.environ.get("IPA_RAMDISK_DIR")
                    or str(cache_dir() / "ipa-ramdisk" / "current"))
    ap.add_argument("--fast-track", action="store_true",
                    help="Ironic's fast track on the node (driver_info/fast_track) for both "
                         "sides: each side's deploy runs in the ramdisk a cleaning just "
                         "before left running (manage, provide), no power on before it")
    ap.add_argument("--report", metavar="JSON",
                    help="print the table of a run saved under artifacts/head-to-head and exit")
    args = ap.parse_args()
    if args.report:
        print(report(json.loads(Path(args.report).read_text())))
        return
    order = [side for side in args.order.split(",") if side in ROW_SIDES[args.row]]
    assert sorted(order) == sorted(ROW_SIDES[args.row]), order
    image_file = None
    missing = lablib.missing()
    if missing:
        sys.exit(f"missing: {', '.join(missing)}")
    results = {"uptime_before": uptime(), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
               "row": args.row, "format": args.format, "firmware": args.firmware, "order": order,
               "root_gb": args.root_gb, "fast_track": args.fast_track, "sides": {}}
    if args.ramdisk is None:
        # ensure_ramdisk bakes the bench's key in: the conductor's SSH. A ramdisk built by a
        # plain ramdisk/build.sh boots and never heartbeats to Ironic (no key to offer)
        args.ramdisk = str(ensure_ramdisk().directory)
    test_os = testos.build_dir()
    image = row_image(args.row, Ramdisk(Path(args.ramdisk)), test_os, args.firmware)
    if args.row == 1 and args.format == "qcow2":
        image_file = h2h_image.ensure_qcow2(image)
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
    machine = args.firmware
    with lablib.Lab(workdir, ramdisks["ours"], {machine: machine}, opts, serve_dir=image,
                    disks=2, cpus=2, ipa_ramdisk=ramdisks["ipa"]) as lab:
        first = order[0]
        t = time.time()
        uuid = lab.enroll(machine, provide_timeout=DEPLOY_TIMEOUT, ramdisk=ramdisks[first],
                          interfaces={"deploy": DEPLOY_INTERFACE[first]},
                          properties={"root_device": {"name": "/dev/vda"}})
        results["enroll_provide_first_cleaning"] = {"side": first, "seconds": time.time() - t}
        if args.fast_track:
            lab.ironic.request("PATCH", f"/v1/nodes/{uuid}", [
                {"op": "add", "path": "/driver_info/fast_track", "value": "true"}])
        for side in order:
            print(f"{time.strftime('%H:%M:%S')} {side}: deploy, boot, undeploy, cleaning",
                  flush=True)
            try:
                results["sides"][side] = cycle(lab, uuid, side, ramdisks[side], image,
                                               args.row, image_file, args.root_gb,
                                               args.firmware, args.fast_track)
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
    out = OUT / (f"{time.strftime('%Y%m%d-%H%M%S')}-row{args.row}-{args.firmware}-"
                 f"{args.format}{'-fast-track' if args.fast_track else ''}.json")
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results, indent=1))
    if all("deploy" in results["sides"].get(s, {}) for s in order):
        print(report(results))
    print(f"before: {results['uptime_before']}\nafter:  {results['uptime_after']}\n{out}")


if __name__ == "__main__":
    main()
