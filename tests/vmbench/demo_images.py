"""What a sample downloads from the bench's image host, and how the demo serves it.

The samples name their images as a lab would serve them, at http://10.0.2.2:8080/NAME (the host
as qemu's user network shows it to the guest). The demo serves the bootable test OS under each
NAME in the shape the name asks for, and, because that OS is built here and its bytes are not
the ones a sample was written against, puts the served files' checksums in place of the
sample's (saying which). Everything here but serve() runs with a bare python3, before installs.
"""

import hashlib
import re

IMAGE_HOST = "http://10.0.2.2:8080/"
IMAGE_PORT = 8080

# name suffix -> the test-OS shape served under it (functions of tests/vmbench/testos.py)
SHAPES = ((".ext4.zst", "ext4_zst", "zstd ext4 root image"),
          (".crypt.tar.zst", "crypt_tar_zst",
           "zstd tar of the root filesystem, with cryptsetup and clevis for encrypted layouts"),
          (".secureboot.tar.zst", "secureboot_tar_zst",
           "zstd tar of the root filesystem, with shim and the signed grub for Secure Boot"),
          (".tar.zst", "tar_zst", "zstd tar of the root filesystem"),
          (".ext4.gz", "ext4_gz", "gzip ext4 root image"),
          (".img.gz", "ext4_gz", "gzip ext4 root image"),
          (".qcow2", "disk_qcow2", "qcow2 whole-disk image (GPT, ext4 root)"),
          ("vmlinuz", "kernel", "kernel"),
          ("initrd.img", "initrd", "initrd"))

_HEX_ALGO = {32: "md5", 64: "sha256", 128: "sha512"}


def shape(name):
    """(testos function name, description) for a served name, or None."""
    for suffix, func, what in SHAPES:
        if name.endswith(suffix):
            return func, what
    return None


def _strings(node, path=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(value, path + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _strings(value, path + (i,))
    elif isinstance(node, str):
        yield path, node


def wanted(document):
    """{name: [where in the document]} for every URL on the image host."""
    names = {}
    for path, text in _strings(document):
        if text.startswith(IMAGE_HOST):
            names.setdefault(text[len(IMAGE_HOST):], []).append(".".join(map(str, path)))
    return names


def problems(document):
    """Why the demo cannot serve what the document asks for ([] when it can)."""
    out = []
    for name, where in wanted(document).items():
        if not re.fullmatch(r"[A-Za-z0-9._-]+", name):
            out.append(f"{where[0]}: {IMAGE_HOST}{name} is not a plain file name the demo serves")
        elif shape(name) is None:
            known = ", ".join(s for s, _, _ in SHAPES)
            out.append(f"{where[0]}: the demo has no test image for {name!r} "
                       f"(it serves names ending {known})")
    return out


def _digest(path, algo):
    h = hashlib.new(algo)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fill_checksums(document, files):
    """Put the served files' checksums where the document carries one for a served image:
    Ironic's instance_info (image_checksum, image_os_hash_value) and the native schema's
    images[].checksum ("algo:hex", of the bytes as downloaded). Returns the notes to print."""
    notes = []

    def served(url):
        return files.get(url[len(IMAGE_HOST):]) if isinstance(url, str) \
            and url.startswith(IMAGE_HOST) else None

    info = document.get("instance_info") if isinstance(document, dict) else None
    if isinstance(info, dict) and served(info.get("image_source")):
        path = served(info["image_source"])
        if info.get("image_os_hash_value"):
            algo = info.get("image_os_hash_algo", "sha512")
            info["image_os_hash_value"] = _digest(path, algo)
            notes.append(f"instance_info.image_os_hash_value: {algo} of {path.name}")
        if info.get("image_checksum"):
            algo = _HEX_ALGO.get(len(info["image_checksum"]), "md5")
            info["image_checksum"] = _digest(path, algo)
            notes.append(f"instance_info.image_checksum: {algo} of {path.name}")
    images = document.get("images") if isinstance(document, dict) else None
    for i, image in enumerate(images if isinstance(images, list) else []):
        if isinstance(image, dict) and served(image.get("uri")) and image.get("checksum"):
            if image.get("checksum_of", "compressed") != "compressed":
                raise ValueError(f"images.{i}: the demo fills in checksums of the bytes as "
                                 "served only (checksum_of: compressed)")
            algo = image["checksum"].partition(":")[0]
            image["checksum"] = f"{algo}:{_digest(served(image['uri']), algo)}"
            notes.append(f"images.{i}.checksum: {algo} of {served(image['uri']).name}")
    return notes


def link_files(document, directory):
    """Make each wanted name in directory a link to its test-OS file (built when missing);
    returns {name: the file}. Imported late: testos needs the bench's installs."""
    from tests.vmbench import testos
    files = {}
    for name in wanted(document):
        func, _ = shape(name)
        target = getattr(testos, func)()
        link = directory / name
        link.symlink_to(target)
        files[name] = target
    return files
