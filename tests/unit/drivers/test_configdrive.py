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
