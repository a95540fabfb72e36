"""The whole-disk images' tables checked against their disks' sectors before the run."""

import pytest

from provision_agent.drivers import partitions
from provision_agent.drivers.images import write_step
from provision_agent.errors import ImageError
from provision_agent.machine import image_tables
from provision_agent.plan.steps import make as Step
from tests.unit.drivers.test_image_sectors import gpt


def image(fmt, device="/dev/sda", **more):
    return Step("write_image", {"uri": "https://u:secret@h/x.img?sig=abc", "format": fmt,
                                "device": device, "mount_point": None, **more})


@pytest.fixture
def heads(monkeypatch):
    """The disks' sector size (4096) and the images' heads (a GPT made for 512-byte
    sectors), with the steps whose head was read."""
    read = []
    monkeypatch.setattr(partitions, "logical_sector_size", lambda dev: 4096)

    def head(args, options, runner):
        read.append((args["format"], options))
        return bytes(gpt(512))
    monkeypatch.setattr(write_step, "disk_head", head)
    return read


@pytest.mark.parametrize("step", [image("disk"), image("qcow2", whole_disk=True)])
def test_a_whole_disk_image_for_other_sectors_is_refused(heads, step):
    with pytest.raises(ImageError) as exc:
        image_tables.check([step], {"image_insecure": True}, runner=None)
    assert exc.value.exit_code == 5
    text = str(exc.value)
    assert ("its gpt partition table was made for 512-byte sectors, and /dev/sda has "
            "4096-byte logical sectors") in text
    assert "Nothing of it was written: refused before the run's first write" in text
    assert "secret" not in text and "sig=abc" not in text
    assert heads == [(step.args["format"], {"image_insecure": True})]


def test_images_that_do_not_hold_a_disk_are_not_read(heads):
    steps = [image("raw", "/dev/sda1"), image("qcow2", "/dev/sda2"), Step("wipe", {
        "disk": "/dev/sda"})]
    image_tables.check(steps, {}, runner=None)
    assert heads == []


def test_an_image_whose_head_cannot_be_read_is_left_to_the_writer(monkeypatch):
    monkeypatch.setattr(partitions, "logical_sector_size", lambda dev: 4096)
    monkeypatch.setattr(write_step, "disk_head", lambda args, options, runner: None)
    image_tables.check([image("disk")], {}, runner=None)


def test_the_source_options_are_the_writers(monkeypatch):
    opts = write_step.source_options({"authorization": "Bearer oci"}, {
        "image_insecure": True, "image_ca_bundle": "/ca.pem", "image_headers": ["X-A: b"],
        "image_stall_seconds": 30})
    assert opts == {"tls_verify": False, "ca_bundle": "/ca.pem", "stall_seconds": 30,
                    "headers": {"X-A": "b", "Authorization": "Bearer oci"}}
