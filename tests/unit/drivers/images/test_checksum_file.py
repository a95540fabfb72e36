"""An image checksum given as the URL of a checksum file (Ironic's and ironic-python-agent's
`image_checksum: http://.../image.qcow2.sha256sum`): which entry counts, how the file is read
(bounded), and the whole path from Ironic's node data to a verified image on a file target,
against the local HTTP server of test_image_sources."""

import hashlib
import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from provision_agent.data_drivers.ironic import IronicDriver
from provision_agent.drivers.images import checksum_file, write_step
from provision_agent.errors import EXIT_IMAGE_ERROR, ImageError
from provision_agent.plan import inventory as inv_mod
from provision_agent.plan import pipeline, render
from provision_agent.run.runner import Runner
from tests.unit.drivers.images import test_sources as test_image_sources
from tests.unit.helpers import inventory

http_server = test_image_sources.http_server     # the fixture, shared

IMAGE = b"\x00" * 510 + b"\x55\xaa" + bytes(range(256)) * 4096     # an MBR signature: a disk
SHA256 = hashlib.sha256(IMAGE).hexdigest()
OTHER = "b" * 64
URL = "http://h/images/disk.raw"


def pick(text, uri=URL, algo=None):
    return checksum_file.pick(text, uri, algo)


@pytest.mark.parametrize("text", [
    f"{SHA256}\n",                                          # the bare digest
    f"  {SHA256.upper()}  \n\n",
    f"{OTHER}  other.raw\n{SHA256}  disk.raw\n",           # sha256sum's text mode
    f"{SHA256} *disk.raw\n{OTHER} *other.raw\n",           # ... and its binary mode
    f"# made by the build\n{OTHER}  disk.raw.zst\r\n{SHA256}  disk.raw\r\n",
    f"SHA256 (other.raw) = {OTHER}\nSHA256 (disk.raw) = {SHA256}\n",   # BSD
])
def test_the_entry_for_the_image_urls_file_name_is_used(text):
    assert pick(text) == ("sha256", SHA256)


@pytest.mark.parametrize("text", [
    f"{OTHER}  x (disk.raw) = {OTHER}\n{SHA256}  disk.raw\n",     # BSD's form in a GNU name
    f"{OTHER}  disk.raw \n{SHA256}  disk.raw\n",                  # another name: a blank
    f"{OTHER}  disk.raw\t\n{SHA256}  disk.raw\n",
    f"{OTHER}   disk.raw\n{SHA256}  disk.raw\n",                  # ... a leading one
    f"{OTHER}  *disk.raw\n{SHA256}  disk.raw\n",                  # ... a '*' in text mode
    f"{OTHER} **disk.raw\n{SHA256} *disk.raw\n",
    f"{OTHER}  a\x85{OTHER}  disk.raw\n{SHA256}  disk.raw\n",     # no line break in a name
    f"{OTHER}  a\u2028{OTHER}  disk.raw\n{SHA256}  disk.raw\n",
    f"SHA256 (x) = {OTHER} (disk.raw) = {OTHER}\n{SHA256}  disk.raw\n",
    f"SHA256 (disk.raw) = {OTHER}  disk.raw\n{SHA256}  disk.raw\n",
    f"{OTHER} disk.raw\n{SHA256}  disk.raw\n",                    # neither form
    f"\\{OTHER}  disk\\\\.raw\n\\{SHA256}  disk.raw\n",   # coreutils' escaped names
])
def test_a_line_for_another_file_never_counts_for_the_image(text):
    assert pick(text) == ("sha256", SHA256)


@pytest.mark.parametrize("text", [
    f"{SHA256}  disk.raw\n{OTHER}  disk.raw\n",
    f"{SHA256}  disk.raw\n{SHA256} *disk.raw\n",
    f"SHA256 (disk.raw) = {SHA256}\n{OTHER}  disk.raw\n",
])
def test_two_entries_for_the_image_are_refused(text):
    with pytest.raises(ImageError, match="has 2 entries for 'disk.raw'.*not clear"):
        pick(text)


def test_a_bsd_line_names_its_own_algorithm():
    assert pick(f"SHA512 (disk.raw) = {'d' * 128}\n# x\n") == ("sha512", "d" * 128)
    with pytest.raises(ImageError, match="64 hex digits, not the 32 of a md5"):
        pick(f"MD5 (disk.raw) = {SHA256}\n# x\n")
    with pytest.raises(ImageError, match="'SHA1' digest; only MD5, SHA256, SHA512"):
        pick(f"SHA1 (disk.raw) = {'a' * 40}\n# x\n")
    with pytest.raises(ImageError, match="a SHA256 digest, not the sha512 given"):
        pick(f"SHA256 (disk.raw) = {SHA256}\n# x\n", algo="sha512")


