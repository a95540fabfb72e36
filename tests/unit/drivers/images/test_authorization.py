"""An image's own Authorization header (Ironic's image_request_authorization_secret, made from
an OCI pull secret): it reaches the image's download and nothing else, and provision shows it
nowhere (plans, logs, events, errors). The local HTTP server of test_image_sources plays the
registry; tests/ironic/integration/test_oci.py has the real one."""

import io
import json
import logging

import pytest

from provision_agent import redact
from provision_agent.data_drivers.ironic import IronicDriver
from provision_agent.drivers.images import write_step
from provision_agent.errors import EXIT_IMAGE_ERROR, ImageError, InputError
from provision_agent.plan import inventory as inv_mod
from provision_agent.plan import pipeline, render
from provision_agent.run.events import Events
from provision_agent.run.runner import Runner
from tests.unit.drivers.images import test_sources as test_image_sources
from tests.unit.drivers.images.test_checksum_file import IMAGE, SHA256
from tests.unit.helpers import inventory, run_cli

http_server = test_image_sources.http_server     # the fixture, shared

SECRET = "Basic YWxpY2U6czNjcmV0LXB3"           # base64 of alice:s3cret-pw


def _doc(url, **info):
    base = {"image_source": "oci://registry.example/images/disk:v1", "image_url": url,
            "image_checksum": SHA256, "image_disk_format": "raw",
            "image_request_authorization_secret": SECRET}
    base.update(info)
    return {"node_uuid": "u", "instance_info": base,
            "properties": {"root_device": {"serial": "disk1"}}, "boot_mode": "bios"}


def _plan(doc):
    return pipeline.build_plan(IronicDriver(doc).layout(),
                               inv_mod.from_document(inventory("three-disks")))


def _step(planned):
    (step,) = [s for s in planned.steps if s.kind == "write_image"]
    return step


def test_the_authorization_goes_into_the_image_step_and_no_printed_plan(tmp_path):
    planned = _plan(_doc("http://registry.example/v2/images/disk/blobs/sha256:" + SHA256))
    step = _step(planned)
    assert step.args["authorization"] == SECRET
    assert step.args["checksum"] == f"sha256:{SHA256}"
    shown = render.plan_json(planned) + render.plan_text(planned) + repr(planned.resolved)
    assert SECRET.split()[1] not in shown
    assert json.loads(render.plan_json(planned))["steps"][planned.steps.index(step)]["args"][
        "authorization"] == redact.MARK
    rc, out, err = run_cli(tmp_path, _doc("http://r.example/v2/x/blobs/sha256:" + SHA256),
                           extra=["--data_driver", "ironic", "--plan_format", "json"])
    assert rc == 0, err
    assert SECRET.split()[1] not in out + err


@pytest.mark.parametrize("bad", ["Basic abc\r\nX-Injected: 1", " Basic abc", "Basic é"])
def test_a_header_value_that_is_no_header_value_is_refused_unechoed(bad):
    with pytest.raises(InputError) as exc:
        IronicDriver(_doc("http://h/x.raw", image_request_authorization_secret=bad)).layout()
    text = str(exc.value)
    assert "instance_info.image_request_authorization_secret: is not an HTTP header" in text
    assert "abc" not in text, text
    # the native field, however short the value, is never echoed either
    native = {"version": 1, "disks": [{"id": "d", "match": {"serial": "disk1"}}],
              "images": [{"uri": "http://h/x.raw", "format": "disk", "target": "d",
                          "checksum": f"sha256:{SHA256}", "authorization": bad}]}
    with pytest.raises(InputError) as exc:
        pipeline.load_layout(native, "native")
    assert "$.images[0].authorization: this value is not valid here" in str(exc.value)
    assert "abc" not in str(exc.value)


def test_the_image_download_sends_it_and_the_checksum_file_does_not(http_server, tmp_path):
    http_server.files["v2/blob"] = IMAGE
    http_server.rules["v2/blob"] = {"auth": SECRET}
    http_server.files["sums"] = f"{SHA256}  blob\n".encode()
    step = _step(_plan(_doc(http_server.url + "v2/blob", image_checksum=None,
                            image_os_hash_algo="sha256",
                            image_os_hash_value=http_server.url + "sums")))
    target = tmp_path / "disk"
    write_step.write_image(dict(step.args, device=str(target)), runner=Runner(), events=None,
                       target_root=str(tmp_path), options={})
    assert target.read_bytes() == IMAGE
    sent = {path: headers.get("Authorization") for path, headers in http_server.requests}
    assert sent == {"/sums": None, "/v2/blob": SECRET}


def test_a_redirect_to_another_host_does_not_carry_it(http_server, tmp_path):
    """A registry may send blob downloads to a CDN: the credential stays with the registry
    (requests drops it when the host changes; 127.0.0.1 and localhost are two hosts)."""
    http_server.files["cdn/blob"] = IMAGE
    http_server.rules["v2/blob"] = {"status": 307, "location": http_server.url.replace(
        "127.0.0.1", "localhost") + "cdn/blob"}
    step = _step(_plan(_doc(http_server.url + "v2/blob")))
    write_step.write_image(dict(step.args, device=str(tmp_path / "disk")), runner=Runner(),
                       events=None, target_root=str(tmp_path), options={})
    sent = [(path, headers.get("Authorization")) for path, headers in http_server.requests]
    assert sent == [("/v2/blob", SECRET), ("/cdn/blob", None)]


def refused_download(args, tmp_path, caplog, options=None):
    """Runs an image step whose Authorization the server refuses: exit 5, saying so. Returns
    all it showed (the error, the events with the run's result, the log) to look for
    secrets in; tests/ironic/integration/test_oci.py does the same against the real registry
    (options: its CA, --image_ca_bundle)."""
    stream = io.StringIO()
    events = Events([stream])
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ImageError) as exc:
        write_step.write_image(dict(args, device=str(tmp_path / "disk")), runner=Runner(),
                           events=events, target_root=str(tmp_path), options=options or {})
    assert exc.value.exit_code == EXIT_IMAGE_ERROR
    assert "HTTP 401 Unauthorized, expected 200 (the server refused the image's " \
           "Authorization header)" in str(exc.value)
    assert not (tmp_path / "disk").exists() or (tmp_path / "disk").stat().st_size == 0
    events.result("failed", exc.value.exit_code, str(exc.value))
    return "\n".join((str(exc.value), stream.getvalue(), caplog.text))


def test_a_refused_authorization_is_exit_5_and_shows_no_secret(http_server, tmp_path, caplog):
    http_server.files["v2/blob"] = IMAGE
    http_server.rules["v2/blob"] = {"auth": "Basic b3RoZXI6cGFzcw=="}
    step = _step(_plan(_doc(http_server.url + "v2/blob")))
    assert SECRET.split()[1] not in refused_download(step.args, tmp_path, caplog)
