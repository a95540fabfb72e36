"""A qcow2 that names a backing file or an external data file is refused before anything is
converted: qemu-img convert copies those files' bytes into the target.
qemu-img runs for real where the case needs it; tests/functional/test_qcow2_inspection.py
does the same onto loop devices."""

import json
import subprocess

import pytest

from provision_agent.drivers.images import formats, qcow2, writer
from provision_agent.errors import ImageError
from provision_agent.run.runner import Runner
from tests.unit.drivers.images.test_parts import need
from tests.unit.fakes import FakeRunner

MARKER = b"RAMDISK-SECRET-MARKER."


def _qemu_img(*args):
    subprocess.run(["qemu-img", *args], check=True, capture_output=True)


@pytest.fixture
def images(tmp_path):
    """{name: path}: a host file holding the marker, a qcow2 backed by it, one whose external
    data file it is, and a clean one."""
    need("qemu-img")
    secret = tmp_path / "host-file"
    secret.write_bytes((MARKER * 3000)[:1 << 16] + bytes(1 << 20))
    made = {"secret": secret, "backed": tmp_path / "backed.qcow2",
            "data_file": tmp_path / "data-file.qcow2", "clean": tmp_path / "clean.qcow2"}
    _qemu_img("create", "-q", "-f", "qcow2", "-b", str(secret), "-F", "raw",
              str(made["backed"]), "1M")
    _qemu_img("create", "-q", "-f", "qcow2", "-o",
              f"data_file={tmp_path / 'data.raw'},data_file_raw=on", str(made["data_file"]), "1M")
    (tmp_path / "data.raw").write_bytes(secret.read_bytes())
    _qemu_img("convert", "-f", "raw", "-O", "qcow2", str(secret), str(made["clean"]))
    return made


@pytest.mark.parametrize("name,says", [("backed", "names a backing file"),
                                       ("data_file", "external data file")])
def test_a_qcow2_reading_another_file_is_refused_with_exit_5(tmp_path, images, name, says):
    target = tmp_path / "target"
    with pytest.raises(ImageError) as exc:
        writer.write_to(str(images[name]), str(target), fmt="qcow2", allow_no_checksum=True,
                        runner=Runner())
    assert exc.value.exit_code == 5 and says in str(exc.value)
    assert not target.exists() or MARKER not in target.read_bytes()


def test_a_clean_qcow2_still_converts(tmp_path, images):
    target = tmp_path / "target"
    writer.write_to(str(images["clean"]), str(target), fmt="qcow2", allow_no_checksum=True,
                    runner=Runner())
    assert target.read_bytes() == images["secret"].read_bytes()


def _info_says(**fields):
    found = {"format": "qcow2", "format-specific": {"type": "qcow2", "data": {}}, **fields}
    return FakeRunner({"prlimit": json.dumps(found)})


@pytest.mark.parametrize("fields,says", [
    ({"backing-filename": "/etc/ssh/ssh_host_ed25519_key"},
     "backing file '/etc/ssh/ssh_host_ed25519_key'"),
    ({"full-backing-filename": "json:{" + "x" * 100_000}, "backing file 'json:{xxx"),
    ({"format-specific": {"type": "qcow2", "data": {"data-file": "/dev/sda"}}},
     "external data file '/dev/sda'"),
    ({"format": "vmdk"}, "declared qcow2 but qemu-img reads it as 'vmdk'"),
])
def test_what_qemu_img_info_reports_is_refused_before_any_conversion(images, fields, says):
    """The header of these is clean: the second check, qemu-img's own view, stops them."""
    runner = _info_says(**fields)
    with pytest.raises(ImageError) as exc:
        formats.convert_qcow2(runner, str(images["clean"]), "/dev/null")
    assert says in str(exc.value) and len(str(exc.value)) < 250
    assert [c for c in runner.calls if "convert" in c] == []


def test_qemu_img_is_told_the_format_and_bounded_and_never_opens_a_backing_file(images):
    runner = _info_says()
    path = str(images["clean"])
    formats.convert_qcow2(runner, path, "/dev/null")
    info, convert = runner.calls
    assert info == ["prlimit", "--as=1073741824", "--cpu=30", "qemu-img", "info", "-f", "qcow2",
                    "--output=json", path]
    assert convert[:6] == ["qemu-img", "convert", "-f", "qcow2", "-O", "raw"]
    assert json.loads(convert[6].removeprefix("json:")) == {
        "driver": "qcow2", "backing": None, "file": {"driver": "file", "filename": path}}


def test_the_conversion_itself_does_not_read_a_backing_file(tmp_path, images):
    """The third guard alone: qemu-img convert given the image as source_name() names it."""
    out = tmp_path / "out.raw"
    _qemu_img("convert", "-f", "qcow2", "-O", "raw", qcow2.source_name(str(images["backed"])),
              str(out))
    assert out.stat().st_size == 1 << 20 and MARKER not in out.read_bytes()


def _patched(path, offset, value):
    data = bytearray(path.read_bytes())
    data[offset:offset + len(value)] = value
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("offset,value,says", [
    (4, b"\0\0\0\x04", "qcow2 version 4 is not read"),
    (32, b"\0\0\0\x01", "encrypted"),
    (72, b"\0\0\0\0\0\0\0\x20", "incompatible features 0x20"),
])
def test_headers_it_does_not_know_to_be_safe_are_refused(images, offset, value, says):
    _patched(images["clean"], offset, value)
    runner = FakeRunner()
    with pytest.raises(ImageError, match=says):
        formats.convert_qcow2(runner, str(images["clean"]), "/dev/null")
    assert runner.calls == []
