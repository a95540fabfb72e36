"""Write a configdrive (config-2 ISO or NoCloud vfat) to its partition.

Input forms: Ironic's gzip+base64 ISO (or an http(s) URL serving it), or JSON parts
(meta_data, user_data, network_data) that are built here into config-2 (genisoimage/xorriso)
or NoCloud (mkfs.vfat -n cidata + mcopy).
"""

import json
import os
import shutil
import tempfile

from provision_agent import bounded_http, redact
from provision_agent.drivers import blockinfo
from provision_agent.errors import ImageError, InputError
from provision_agent.plan.configdrive_format import (
    CONFIG2_LABEL,
    FETCH_SECONDS,
    MAX_TEXT,
    NOCLOUD_LABEL,
    decode_ironic,
    iso_label,
)

ISO_BLOCK = 2048        # ISO 9660's block: the largest logical sector it mounts on
FAT_SECTOR = 512        # mkfs.vfat's sector in a file


def fetch(url, timeout=60, options=None):
    """The configdrive text an Ironic URL serves, with the image download's TLS options."""
    import requests  # only a configdrive given by URL pays its start-up
    options = options or {}
    verify = False if options.get("image_insecure") else (options.get("image_ca_bundle") or True)
    try:
        with requests.get(url, timeout=timeout, verify=verify, stream=True,
                          headers=bounded_http.NO_ENCODING, hooks=bounded_http.hooks()) as resp:
            resp.raise_for_status()
            text = bounded_http.read(resp, MAX_TEXT, FETCH_SECONDS)
    except requests.RequestException as exc:
        raise ImageError(f"cannot fetch configdrive {redact.url(url)}: "
                         f"{type(exc).__name__}: {redact.text(str(exc))}") from None
    except bounded_http.BodyError as exc:
        raise ImageError(f"configdrive at {redact.url(url)}: {exc}") from None
    try:
        return text.decode("ascii").strip()
    except UnicodeDecodeError:
        raise ImageError(f"configdrive at {redact.url(url)} is not base64 text") from None


def _tree_config2(top, meta_data, user_data, network_data):
    d = os.path.join(top, "openstack", "latest")
    os.makedirs(d)
    _write(os.path.join(d, "meta_data.json"), json.dumps(meta_data or {}))
    if user_data is not None:
        _write(os.path.join(d, "user_data"), user_data)
    if network_data is not None:
        _write(os.path.join(d, "network_data.json"), json.dumps(network_data))


def _write(path, data):
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(path, mode) as f:
        f.write(data if isinstance(data, (str, bytes)) else json.dumps(data))


def build_config2(runner, meta_data, user_data, network_data, out):
    with tempfile.TemporaryDirectory() as top:
        _tree_config2(top, meta_data, user_data, network_data)
        tool = shutil.which("genisoimage") or shutil.which("xorrisofs")
        if not tool:
            raise ImageError("neither genisoimage nor xorrisofs is installed")
        runner.run([tool, "-o", out, "-ldots", "-allow-lowercase", "-allow-multidot", "-l",
                    "-quiet", "-J", "-r", "-V", CONFIG2_LABEL, top])


def build_nocloud(runner, meta_data, user_data, network_data, out, size=8 << 20):
    with open(out, "wb") as f:
        f.truncate(size)
    runner.run(["mkfs.vfat", "-n", NOCLOUD_LABEL, out])
    with tempfile.TemporaryDirectory() as top:
        files = {"meta-data": json.dumps(meta_data or {}),
                 "user-data": user_data if user_data is not None else "#cloud-config\n{}\n"}
        if network_data is not None:
            files["network-config"] = json.dumps(network_data)
        for name, data in files.items():
            p = os.path.join(top, name)
            _write(p, data)
            runner.run(["mcopy", "-i", out, p, f"::/{name}"])


def device_size(path):
    with open(path, "rb") as f:
        return f.seek(0, os.SEEK_END)


def write(runner, args, options=None):
    """The configdrive step: build or decode the drive, check label and size, dd it.
    options: the image download options (TLS) for a configdrive given as a URL."""
    device, fmt = args["device"], args.get("format") or "config-2"
    content = args.get("content")
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "configdrive.img")
        if content:
            if content.startswith(("http://", "https://")):
                content = fetch(content, options=options)
            data = decode_ironic(content)
            if iso_label(data) != CONFIG2_LABEL:
                raise ImageError(f"configdrive ISO label is {iso_label(data)!r}, not config-2")
            _write(out, data)
        elif fmt == "config-2":
            build_config2(runner, args.get("meta_data"), args.get("user_data"),
                          args.get("network_data"), out)
        elif fmt == "nocloud":
            build_nocloud(runner, args.get("meta_data"), args.get("user_data"),
                          args.get("network_data"), out)
        else:
            raise InputError([f"unknown configdrive format {fmt!r}"])
        sector = int(blockinfo.queue_value(device, "logical_block_size") or 512)
        if sector > (FAT_SECTOR if fmt == "nocloud" and not content else ISO_BLOCK):
            return _on_large_sectors(runner, out, device, work, fmt if not content
                                     else "config-2")
        need, have = os.path.getsize(out), device_size(device)
        if need > have:
            raise ImageError(f"configdrive is {need} bytes, {device} holds only {have}")
        runner.run(["dd", f"if={out}", f"of={device}", "bs=1M", "conv=fsync,notrunc"])
        return need


def _on_large_sectors(runner, image, device, work, fmt):
    """Linux mounts no filesystem whose blocks are smaller than the device's logical sectors:
    an ISO 9660 (2048-byte blocks) or a vfat built in a file (512-byte sectors) written to a
    4Kn partition is found by its label but cannot be read, and cloud-init gets nothing. So
    the drive's files go into a vfat made on the partition itself, in its own sectors, with
    the same label (cloud-init and glean read a config-2 drive from vfat as from ISO 9660).
    Returns the bytes of files written."""
    tree = os.path.join(work, "tree")
    if fmt == "config-2":
        runner.run(["xorriso", "-osirrox", "on", "-indev", image, "-extract", "/", tree])
    else:
        runner.run(["mcopy", "-s", "-i", image, "::*", tree + "/"])
    label = CONFIG2_LABEL if fmt == "config-2" else NOCLOUD_LABEL
    runner.run(["mkfs.vfat", "-n", label, device])
    mnt = os.path.join(work, "mnt")
    os.makedirs(mnt)
    runner.run(["mount", "-t", "vfat", device, mnt])
    try:
        runner.run(["cp", "-r", tree + "/.", mnt])
    finally:
        runner.run(["umount", mnt])
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(tree)
               for f in files)
