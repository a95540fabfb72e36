"""Documents through the ironic data driver name no file of the ramdisk: an image, a signature
or a key file given as file:// or a path (which provision would read in the ramdisk and copy
onto the tenant's disk: the job's input document carries the registry's Authorization header)
is refused, in instance_info and in a given layout alike. By hand (native) they stay allowed."""

import copy

import pytest

from provision_agent.data_drivers.ironic import IronicDriver
from provision_agent.data_drivers.native import NativeDriver
from tests.unit.data_drivers.test_ironic import node, problems
from tests.unit.helpers import sample

JOB = "/run/provision-ironic/input.json"
KEY = {"uri": "http://keys.example/data.key", "checksum": "sha256:" + "c" * 64}


def _layout_doc(**image):
    doc = node()
    layout = copy.deepcopy(sample("single-disk"))
    layout["images"] = [dict({"uri": "http://h/root.img", "format": "raw", "target": "root",
                              "checksum": "sha256:" + "b" * 64}, **image)]
    doc["layout"] = layout
    return doc


@pytest.mark.parametrize("source", [f"file://{JOB}", JOB, f"FILE://{JOB}"])
def test_instance_info_image_from_a_ramdisk_path_is_refused(source):
    found = problems(node(image_source=source))
    assert any(p.startswith("instance_info.image_source: a path in the ramdisk") for p in found)
    assert not any(JOB in p for p in found)
    found = problems(node(image_source="http://h/ok.img", image_url=source))
    assert any("instance_info.image_source: a path in the ramdisk" in p for p in found)


def test_instance_info_signature_from_a_ramdisk_path_is_refused():
    found = problems(node(image_signature="file:///etc/shadow"))
    assert any(p.startswith("instance_info.image_signature: a path in the ramdisk")
               for p in found)
    assert not any("shadow" in p for p in found)


@pytest.mark.parametrize("field,value,where", [
    ("uri", f"file://{JOB}", "layout.images[0].uri"),
    ("uri", JOB, "layout.images[0].uri"),
    ("signature", "/run/provision-ironic/keyring.pgp", "layout.images[0].signature"),
])
def test_a_layouts_image_or_signature_from_a_ramdisk_path_is_refused(field, value, where):
    found = problems(_layout_doc(**{field: value}))
    assert any(p.startswith(f"{where}: a path in the ramdisk") for p in found), found


def test_a_layouts_key_file_from_a_ramdisk_path_is_refused():
    doc = _layout_doc()
    layout = doc["layout"]
    layout["encrypted"] = [{"id": "crypt-data", "device": "swap", "unlock": {
        "key_file": dict(KEY, uri=f"file://{JOB}")}}]
    layout["recovery"] = {"age_recipients": [
        "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"]}
    found = problems(doc)
    assert any(p.startswith("layout.encrypted[0].unlock.key_file.uri: a path in the ramdisk")
               for p in found), found
    assert not any(JOB in p for p in found)


def test_urls_pass_and_a_native_document_by_hand_may_name_local_files():
    doc = IronicDriver(_layout_doc(signature="http://h/root.img.sig")).native_document()
    assert doc["images"][0]["signature"] == "http://h/root.img.sig"
    layout = _layout_doc(uri=f"file://{JOB}")["layout"]
    layout["bootloader"] = {"boot_mode": "bios"}
    assert NativeDriver(layout).layout().images[0].uri == f"file://{JOB}"
