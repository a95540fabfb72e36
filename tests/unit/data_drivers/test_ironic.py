"""The ironic data driver: classic partition-image and whole-disk layouts, a given layout, hints."""

import copy

import pytest

from provision_agent.data_drivers.ironic import IronicDriver
from provision_agent.errors import InputError, MachineMismatch
from provision_agent.plan import inventory as inv_mod
from provision_agent.plan import pipeline
from tests.unit.helpers import CONFIGDRIVE, inventory, run_cli, sample

SHA = "a" * 64


def node(**info):
    base = {"image_source": "http://h/img.raw", "image_os_hash_algo": "sha256",
            "image_os_hash_value": SHA, "image_disk_format": "raw",
            "kernel": "http://h/k", "ramdisk": "http://h/r", "root_gb": 2}
    base.update(info)
    return {"node_uuid": "u", "instance_info": {k: v for k, v in base.items() if v is not None},
            "properties": {"root_device": {"serial": "disk1"}}, "boot_mode": "bios"}


def native(doc):
    return IronicDriver(doc).native_document()


def problems(doc):
    with pytest.raises(InputError) as exc:
        IronicDriver(doc).layout()
    return [str(p) for p in exc.value.problems]


def plan(doc):
    return pipeline.build_plan(IronicDriver(doc).layout(),
                               inv_mod.from_document(inventory("three-disks")))


def test_bios_partition_image_defaults_to_msdos_with_root_only():
    doc = native(node())
    (disk,) = doc["disks"]
    assert disk["table"] == "msdos"
    assert disk["match"] == {"serial": "disk1"}
    assert [(p["id"], p["size"]) for p in disk["partitions"]] == [("root", "2GiB")]
    assert doc["images"] == [{"uri": "http://h/img.raw", "format": "raw", "target": "root",
                              "checksum": f"sha256:{SHA}",
                              "origin": "instance_info.image_source"}]
    assert doc["bootloader"]["boot_mode"] == "bios"


def test_classic_order_bios_grub_ephemeral_swap_configdrive_root_on_gpt():
    doc = node(ephemeral_gb=1, ephemeral_format="xfs", swap_mb=256, configdrive=CONFIGDRIVE,
               capabilities={"disk_label": "gpt"})
    out = native(doc)
    parts = out["disks"][0]["partitions"]
    assert [(p["id"], p.get("type", "linux"), p["size"]) for p in parts] == [
        ("bios-boot", "bios_grub", 1), ("ephemeral0", "linux", "1GiB"),
        ("swap1", "swap", 256), ("configdrive", "linux", 64), ("root", "linux", "2GiB")]
    fss = {fs["device"]: fs for fs in out["filesystems"]}
    assert fss["ephemeral0"]["type"] == "xfs" and "mount" not in fss["ephemeral0"]
    assert fss["swap1"]["type"] == "swap"
    assert fss["root"]["mount"] == "/" and fss["root"]["type"] == "ext4"
    assert out["configdrive"] == {"format": "config-2", "content": CONFIGDRIVE,
                                  "origin": "instance_info.configdrive",
                                  "partition": "configdrive"}
    res = plan(doc)
    assert [p.size.bytes for p in res.resolved.layout.disks[0].partitions] == [
        1 << 20, 1 << 30, 256 << 20, 64 << 20, 2 << 30]


def test_uefi_partition_image_gets_an_esp_on_gpt():
    doc = node()
    doc["boot_mode"] = "uefi"
    out = native(doc)
    disk = out["disks"][0]
    assert disk["table"] == "gpt"
    assert disk["partitions"][0] == {"id": "efi-part", "size": 200, "type": "esp",
                                     "origin": "boot_mode"}
    assert {fs["mount"]: fs["type"] for fs in out["filesystems"] if "mount" in fs} == {
        "/boot/efi": "vfat", "/": "ext4"}
    plan(doc)      # validates: UEFI needs the ESP at /boot/efi


