"""Keeping data through Ironic's rebuild, for real (issue 54): `baremetal node rebuild` (the
provision state target "rebuild") of an active node, as Nova's `rebuild --preserve-ephemeral`
drives it (instance_info/preserve_ephemeral, a new image_source, the same instance_uuid).

Two machines, side by side, each through one instance's life: deploy, rebuild with
preserve_ephemeral and a new image, rebuild without it.
- "classic": Ironic's own partition-image layout from the flavor's sizes (root_gb,
  ephemeral_gb: the ephemeral partition, ext4 labelled ephemeral0).
- "template": a deploy template's layout (set_layout, asked for by the flavor's trait) with a
  partition sized "ephemeral_gb" and a volume group kept on rebuild ("keep": "on_rebuild", with
  the partition under it), its logical volume mounted at /srv/data.

The markers are written and read inside the booted instance: the test OS has no SSH server and
its console is a file, so the two images deployed are copies of the test OS's ext4 root with a
boot unit added by debugfs (keep-marker.sh): it prints what it finds in its root, its ephemeral
filesystem and /srv/data, then writes a fresh random marker where there is none. The copies
differ in /etc/lab-image ("A", "B"): the root after a rebuild is the new image.

Expected, on both machines: the first boot finds nothing and writes; after the rebuild with
preserve_ephemeral the image is B, the root holds no marker (written anew), the ephemeral
filesystem holds the first boot's marker, at the same place on the disk; after the rebuild
without it the ephemeral filesystem is new (no marker). The template's kept volume holds the
first boot's marker after both rebuilds.

`tox -e ironic-lab -- -k rebuild` (outside CI: 25 minutes with both machines at load 5-9;
one machine alone, `-k classic` or `-k template`, 12).
"""

import concurrent.futures
import hashlib
import os
import pathlib
import re
import subprocess
import time
import uuid as uuidlib

import pytest

from tests.ironic import realglance
from tests.ironic.lab import env as lablib
from tests.vmbench import ensure_ramdisk, images

DEPLOY_TIMEOUT = 1500
MACHINES = ("classic", "template")
TRAIT = "CUSTOM_KEEP_DATA"
SCRIPT = pathlib.Path(__file__).with_name("keep-marker.sh")
UNIT = """[Unit]
Description=the lab's rebuild markers (tests/ironic/lab/test_rebuild.py)
After=local-fs.target systemd-udev-settle.service
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/keep-marker
[Install]
WantedBy=multi-user.target
"""
FOUND = r"LAB-FOUND image=(\S+) root=(\S+) eph=(\S+) data=(\S+)"
WROTE = r"LAB-WROTE root=(\S+) eph=(\S+) data=(\S+)"
# Nova's flavor: root 2 GiB, ephemeral 1 GiB
SIZES = {"root_gb": 2, "ephemeral_gb": 1}
TEMPLATE_LAYOUT = {
    "version": 1,
    "disks": [{"id": "disk0", "match": {"name": "/dev/vda"}, "table": "gpt", "partitions": [
        {"id": "bios", "size": "1MiB", "type": "bios_grub"},
        {"id": "root", "size": "root_gb"},
        {"id": "ephemeral", "size": "ephemeral_gb"},
        {"id": "pv-data", "size": "remaining", "type": "lvm", "keep": "on_rebuild"}]}],
    "volume_groups": [{"id": "vg-data", "name": "data", "pvs": ["pv-data"],
                       "keep": "on_rebuild", "logical_volumes": [
                           {"id": "lv-data", "name": "data", "size": "remaining"}]}],
    "filesystems": [
        {"device": "root", "type": "ext4", "mount": "/", "label": "root"},
        {"device": "ephemeral", "type": "ext4", "label": "ephemeral0"},
        {"device": "lv-data", "type": "ext4", "mount": "/srv/data", "label": "data"}],
}
TIMES = {}


