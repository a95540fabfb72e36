"""`provision erase` with method full in the VM (issue 33): an NVMe disk and a virtio disk
carry a known pattern, the erase picks a method per disk (qemu's NVMe: Format NVM with secure
erase; virtio with discard=unmap on a sparse file: a discard that reads back as zeros), and
the disk images, read from the host after power-off, hold no byte of the pattern. The method
of each disk is in the events."""

import json

PATTERN = b"TENANT-DATA-4a7c"          # 16 bytes, written over the first 256 MiB of each disk


def _pattern_offsets(image, limit=256 << 20, step=16 << 20):
    found = 0
    with open(image, "rb") as f:
        pos = 0
        while pos < limit:
            block = f.read(step)
            if not block:
                break
            found += block.count(PATTERN)
            pos += len(block)
    return found


def test_full_erase_leaves_no_pattern_on_an_nvme_and_a_virtio_disk(make_vm):
    vm = make_vm(disks=["1G", "1G"], bus=["nvme", "virtio"], keep_disks=True,
                 serials=["erase-nvme", "erase-virtio"])
    for disk in ("/dev/nvme0n1", "/dev/vda"):
        vm.ssh(f"yes TENANT-DATA-4a7c | tr -d '\\n' | head -c 268435456 "
               f"| dd of={disk} bs=1M iflag=fullblock oflag=direct status=none && sync")
        assert vm.ssh(f"head -c 16 {disk}").stdout == PATTERN.decode()
    for image in vm.disk_images:            # the host sees the pattern in the image files
        assert _pattern_offsets(image) == (256 << 20) // len(PATTERN), image
    vm.write_text("/tmp/erase.json", json.dumps({"method": "full"}))
    run = vm.provision(None, ["--input_data_file", "/tmp/erase.json", "--plan_format", "json",
                              "--events_file", "/tmp/erase-events.jsonl"], subcommand="erase")
    assert run.returncode == 0, run.log
    report = json.loads(run.stdout)
    assert report["methods"]["/dev/nvme0n1"].startswith("nvme_"), report
    assert report["methods"]["/dev/vda"] in ("discard", "overwrite"), report
    events = [json.loads(line) for line in vm.ssh(["cat", "/tmp/erase-events.jsonl"])
              .stdout.splitlines()]
    said = [e["description"] for e in events
            if e.get("kind") == "erase_device" and e.get("status") == "done"]
    assert any(d.startswith("erase /dev/nvme0n1: nvme_") for d in said), said
    vm.stop()
    for image in vm.disk_images:
        assert _pattern_offsets(image) == 0, image
    vm.keep_disks = False


NS_BYTES = 256 << 20
NS_PATTERN = 64 << 20               # written over the first 64 MiB of each namespace
# nvme-cli behind a wrapper whose Identify Controller says FNA 0x3: Format NVM (and its
# secure erase) applies to every namespace. qemu's controller does not say so itself.
FAKE_FNA = """#!/bin/sh
if [ "$1" = id-ctrl ]; then
  /run/nvme.real "$@" | sed -E 's/"fna"[[:space:]]*:[[:space:]]*[0-9]+/"fna":3/'
  exit 0
fi
exec /run/nvme.real "$@"
"""


def _erase_skipping_ns2(vm, tag):
    vm.ssh(f"yes TENANT-DATA-4a7c | tr -d '\\n' | head -c {NS_PATTERN} "
           f"| dd of=/dev/nvme0n1 bs=1M iflag=fullblock oflag=direct status=none && sync")
    doc = {"method": "full", "skip_block_devices": [{"name": "/dev/nvme0n2"}]}
    vm.write_text("/tmp/erase.json", json.dumps(doc))
    run = vm.provision(None, ["--input_data_file", "/tmp/erase.json", "--plan_format", "json",
                              "--events_file", f"/tmp/erase-{tag}.jsonl"], subcommand="erase")
    assert run.returncode == 0, run.log
    report = json.loads(run.stdout)
    assert report["erased"] == ["/dev/nvme0n1"], report
    assert ["/dev/nvme0n2", "skip_block_devices[0] matches it"] in report["skipped"], report
    said = [json.loads(line)["description"] for line in vm.ssh(
        ["cat", f"/tmp/erase-{tag}.jsonl"]).stdout.splitlines()
        if '"erase_device"' in line and '"done"' in line]
    # the namespace left out still holds every byte of its pattern, read in the guest
    assert vm.ssh(f"head -c {NS_PATTERN} /dev/nvme0n2 | tr -d '\\n' | sha256sum").stdout == \
        vm.ssh(f"yes TENANT-DATA-4a7c | tr -d '\\n' | head -c {NS_PATTERN} | sha256sum").stdout
    return report["methods"]["/dev/nvme0n1"], said


def test_erasing_one_namespace_leaves_a_skipped_one_of_the_same_controller(make_vm, tmp_path):
    """Issue 52 item 2: qemu's NVMe controller with two namespaces, the second named by
    skip_block_devices. With the FNA qemu reports, and again with FNA 0x3 (a format that
    reaches every namespace) reported by a wrapper around nvme-cli, the first is erased and
    the second keeps its data, read back in the guest and from its image file."""
    images = [tmp_path / "ns1.img", tmp_path / "ns2.img"]
    extra = ["-device", "nvme,id=nvme0,serial=two-ns"]
    for i, image in enumerate(images, 1):
        with open(image, "wb") as f:
            f.truncate(NS_BYTES)
        extra += ["-drive", f"file={image},format=raw,if=none,id=ns{i},cache=unsafe,"
                            f"discard=unmap",
                  "-device", f"nvme-ns,drive=ns{i},bus=nvme0,nsid={i}"]
    vm = make_vm(disks=[], extra_args=extra)
    ident = json.loads(vm.ssh("nvme id-ctrl /dev/nvme0 --output-format=json").stdout)
    print(f"\nqemu's controller: fna {ident['fna']:#x} oacs {ident['oacs']:#x} "
          f"cmic {ident['cmic']:#x}; list-ns --all: "
          f"{vm.ssh('nvme list-ns /dev/nvme0 --all', check=False).stdout.split()}")
    vm.ssh(f"yes TENANT-DATA-4a7c | tr -d '\\n' | head -c {NS_PATTERN} "
           f"| dd of=/dev/nvme0n2 bs=1M iflag=fullblock oflag=direct status=none && sync")

    real, said = _erase_skipping_ns2(vm, "qemu")
    print(f"with qemu's FNA: {real}: {said}")
    if ident["fna"] & 0x3:
        assert not real.startswith("nvme_"), (real, said)
    else:
        assert real.startswith("nvme_"), (real, said)     # a format of this namespace alone

    vm.write_text("/run/nvme-fake-fna", FAKE_FNA)
    vm.ssh("cp \"$(command -v nvme)\" /run/nvme.real && chmod 755 /run/nvme-fake-fna && "
           "mount --bind /run/nvme-fake-fna \"$(command -v nvme)\"")
    assert json.loads(vm.ssh("nvme id-ctrl /dev/nvme0 --output-format=json").stdout)[
        "fna"] == 3
    faked, said = _erase_skipping_ns2(vm, "fna3")
    print(f"with FNA 0x3: {faked}: {said}")
    assert faked in ("discard", "overwrite"), (faked, said)
    assert "applies to every namespace of its subsystem" in said[0], said
    assert "namespace ID 2 there is not being erased" in said[0], said

    vm.stop()
    assert _pattern_offsets(images[0], limit=NS_PATTERN) == 0
    assert _pattern_offsets(images[1], limit=NS_PATTERN) == NS_PATTERN // len(PATTERN)