@pytest.mark.parametrize("fmt,native_fmt", [("raw", "disk"), ("qcow2", "qcow2")])
def test_whole_disk_image_targets_the_root_disk(fmt, native_fmt):
    doc = node(kernel=None, ramdisk=None, image_disk_format=fmt)
    out = native(doc)
    (disk,) = out["disks"]
    assert "partitions" not in disk
    assert out["images"][0]["format"] == native_fmt
    assert out["images"][0]["target"] == "root-disk"
    assert out["bootloader"] == {"type": "image", "boot_mode": "bios",
                                 "origin": "instance_info (whole-disk image)"}
    assert "configdrive" not in out
    res = plan(doc)
    steps = [s for s in res.steps if s.kind == "write_image"]
    assert len(steps) == 1 and "/dev/vdb" in steps[0].description
    # BIOS: the image's boot code is in its first sectors, nothing to do
    assert [s.kind for s in res.steps] == ["wipe", "write_image"]


def test_whole_disk_image_on_uefi_gets_the_nvram_entry_after_the_configdrive():
    doc = dict(node(kernel=None, ramdisk=None, image_disk_format="raw", configdrive=CONFIGDRIVE),
               boot_mode="uefi")
    res = plan(doc)
    assert [s.kind for s in res.steps] == ["wipe", "write_image", "configdrive", "bootloader"]
    step = res.steps[-1]
    assert step.args["type"] == "image" and step.args["boot_mode"] == "uefi"
    assert step.args["targets"] == ["/dev/vdb"]
    assert "NVRAM boot entry" in step.description and "/dev/vdb" in step.description


def test_legacy_md5_checksum_and_missing_checksum():
    out = native(node(image_os_hash_algo=None, image_os_hash_value=None,
                      image_checksum="9e107d9d372bb6826bd81d3542a419d6"))
    assert out["images"][0]["checksum"] == "md5:9e107d9d372bb6826bd81d3542a419d6"
    assert any(p.startswith("instance_info: no image checksum")
               for p in problems(node(image_os_hash_algo=None, image_os_hash_value=None)))


def test_a_checksum_file_url_in_image_checksum_is_read_in_the_ramdisk():
    """Ironic and ironic-python-agent take a checksum file's URL; it used to be refused as
    'expected ALGORITHM:HEX' (exit 2)."""
    url = "http://h/img.raw.sha256sum"
    out = native(node(image_os_hash_algo=None, image_os_hash_value=None, image_checksum=url))
    image = out["images"][0]
    assert image["checksum_url"] == url and "checksum" not in image
    assert "checksum_algo" not in image        # the digest's length will tell
    out = native(node(image_os_hash_value=url, image_os_hash_algo="sha512"))
    assert (out["images"][0]["checksum_url"], out["images"][0]["checksum_algo"]) == (url, "sha512")
    assert any(p.startswith("instance_info.image_checksum: not an md5, sha256 or sha512 hex "
                            "digest, nor the http(s) URL of a checksum file")
               for p in problems(node(image_os_hash_algo=None, image_os_hash_value=None,
                                      image_checksum="ftp://h/sums")))


@pytest.mark.parametrize("fmt,says", [
    ("unknown", "'unknown': Ironic could not tell the OCI artifact's disk type"),
    ("bootc", "'bootc': the OCI reference is a container image (bootc), not a disk image")])
def test_an_oci_artifact_ironic_found_no_disk_format_for_is_refused(fmt, says):
    out = problems(node(image_source="oci://r.example/images/disk:v1", kernel=None,
                        ramdisk=None, image_url="http://r.example/v2/images/disk/blobs/x",
                        image_disk_format=fmt))
    assert any(p.startswith(f"instance_info.image_disk_format: {says}") for p in out), out


def test_an_oci_reference_the_deploy_interface_did_not_resolve_is_refused():
    out = problems(node(image_source="oci://r.example/images/disk:v1", kernel=None,
                        ramdisk=None))
    assert any("'oci://r.example/images/disk:v1' has not been resolved: the deploy interface "
               "resolves an oci:// reference to its blob's URL (image_url)" in p for p in out)


def test_bad_instance_info_fields_are_named():
    out = problems(node(image_source="glance-uuid-1234", root_gb=0, swap_mb="lots"))
    assert any(p.startswith("instance_info.image_source: 'glance-uuid-1234' is not an http(s) URL")
               for p in out)
    assert "instance_info.root_gb: a partition image needs root_gb (GiB) > 0" in out
    assert "instance_info.swap_mb: 'lots' is not a whole number" in out