def marker_images(test_os):
    """{"A": path, "B": path}: the test OS's ext4 root with keep-marker.sh run at boot and
    /etc/lab-image saying which; made with debugfs (no mount) and kept next to the test OS
    under the script's hash."""
    key = hashlib.sha256((SCRIPT.read_text() + UNIT).encode()).hexdigest()[:12]
    return {name: _marker_image(test_os, name, key) for name in ("A", "B")}


def _marker_image(test_os, name, key):
    out = test_os / f"root-keep-{name}-{key}.ext4.zst"
    if out.exists():
        return out
    work = test_os / f".keep-{name}-{key}.{os.getpid()}"
    work.mkdir()
    try:
        plain = work / "root.ext4"
        subprocess.run(["zstd", "-q", "-d", "-f", str(test_os / "root.ext4.zst"), "-o",
                        str(plain)], check=True)
        (work / "unit").write_text(UNIT)
        (work / "id").write_text(name + "\n")
        wants = "/etc/systemd/system/multi-user.target.wants/lab-keep-marker.service"
        commands = (f"write {SCRIPT} /usr/local/sbin/keep-marker\n"
                    "sif /usr/local/sbin/keep-marker mode 0100755\n"
                    f"write {work / 'unit'} /etc/systemd/system/lab-keep-marker.service\n"
                    f"symlink {wants} /etc/systemd/system/lab-keep-marker.service\n"
                    f"write {work / 'id'} /etc/lab-image\n")
        subprocess.run(["debugfs", "-w", "-f", "-", str(plain)], input=commands, text=True,
                       check=True, capture_output=True)
        subprocess.run(["e2fsck", "-fn", str(plain)], check=True, capture_output=True)
        seen = subprocess.run(["debugfs", "-R", "cat /etc/lab-image", str(plain)], check=True,
                              capture_output=True, text=True).stdout
        assert seen.strip() == name, seen
        part = work / "out.zst"
        subprocess.run(["zstd", "-q", "-T0", "-3", "--rm", "-f", str(plain), "-o", str(part)],
                       check=True)
        part.rename(out)
    finally:
        subprocess.run(["rm", "-rf", str(work)], check=True)
    return out


@pytest.fixture(scope="module")
def lab(test_os):
    with lablib.Lab(lablib.workdir(), ensure_ramdisk(), {m: "bios" for m in MACHINES},
                    lablib.provision_opts(DEPLOY_TIMEOUT), serve_dir=test_os,
                    cpus=1) as the_lab:
        yield the_lab
    for machine, phases in TIMES.items():
        lablib.report_times(f"rebuild-{machine}", phases)


@pytest.fixture(scope="module")
def lives(lab, test_os, request):
    """The selected machines' lives at once (-k classic: one):
    {machine: (exception or None, what each boot found)}."""
    selected = {item.callspec.params["machine"] for item in request.session.items
                if hasattr(item, "callspec") and item.module is request.module}
    machines = [m for m in MACHINES if m in selected]
    found = {m: [] for m in machines}
    imgs = marker_images(test_os)
    lab.ironic.request("POST", "/v1/deploy_templates", {
        "name": TRAIT, "steps": [{"interface": "deploy", "step": "set_layout",
                                  "priority": 150, "args": {"layout": TEMPLATE_LAYOUT}}]})
    with concurrent.futures.ThreadPoolExecutor(len(machines)) as pool:
        running = {m: pool.submit(_life, lab, imgs, m, found[m]) for m in machines}
    return {m: (future.exception(), found[m]) for m, future in running.items()}


@pytest.mark.parametrize("machine", MACHINES)
def test_rebuild_keeps_the_ephemeral_partition_and_kept_volumes(lives, machine):
    error, boots = lives[machine]
    print(f"\n{machine}: " + "; ".join(str(b) for b in boots))
    if error is not None:
        raise error


def _image_info(lab, path):
    return {"image_source": lab.images.url(path.name), "image_os_hash_algo": "sha256",
            "image_os_hash_value": realglance.file_digest(path, "sha256")}


