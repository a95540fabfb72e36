"""Every sample, as scripts/demo sees it: its format recognised, the images it downloads servable,
and a plan on the machine the demo boots for it (three 4 GiB virtio disks with serials
disk0..2, as samples/inventory/three-disks.json records them; Fuel's full-size provision.json
on three 466 GiB SATA disks, as fuel-three-disks.json). scripts/demo runs each in the VM;
tests/e2e/test_fuel_sample.py provisions one through the demo's
image serving in CI."""

import hashlib
import json

import pytest

from tests.unit.helpers import SAMPLES, run_cli
from tests.vmbench import demo, demo_images

ALL = sorted(p.stem for p in SAMPLES.glob("*.json"))
INVENTORY = {"provision": "fuel-three-disks"}
MACHINE = {"provision": (["476940M"] * 3, "sata"), "provision-vm": (["4096M"] * 3, "virtio")}


def test_there_are_samples_with_and_without_images():
    with_images = {n for n in ALL if demo_images.wanted(demo.load(SAMPLES / f"{n}.json")[0])}
    assert {"ironic-layout", "ironic-whole-disk", "provision", "uefi"} <= with_images
    assert {"single-disk", "two-disk-raid-lvm"}.isdisjoint(with_images)


@pytest.mark.parametrize("name", ALL)
def test_a_sample_with_a_bootloader_brings_an_os_to_boot(name):
    """grub goes into the installed system: a bootloader with no image to install it into
    fails at its step, after the disks were written (uefi.json did, under the demo)."""
    doc = json.loads((SAMPLES / f"{name}.json").read_text())
    if doc.get("bootloader", {}).get("type", "grub2") != "none" and "bootloader" in doc:
        assert doc.get("images"), f"{name}: a bootloader but no image"


@pytest.mark.parametrize("name", ALL)
def test_demo_plans_every_sample(tmp_path, name):
    document, why = demo.load(SAMPLES / f"{name}.json")
    assert why is None
    driver = demo.detect.guess_driver(document)
    assert demo.machine(document, driver) == MACHINE.get(name, (["4G"] * 3, "virtio"))
    rc, out, err = run_cli(tmp_path, document, INVENTORY.get(name, "three-disks"),
                           extra=["--data_driver", driver])
    assert rc == 0, err
    assert "Plan (" in out
    for name in demo_images.wanted(document):
        assert demo_images.shape(name), name


def test_what_the_demo_cannot_serve_is_said_before_anything_boots(tmp_path):
    doc = json.loads((SAMPLES / "ironic-layout.json").read_text())
    doc["instance_info"]["image_source"] = demo_images.IMAGE_HOST + "windows.iso"
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(doc))
    document, why = demo.load(path)
    assert document is None
    assert why.startswith("instance_info.image_source: the demo has no test image for "
                          "'windows.iso'"), why
    doc["instance_info"]["image_source"] = demo_images.IMAGE_HOST + "../etc/passwd"
    assert "not a plain file name" in demo_images.problems(doc)[0]


def test_checksums_of_the_served_files_replace_the_samples(tmp_path):
    served = tmp_path / "root.ext4.zst"
    served.write_bytes(b"the bytes served")
    files = {"testos.ext4.zst": served, "testos-disk.qcow2": served}
    layout = json.loads((SAMPLES / "ironic-layout.json").read_text())
    whole = json.loads((SAMPLES / "ironic-whole-disk.json").read_text())
    native = {"images": [{"uri": demo_images.IMAGE_HOST + "testos.ext4.zst",
                          "checksum": "sha256:" + "0" * 64},
                         {"uri": "http://elsewhere/x.img", "checksum": "md5:" + "1" * 32}]}
    notes = [demo_images.fill_checksums(d, files) for d in (layout, whole, native)]
    assert layout["instance_info"]["image_os_hash_value"] == \
        hashlib.sha512(b"the bytes served").hexdigest()
    assert whole["instance_info"]["image_checksum"] == hashlib.md5(b"the bytes served").hexdigest()
    assert native["images"][0]["checksum"] == \
        "sha256:" + hashlib.sha256(b"the bytes served").hexdigest()
    assert native["images"][1]["checksum"] == "md5:" + "1" * 32      # not ours to serve
    assert notes[0] == ["instance_info.image_os_hash_value: sha512 of root.ext4.zst"]


def test_disk_options_override_the_samples_machine():
    doc = json.loads((SAMPLES / "provision.json").read_text())
    args = demo.argparse.Namespace(disks=None, disk_size="600G")
    assert demo.disks_for(args, doc, "nailgun") == (["600G"] * 3, "sata")
    args = demo.argparse.Namespace(disks=2, disk_size=None)
    assert demo.disks_for(args, {}, "native") == (["4G"] * 2, "virtio")


def test_a_relative_layout_is_the_callers(monkeypatch, tmp_path):
    monkeypatch.setenv("DEMO_CWD", str(SAMPLES))
    assert demo.resolve_layout("single-disk.json") == SAMPLES / "single-disk.json"
    assert demo.main(["--check", "single-disk.json"]) == 0
    assert demo.main(["--check", "nope.json"]) == 2