def test_root_device_hints_map_and_unsupported_ones_are_refused():
    doc = node()
    doc["properties"]["root_device"] = {"size": ">= 4", "rotational": "true", "model": "QEMU"}
    assert native(doc)["disks"][0]["match"] == {"size": ">= 4", "rotational": True,
                                                "model": "QEMU"}
    doc["properties"]["root_device"] = {"wwn_with_extension": "0x1"}
    assert any(p.startswith("properties.root_device.wwn_with_extension: root device hint")
               for p in problems(doc))


def _disks(*specs):
    """An inventory: (name, GiB, extra fields)."""
    return inv_mod.from_document({"disks": [
        dict({"name": name, "size": gib << 30, "serial": f"s-{name}"}, **extra)
        for name, gib, extra in specs]})


def _picked(doc, disks):
    planned = pipeline.build_plan(IronicDriver(doc).layout(), disks)
    return planned.resolved.devices["root-disk"], planned.resolved.matched_by["root-disk"]


def test_without_hints_the_smallest_disk_of_at_least_4_gib_as_ironic_picks():
    """ironic-python-agent's guess_root_disk: sorted by size, then name; the first >= 4 GiB.
    This refused the node (exit 3) when several disks matched."""
    doc = node()
    del doc["properties"]
    out = native(doc)["disks"][0]
    assert out["match"] == {"size": ">= 4"} and out["pick"] == "smallest"
    disks = _disks(("sda", 960, {}), ("sdb", 3, {}), ("nvme0n1", 480, {}), ("sdc", 480, {}))
    name, why = _picked(doc, disks)
    assert name == "/dev/nvme0n1"       # 480 GiB twice: the first by name; sdb is under 4 GiB
    assert "the smallest of 3" in why and "as Ironic picks" in why
    name, _ = _picked(doc, inv_mod.from_document(inventory("three-disks")))
    assert name == "/dev/vda"           # three equal disks: the first by name


def test_without_hints_a_usb_stick_or_read_only_disk_is_never_picked():
    """ironic-python-agent would take the 8 GiB USB stick before the 480 GiB disk."""
    doc = node()
    del doc["properties"]
    disks = _disks(("sda", 480, {}), ("sdb", 8, {"tran": "usb"}), ("sdc", 16, {"removable": True}),
                   ("sdd", 32, {"read_only": True}))
    name, why = _picked(doc, disks)
    assert name == "/dev/sda"
    assert "left out: /dev/sdb removable" in why and "/dev/sdd read-only" in why
    with pytest.raises(MachineMismatch) as exc:
        _picked(doc, _disks(("sdb", 8, {"tran": "usb"})))
    assert "no program picks by itself" in str(exc.value.problems[0])


def test_skip_block_devices_are_never_the_root_disk():
    doc = node()
    doc["properties"] = {"skip_block_devices": [{"name": "/dev/sdb"}, {"volume_name": "r1"}]}
    disks = _disks(("sda", 960, {}), ("sdb", 100, {}), ("sdc", 480, {}))
    name, why = _picked(doc, disks)
    assert name == "/dev/sdc" and "/dev/sdb: exclude[0] left out" in why
    # with hints too: a hint that finds only a skipped disk finds none
    doc["properties"]["root_device"] = {"name": "/dev/sdb"}
    with pytest.raises(MachineMismatch) as exc:
        _picked(doc, disks)
    assert "left out" in str(exc.value.problems[0])


def test_instance_info_root_device_comes_before_the_nodes_own():
    """Ironic's deploy_utils.get_root_device_for_deploy: instance_info, then properties."""
    doc = node(root_device={"serial": "s-sdc"})
    name, why = _picked(doc, _disks(("sda", 8, {}), ("sdb", 8, {}), ("sdc", 8, {})))
    assert name == "/dev/sdc" and why == "serial='s-sdc'"
    assert native(doc)["disks"][0]["origin"] == "instance_info.root_device"


def test_an_operator_can_keep_refusing_a_node_without_hints():
    """[provision_agent]root_device_hints_required: the document says "refuse"."""
    doc = node()
    del doc["properties"]
    doc["root_device_default"] = "refuse"
    assert "pick" not in native(doc)["disks"][0]
    with pytest.raises(MachineMismatch) as exc:
        plan(doc)          # three 4 GiB disks: ambiguous, refused
    assert "3 disks match" in str(exc.value.problems[0])