def _life(lab, imgs, machine, boots):
    times = TIMES.setdefault(machine, {})
    dom = lab.domains[machine]
    t = time.monotonic()
    uuid = lab.enroll(machine, provide_timeout=DEPLOY_TIMEOUT, first_cleaning=False)
    times["enroll+provide"] = time.monotonic() - t
    # As Nova does: the instance's uuid on the node, the flavor's sizes in instance_info.
    lab.ironic.request("PATCH", f"/v1/nodes/{uuid}", [
        {"op": "add", "path": "/instance_uuid", "value": str(uuidlib.uuid4())}])
    info = lablib.instance_info(lab, lab.serve_dir, "bios")
    del info["provision_layout"]
    # A partition image: what Ironic infers from a Glance image with kernel_id and ramdisk_id;
    # an image given by URL says so (without it, Ironic 39 takes it for a whole-disk image).
    info.update(SIZES, image_type="partition", **_image_info(lab, imgs["A"]))
    if machine == "template":
        lab.ironic.request("PUT", f"/v1/nodes/{uuid}/traits/{TRAIT}")
        info["traits"] = [TRAIT]
    lablib.set_instance_info(lab.ironic, uuid, info)
    data = "none" if machine == "template" else "absent"

    first = _deploy(lab, uuid, dom, "active", times, "deploy")
    boots.append(first)
    assert first["found"] == {"image": "A", "root": "none", "eph": "none", "data": data}, first
    wrote = first["wrote"]
    assert all(re.fullmatch(r"[0-9a-f]{8}", wrote[k]) for k in ("root", "eph")), wrote
    place = _ephemeral_place(dom)       # (start, size, filesystem UUID)

    lablib.set_instance_info(lab.ironic, uuid, dict(_image_info(lab, imgs["B"]),
                                                    preserve_ephemeral=True))
    second = _deploy(lab, uuid, dom, "rebuild", times, "rebuild preserving")
    boots.append(second)
    assert second["found"] == {"image": "B", "root": "none", "eph": wrote["eph"],
                               "data": wrote["data"]}, (second, wrote)
    assert _ephemeral_place(dom) == place, (place, _ephemeral_place(dom))
    assert second["wrote"]["root"] != wrote["root"], second

    lablib.set_instance_info(lab.ironic, uuid, {"preserve_ephemeral": False})
    third = _deploy(lab, uuid, dom, "rebuild", times, "rebuild not preserving")
    boots.append(third)
    assert third["found"] == {"image": "B", "root": "none", "eph": "none",
                              "data": wrote["data"]}, (third, wrote)
    again = _ephemeral_place(dom)
    assert again[:2] == place[:2] and again[2] != place[2], (place, again)    # made anew


def _deploy(lab, uuid, dom, target, times, name):
    """Deploy or rebuild, then the instance's boot: what it found and what it wrote."""
    console_at = len(dom.console_text())
    t = time.monotonic()
    lab.ironic.set_state(uuid, target)
    node = lablib.wait_state(lab.ironic, uuid, ["active"], DEPLOY_TIMEOUT + 120)
    times[f"{name} to active"] = time.monotonic() - t
    dii = node["driver_internal_info"]
    assert dii["provision_exit_code"] == 0 and node["last_error"] is None, node["last_error"]
    t = time.monotonic()
    wrote = dom.wait_console(WROTE, 900, since=console_at)
    times[f"{name}: boot to markers"] = time.monotonic() - t
    found = re.search(FOUND, dom.console_text()[console_at:])
    assert found, "the marker unit printed what it wrote but not what it found"
    return {"target": target,
            "found": dict(zip(("image", "root", "eph", "data"), found.groups())),
            "wrote": dict(zip(("root", "eph", "data"), wrote.groups()))}


def _ephemeral_place(dom):
    """(start, size in sectors, filesystem UUID) of the first disk's partition holding the
    filesystem labelled ephemeral0, read from the disk image on the host."""
    parts = images.probe_partitions(dom.disk_images[0])
    places = [(p["start"], p["size"], tags.get("UUID")) for p, tags in parts
              if tags.get("LABEL") == "ephemeral0"]
    assert len(places) == 1, parts
    return places[0]