_NAME = st.text(st.characters(blacklist_characters="\n\r", blacklist_categories=("Cs",)),
                min_size=1, max_size=30).filter(lambda n: n.strip() and not n.endswith(" "))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_NAME, st.tuples(st.sampled_from(["text", "binary", "bsd"]),
                                        st.binary(min_size=32, max_size=32)),
                       min_size=2, max_size=8),
       _NAME, st.randoms(use_true_random=False))
def test_each_name_gets_its_own_digest_and_no_other(entries, stranger, rnd):
    """sha256sum's and BSD's lines for any names (blanks, '*', ' (x) = ', \\x85 in them): each
    name finds exactly its own line's digest; a name not listed finds none."""
    lines = []
    for name, (form, digest) in entries.items():
        hexed = digest.hex()
        lines.append({"text": f"{hexed}  {name}", "binary": f"{hexed} *{name}",
                      "bsd": f"SHA256 ({name}) = {hexed}"}[form])
    rnd.shuffle(lines)
    text = "\n".join(lines) + "\n"
    for name, (_, digest) in entries.items():
        assert checksum_file.find(text, name) == ("sha256", digest.hex())
    if stranger not in entries:
        with pytest.raises(ImageError, match="has no entry for"):
            checksum_file.find(text, stranger)


@pytest.mark.parametrize("digest,algo", [("a" * 32, "md5"), ("c" * 64, "sha256"),
                                         ("d" * 128, "sha512")])
def test_the_algorithm_follows_from_the_digests_length(digest, algo):
    assert pick(f"{digest}  disk.raw\n") == (algo, digest)


def test_a_given_algorithm_must_fit_the_digest():
    assert pick(f"{SHA256}  disk.raw\n", algo="sha256") == ("sha256", SHA256)
    with pytest.raises(ImageError, match="64 hex digits, not the 128 of a sha512 digest"):
        pick(f"{SHA256}  disk.raw\n", algo="sha512")