def test_given_layout_is_used_and_completed_from_instance_info():
    doc = sample("ironic-layout")
    out = native(doc)
    assert out["disks"] == doc["layout"]["disks"]
    (image,) = out["images"]
    assert image["target"] == "lv-root" and image["format"] == "raw"
    assert image["checksum"].startswith("sha512:cf83e135")
    assert out["configdrive"]["content"] == doc["instance_info"]["configdrive"]
    assert out["bootloader"]["boot_mode"] == "bios"


def test_given_layout_keeps_its_own_image():
    doc = copy.deepcopy(sample("ironic-layout"))
    doc["layout"]["images"] = [{"uri": "http://x/root.tar", "format": "tar", "target": "/",
                                "allow_no_checksum": True}]
    assert native(doc)["images"] == doc["layout"]["images"]


def _flavor_layout(**sizes):
    """samples/single-disk.json with the named partitions sized by the flavor."""
    doc = node(kernel=None, ramdisk=None, root_gb=3, swap_mb=512, ephemeral_gb=0)
    doc["layout"] = copy.deepcopy(sample("single-disk"))
    for part in doc["layout"]["disks"][0]["partitions"]:
        if part["id"] in sizes:
            part["size"] = sizes[part["id"]]
    return doc


def test_a_layout_sizes_root_and_swap_by_the_flavor():
    layout = IronicDriver(_flavor_layout(root="root_gb", swap="swap_mb")).layout()
    sizes = {p.id: p.size.bytes for p in layout.disks[0].partitions}
    assert sizes["root"] == 3 << 30 and sizes["swap"] == 512 << 20
    assert layout.warnings == []


def test_flavor_sizes_a_layout_ignores_are_said():
    doc = _flavor_layout()
    doc["instance_info"]["ephemeral_gb"] = 5
    warnings = IronicDriver(doc).layout().warnings
    assert any("instance_info.root_gb (3) is not used" in w for w in warnings), warnings
    assert any("instance_info.swap_mb (512) is not used" in w for w in warnings), warnings
    assert any("instance_info.ephemeral_gb (5)" in w for w in warnings), warnings


def test_a_flavor_size_the_deploy_does_not_set_is_refused_where_it_is_used():
    doc = _flavor_layout(root="ephemeral_gb")
    out = problems(doc)
    assert ("layout.disks[0].partitions[2].size: refers to instance_info.ephemeral_gb, which "
            "this deploy does not set (or sets to 0)") in out, out


def test_an_ignored_flavor_size_shows_with_the_plan():
    from provision_agent.plan import render
    text = render.plan_text(plan(_flavor_layout(root="root_gb")))
    assert "Warning: instance_info.swap_mb (512) is not used" in text, text


def test_layout_schema_errors_are_located_under_layout():
    doc = copy.deepcopy(sample("ironic-layout"))
    doc["layout"]["disks"][0]["partitions"][0]["size"] = -1
    out = problems(doc)
    assert any(p.startswith("layout.disks[0].partitions[0].size:") for p in out), out


def test_missing_instance_info():
    assert problems({"node_uuid": "u"}) == [
        "instance_info: missing: the node's instance_info object"]


@pytest.mark.parametrize("fmt", ["raw", "qcow2"])
def test_whole_disk_image_with_configdrive_appends_a_partition_after_the_image(fmt):
    # qcow2: what Nova sends most (a Glance qcow2 image and a configdrive); it was refused
    # with "root-disk has no partitions and gets no whole-disk image" (found by the
    # head-to-head, where ironic-python-agent deployed it)
    steps = plan(node(kernel=None, ramdisk=None, configdrive=CONFIGDRIVE,
                      image_disk_format=fmt, image_source=f"http://h/img.{fmt}")).steps
    kinds = [s.kind for s in steps]
    assert kinds.index("write_image") < kinds.index("configdrive")
    cd = steps[kinds.index("configdrive")].args
    disk = steps[kinds.index("write_image")].args["device"]
    assert cd["device"] is None and cd["append_to"] == disk and cd["size_bytes"] == 64 << 20
    assert cd["content"] == CONFIGDRIVE


