"""qcow2 images onto loop devices (root) through the writer, with the real qemu-img: one
whose backing file is a host file and one whose external data file is,
both holding a marker, are refused with exit 5 and the device never holds the marker; a
clean qcow2 still converts and reads back with its checksum."""

import hashlib
import subprocess

import pytest

from provision_agent.drivers.images import writer
from provision_agent.errors import ImageError
from provision_agent.run.runner import Runner
from tests.functional.prereq import require

pytestmark = require("losetup", "qemu-img", "prlimit")

MARKER = b"HOST-FILE-MARKER/etc/ssh/ssh_host_ed25519_key."
SIZE = 8 << 20


def _qemu_img(*args):
    subprocess.run(["qemu-img", *args], check=True, capture_output=True)


def _device_bytes(dev):
    with open(dev, "rb") as f:
        return f.read(SIZE)


@pytest.fixture
def host_file(tmp_path):
    path = tmp_path / "host-file"
    path.write_bytes((MARKER * (SIZE // len(MARKER) + 1))[:SIZE])
    return path


def _backed(tmp_path, host_file):
    image = tmp_path / "backed.qcow2"
    _qemu_img("create", "-q", "-f", "qcow2", "-b", str(host_file), "-F", "raw", str(image),
              str(SIZE))
    return image


def _data_file(tmp_path, host_file):
    image, data = tmp_path / "data-file.qcow2", tmp_path / "data.raw"
    _qemu_img("create", "-q", "-f", "qcow2", "-o", f"data_file={data},data_file_raw=on",
              str(image), str(SIZE))
    data.write_bytes(host_file.read_bytes())        # after create, which makes it empty
    return image


@pytest.mark.parametrize("make,says", [(_backed, "names a backing file"),
                                       (_data_file, "external data file")])
def test_a_qcow2_that_reads_a_host_file_never_reaches_the_device(tmp_path, loop, host_file,
                                                                  make, says):
    image = make(tmp_path, host_file)
    raw = tmp_path / "check.raw"      # what the old conversion wrote: the marker, proven here
    _qemu_img("convert", "-f", "qcow2", "-O", "raw", str(image), str(raw))
    assert MARKER in raw.read_bytes()
    dev = loop(SIZE)
    checksum = "sha256:" + hashlib.sha256(image.read_bytes()).hexdigest()
    with pytest.raises(ImageError) as exc:
        writer.write_to(str(image), dev, fmt="qcow2", checksum=checksum, runner=Runner())
    assert exc.value.exit_code == 5 and says in str(exc.value), exc.value
    assert MARKER not in _device_bytes(dev)


def test_a_clean_qcow2_converts_onto_the_device(tmp_path, loop, host_file):
    image = tmp_path / "clean.qcow2"
    _qemu_img("convert", "-f", "raw", "-O", "qcow2", str(host_file), str(image))
    dev = loop(SIZE)
    checksum = "sha256:" + hashlib.sha256(image.read_bytes()).hexdigest()
    writer.write_to(str(image), dev, fmt="qcow2", checksum=checksum, runner=Runner())
    assert hashlib.sha256(_device_bytes(dev)).digest() == \
        hashlib.sha256(host_file.read_bytes()).digest()