@pytest.mark.parametrize("text,message", [
    ("", "is empty"),
    ("\n \n", "is empty"),
    (f"{OTHER}  other.raw\n{SHA256}  ./disk.raw\n",
     "no entry for 'disk.raw', the image URL's file name (it lists 'other.raw', './disk.raw')"),
    (f"{SHA256}  disk.raw.zst\n", "no entry for 'disk.raw'"),
    ("".join(f"{OTHER}  f{i}\n" for i in range(9)), "'f4' and 4 more"),
    ("not-a-digest\n", "not hexadecimal"),
    ("abc\n", "a digest of 3 hex digits is not md5"),
])
def test_a_file_without_a_usable_entry_is_an_image_error(text, message):
    with pytest.raises(ImageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        pick(text)


def test_the_file_is_read_from_http_with_several_entries(http_server):
    http_server.files["images/disk.raw.sha256sum"] = (
        f"{OTHER}  disk.qcow2\n{SHA256}  disk.raw\n{OTHER}  disk.iso\n").encode()
    got = checksum_file.resolve(http_server.url + "images/disk.raw.sha256sum",
                                http_server.url + "images/disk.raw")
    assert got == f"sha256:{SHA256}"


@pytest.mark.parametrize("rule,message", [
    ({"status": 404}, r"HTTP 404 Not Found, expected 200"),
    ({"status": 302, "location": "/loop.sha256sum"}, "more than 5 redirects"),
])
def test_an_unreadable_file_fails_before_anything_is_written(http_server, rule, message):
    http_server.rules["loop.sha256sum"] = rule
    with pytest.raises(ImageError, match=message) as exc:
        checksum_file.resolve(http_server.url + "loop.sha256sum", URL)
    assert exc.value.exit_code == EXIT_IMAGE_ERROR
    if rule["status"] == 302:
        assert len(http_server.requests) == 6      # the first request and 5 redirects


def test_an_oversized_file_is_cut_at_its_limit(http_server, monkeypatch):
    monkeypatch.setattr(checksum_file, "MAX_BYTES", 1000)
    http_server.files["big"] = b"0" * 5000
    with pytest.raises(ImageError, match="larger than 1000 bytes; that is not a checksum file"):
        checksum_file.resolve(http_server.url + "big", URL)


def test_a_dripping_server_is_cut_at_the_deadline(http_server):
    """A byte every 50 ms never trips a read timeout; the deadline still ends it."""
    http_server.files["drip.sha256sum"] = f"{SHA256}  disk.raw\n".encode() * 100
    http_server.rules["drip.sha256sum"] = {"drip": 0.05}
    start = time.monotonic()
    with pytest.raises(ImageError, match="not read whole when its time ran out .the answer "
                                         "took longer than 2.0 s"):
        checksum_file.resolve(http_server.url + "drip.sha256sum", URL, deadline=2)
    assert time.monotonic() - start < 4


def test_an_unreachable_server_is_tried_within_the_deadline():
    with pytest.raises(ImageError, match="cannot be read .connection refused; gave up after 3 s"):
        checksum_file.resolve("http://127.0.0.1:9/x.sha256sum", URL, deadline=3)


def _ironic(http_server, **info):
    base = {"image_source": http_server.url + "images/disk.raw", "image_disk_format": "raw"}
    base.update(info)
    return {"node_uuid": "u", "instance_info": base,
            "properties": {"root_device": {"serial": "disk1"}}, "boot_mode": "bios"}


def _image_step(doc):
    """The plan of Ironic's node data and its one write_image step."""
    planned = pipeline.build_plan(IronicDriver(doc).layout(),
                                  inv_mod.from_document(inventory("three-disks")))
    (step,) = [s for s in planned.steps if s.kind == "write_image"]
    return planned, step


def test_ironic_image_checksum_url_becomes_the_steps_checksum_file(http_server):
    url = http_server.url + "images/disk.raw.sha256sum"
    planned, step = _image_step(_ironic(http_server, image_checksum=url))
    assert step.args["checksum_url"] == url and step.args["checksum"] is None
    assert "checksum_algo" not in step.args
    shown = json.loads(render.plan_json(planned))["steps"][planned.steps.index(step)]["args"]
    assert shown["checksum_url"] == url
    # image_os_hash_algo names the algorithm of a digest read from a URL (Ironic's rule)
    _, step = _image_step(_ironic(http_server, image_checksum=url, image_os_hash_algo="sha512"))
    assert step.args["checksum_algo"] == "sha512"
    _, step = _image_step(_ironic(http_server, image_os_hash_algo="sha256",
                                  image_os_hash_value=url))
    assert (step.args["checksum_url"], step.args["checksum_algo"]) == (url, "sha256")


def test_an_ironic_deploy_with_a_checksum_url_writes_the_verified_image(http_server, tmp_path):
    """The step the plan made for Ironic's node data, run on a file target."""
    http_server.files["images/disk.raw"] = IMAGE
    http_server.files["images/SHA256SUMS"] = (
        f"# images of this build\n{OTHER}  disk.qcow2\n{SHA256}  disk.raw\n"
        f"{OTHER}  disk.raw.zst\n").encode()
    _, step = _image_step(_ironic(http_server,
                                  image_checksum=http_server.url + "images/SHA256SUMS"))
    target = tmp_path / "disk"
    result = write_step.write_image(dict(step.args, device=str(target)), runner=Runner(),
                                events=None, target_root=str(tmp_path), options={})
    assert result["checksum"] == f"sha256:{SHA256}"
    assert target.read_bytes() == IMAGE
    assert [path for path, _ in http_server.requests] == ["/images/SHA256SUMS",
                                                          "/images/disk.raw"]


def test_a_checksum_file_without_the_images_entry_leaves_the_target_alone(http_server,
                                                                         tmp_path):
    http_server.files["images/disk.raw"] = IMAGE
    http_server.files["images/SHA256SUMS"] = f"{SHA256}  disk.qcow2\n".encode()
    _, step = _image_step(_ironic(http_server,
                                  image_checksum=http_server.url + "images/SHA256SUMS"))
    target = tmp_path / "disk"
    with pytest.raises(ImageError, match="has no entry for 'disk.raw'") as exc:
        write_step.write_image(dict(step.args, device=str(target)), runner=Runner(), events=None,
                           target_root=str(tmp_path), options={})
    assert exc.value.exit_code == EXIT_IMAGE_ERROR
    assert not target.exists()
    assert [path for path, _ in http_server.requests] == ["/images/SHA256SUMS"]


def test_a_wrong_digest_in_the_file_fails_the_image(http_server, tmp_path):
    http_server.files["images/disk.raw"] = IMAGE
    http_server.files["images/disk.raw.sha256sum"] = f"{OTHER}  disk.raw\n".encode()
    args = {"device": str(tmp_path / "disk"), "mount_point": None,
            "uri": http_server.url + "images/disk.raw", "format": "disk",
            "checksum_url": http_server.url + "images/disk.raw.sha256sum"}
    with pytest.raises(ImageError, match=f"checksum mismatch: expected {OTHER}"):
        write_step.write_image(args, runner=Runner(), events=None, target_root=str(tmp_path),
                           options={})