@pytest.mark.parametrize("content, said", [
    # gzip of nothing
    ("H4sICAAAAAAAA2NvbmZpZ2RyaXZlAAMAAAAAAAAAAAA=", "the configdrive is empty"),
    ("aGVsbG8=", "the configdrive is 5 bytes that are not an ISO9660 image"),
])
def test_a_configdrive_that_is_no_config2_iso_is_refused_before_anything_runs(tmp_path, content,
                                                                              said):
    doc = copy.deepcopy(sample("ironic-layout"))
    doc["instance_info"]["configdrive"] = content
    rc, out, err = run_cli(tmp_path, doc, extra=["--data_driver", "ironic"])
    assert rc == 2 and out == ""
    assert f"instance_info.configdrive: {said}" in err, err
    assert content not in err


ARMOUR = "-----BEGIN PGP SIGNATURE-----\n\niHUEABYKAB0WIQRkK1xGafA2\n-----END PGP SIGNATURE-----\n"


@pytest.mark.parametrize("given", [ARMOUR, "https://u:pw@h/img.raw.sig?sig=x"])
def test_image_signature_becomes_the_images_signature(given):
    assert native(node(image_signature=given))["images"][0]["signature"] == given
    step = next(s for s in pipeline.build_plan(
        IronicDriver(node(image_signature=given)).layout(),
        inv_mod.from_document(inventory("three-disks")), keyring=True).steps
        if s.kind == "write_image")
    assert step.args["signature"] == given
    assert "signature" not in native(node())["images"][0]


def test_image_signature_follows_the_policy_and_its_form_is_checked():
    with pytest.raises(InputError, match="no signature: a keyring is configured"):
        pipeline.check_layout(IronicDriver(node()).layout(), keyring=True)
    with pytest.raises(InputError, match="a signature is given, but no keyring"):
        pipeline.check_layout(IronicDriver(node(image_signature=ARMOUR)).layout())
    found = problems(node(image_signature="c2VjcmV0IHNpZ25hdHVyZQ=="))
    assert any("signature" in p for p in found)
    assert not any("c2VjcmV0" in p for p in found)


def test_secure_boot_makes_the_partition_images_grub_the_signed_chain():
    doc = dict(node(), boot_mode="uefi", secure_boot=True)
    assert native(doc)["bootloader"] == {"boot_mode": "uefi", "origin": "boot_mode",
                                         "secure_boot": True}
    (step,) = [s for s in plan(doc).steps if s.kind == "bootloader"]
    assert step.args["secure_boot"] is True
    assert "Secure Boot: shim + signed grub" in step.description
    assert native(dict(node(), boot_mode="uefi"))["bootloader"].get("secure_boot") is None


def test_secure_boot_leaves_a_whole_disk_images_own_chain_alone():
    doc = dict(node(kernel=None, ramdisk=None), boot_mode="uefi", secure_boot=True)
    assert native(doc)["bootloader"] == {"type": "image", "boot_mode": "uefi",
                                         "origin": "instance_info (whole-disk image)"}
    (step,) = [s for s in plan(doc).steps if s.kind == "bootloader"]
    assert step.args["secure_boot"] is False       # its CSV names its shim, if it has one


def test_secure_boot_in_bios_or_against_the_layout_is_refused():
    assert problems(dict(node(), secure_boot=True)) == [
        "secure_boot: Secure Boot needs UEFI, but the boot mode is 'bios'"]
    doc = dict(node(), boot_mode="uefi", secure_boot=True,
               layout={"version": 1, "disks": [{"id": "d", "match": {"name": "/dev/vda"}}],
                       "bootloader": {"secure_boot": False}})
    (msg,) = problems(doc)
    assert msg.startswith("layout.bootloader.secure_boot: false, but Ironic turns Secure Boot on")


@pytest.mark.parametrize("image_type,kernel,whole", [
    ("partition", None, False), ("whole-disk", "http://h/k", True), (None, None, True),
    (None, "http://h/k", False)])
def test_image_type_decides_as_in_ironic_then_kernel_and_ramdisk(image_type, kernel, whole):
    # An HTTP partition image is named by image_type alone (no kernel or ramdisk to give);
    # written as a whole-disk image it would overwrite the table Ironic's layout asks for.
    doc = node(image_type=image_type, kernel=kernel, ramdisk=kernel, swap_mb=256)
    out = native(doc)
    assert ("partitions" not in out["disks"][0]) == whole
    assert (out["images"][0]["target"] == "root-disk") == whole
