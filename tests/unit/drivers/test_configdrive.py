import base64
import gzip

import pytest

from provision_agent.drivers import configdrive
from provision_agent.errors import ImageError
from provision_agent.plan import configdrive_format


def _iso(label):
    data = bytearray(32768 + 2048)
    data[32768:32768 + 6] = b"\x01CD001"
    data[32768 + 40:32768 + 72] = label.encode().ljust(32)
    return bytes(data)


def test_decode_gzip_and_plain():
    iso = _iso("config-2")
    assert configdrive_format.decode_ironic(base64.b64encode(gzip.compress(iso)).decode()) == iso
    assert configdrive_format.decode_ironic(base64.b64encode(iso).decode()) == iso
    assert configdrive_format.iso_label(iso) == "config-2"
    assert configdrive_format.iso_label(b"\0" * 40000) is None


def test_wrong_label_and_too_big_are_refused(tmp_path):
    dev = tmp_path / "dev"
    dev.write_bytes(b"\0" * 1024)
    content = base64.b64encode(gzip.compress(_iso("other"))).decode()
    with pytest.raises(ImageError, match="label"):
        configdrive.write(None, {"device": str(dev), "content": content})
    content = base64.b64encode(gzip.compress(_iso("config-2"))).decode()
    with pytest.raises(ImageError, match="holds only 1024"):
        configdrive.write(None, {"device": str(dev), "content": content})


@pytest.mark.parametrize("args", [
    {"format": "config-2", "meta_data": {"uuid": "u"}},
    {"content": base64.b64encode(gzip.compress(_iso("config-2"))).decode()},
])
def test_on_a_4kn_partition_the_drive_is_a_vfat_made_there(tmp_path, monkeypatch, args):
    """An ISO 9660 (2048-byte blocks) dd'd to a partition of 4096-byte sectors is found by its
    label, but Linux cannot mount it: the booted system's cloud-init got nothing (the VM's 4Kn
    boot said keys=none). Its files go into a vfat made on the partition, labelled config-2."""
    from tests.unit.fakes import FakeRunner
    monkeypatch.setattr(configdrive.blockinfo, "queue_value",
                        lambda dev, name: "4096" if name == "logical_block_size" else None)
    r = FakeRunner()
    configdrive.write(r, {"device": "/dev/vda3", **args})
    writes = r.writes()
    assert not any(w.startswith("dd ") for w in writes), writes
    assert writes[0] == "mkfs.vfat -n config-2 /dev/vda3"
    assert writes[1].startswith("mount -t vfat /dev/vda3 ") and writes[2].startswith("umount ")
    assert any(line.startswith("xorriso -osirrox on -indev ") for line in r.lines())
    assert any(line.startswith("cp -r ") for line in r.lines())


def test_on_a_512e_partition_the_iso_is_written_as_it_is(monkeypatch):
    from tests.unit.fakes import FakeRunner
    monkeypatch.setattr(configdrive.blockinfo, "queue_value", lambda dev, name: "512")
    monkeypatch.setattr(configdrive, "device_size", lambda dev: 64 << 20)
    r = FakeRunner()
    content = base64.b64encode(gzip.compress(_iso("config-2"))).decode()
    configdrive.write(r, {"device": "/dev/vda3", "content": content})
    assert [w.split()[0] for w in r.writes()] == ["dd"]
