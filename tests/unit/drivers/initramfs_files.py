"""Initramfs files made the way mkinitramfs makes them: `cpio -o -H newc` of a tree, an early
uncompressed archive (CPU microcode) in front of a compressed main one."""

import os
import subprocess

COMPRESSORS = {"zstd": ["zstd", "-q", "-c"], "gzip": ["gzip", "-c"], "xz": ["xz", "-c"],
               "bzip2": ["bzip2", "-c"], "lz4": ["lz4", "-l", "-q", "-c"]}


def cpio(tree, files):
    """A newc archive of files (relative paths -> bytes) laid out under tree."""
    for rel, data in files.items():
        path = tree / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    listing = sorted({str(p.relative_to(tree)) for p in tree.rglob("*")})
    return subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=tree, check=True,
                          input="\n".join(["."] + listing).encode(),
                          capture_output=True).stdout


def initramfs(tmp_path, main, compression="zstd", early=None):
    out = tmp_path / f"initrd.img-{compression}"
    body = cpio(tmp_path / "main", main)
    packed = subprocess.run(COMPRESSORS[compression], input=body, check=True,
                            capture_output=True).stdout
    head = b""
    if early is not None:
        head = cpio(tmp_path / "early", early)
        head += b"\0" * (-len(head) % 512)
    out.write_bytes(head + packed)
    os.chmod(out, 0o600)
    return out


TOOLS = {"usr/sbin/mdadm": b"\x7fELF mdadm", "usr/sbin/lvm": b"\x7fELF lvm",
         "scripts/local-block/mdadm": b"#!/bin/sh\n", "init": b"#!/bin/sh\n"}
MICROCODE = {"kernel/x86/microcode/GenuineIntel.bin": os.urandom(3000)}
