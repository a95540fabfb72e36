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
