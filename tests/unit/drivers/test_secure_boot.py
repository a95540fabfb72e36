"""The signed chain's checks: a PE file's Authenticode signature read from its headers (files
shaped as firmware reads them), what an image must carry, and the install that uses it."""

import struct

import pytest

from provision_agent.drivers import bootloader, secure_boot
from provision_agent.errors import EXIT_IMAGE_ERROR
from tests.unit.drivers.test_bootloader import FakeRunner, _target_with_grub

PE_AT = 0x80


def pe(signed=True, magic=0x20B, cert_type=0x0002, cert_at=None, cert_length=None):
    """A PE32(+) file: DOS header, PE signature, COFF header, optional header whose data
    directory 4 points at a WIN_CERTIFICATE (or at nothing)."""
    dirs_at = {0x10B: 96, 0x20B: 112}[magic]
    body = bytearray(PE_AT + 24 + dirs_at + 16 * 8 + 64)
    body[:2] = b"MZ"
    struct.pack_into("<I", body, 0x3C, PE_AT)
    body[PE_AT:PE_AT + 4] = b"PE\0\0"
    struct.pack_into("<H", body, PE_AT + 24, magic)
    cert = struct.pack("<IHH", 8 + 32, 0x0200, cert_type) + b"\x30" * 32
    at = len(body) if cert_at is None else cert_at
    if signed:
        struct.pack_into("<II", body, PE_AT + 24 + dirs_at + 8 * 4, at,
                         len(cert) if cert_length is None else cert_length)
        body += cert
    return bytes(body)


def put(root, rel, data):
    path = root / rel.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("magic", [0x10B, 0x20B])
def test_a_signed_pe_is_signed(tmp_path, magic):
    assert secure_boot.signed(put(tmp_path, "a.efi", pe(magic=magic)))


@pytest.mark.parametrize("data", [
    pe(signed=False),                              # no certificate table
    pe(cert_type=0x0001),                          # an X.509 entry, not PKCS#7 signed data
    pe(cert_at=1 << 20),                           # a table past the end of the file
    pe(cert_length=1 << 20),                       # a length past the end of the file
    pe(magic=0x10B)[:PE_AT + 30],                  # cut inside the optional header
    b"MZ" + b"\0" * 100,                           # e_lfanew to nowhere
    b"\x7fELF" + b"\0" * 200,                      # not a PE at all
    b"",
])
def test_what_carries_no_signature_is_unsigned(tmp_path, data):
    assert not secure_boot.signed(put(tmp_path, "a.efi", data))


def test_a_fifo_or_a_device_node_is_not_read(tmp_path):
    """A hostile image's FIFO at the shim's path would block a plain open() for ever."""
    import os
    os.mkfifo(tmp_path / "fifo.efi")
    assert not secure_boot.signed(tmp_path / "fifo.efi")
    os.symlink("/dev/null", tmp_path / "null")
    assert not secure_boot.signed(os.path.realpath(tmp_path / "null"))


def test_a_link_is_not_followed(tmp_path):
    real = put(tmp_path, "real.efi", pe())
    (tmp_path / "link.efi").symlink_to(real)
    assert not secure_boot.signed(tmp_path / "link.efi")
    assert not secure_boot.signed(tmp_path / "missing.efi")


def _image(root, kernels=("vmlinuz-6.1.0-28-amd64",), unsigned=()):
    for path, _package in secure_boot.NEEDED:
        put(root, path, pe(signed=path not in unsigned))
    for name in kernels:
        put(root, f"/boot/{name}", pe(signed=name not in unsigned))


def test_an_image_with_the_signed_packages_passes(tmp_path):
    _image(tmp_path, kernels=("vmlinuz-6.1.0-27-amd64", "vmlinuz-6.1.0-28-amd64"))
    assert secure_boot.image_problems(str(tmp_path)) == []


def test_each_missing_or_unsigned_piece_is_named(tmp_path):
    shim, grub = (p for p, _ in secure_boot.NEEDED)
    _image(tmp_path, kernels=("vmlinuz-old", "vmlinuz-new"), unsigned=(grub, "vmlinuz-old"))
    (tmp_path / shim.lstrip("/")).unlink()
    problems = secure_boot.image_problems(str(tmp_path))
    assert len(problems) == 3
    assert "shim-signed" in problems[0] and "grub-efi-amd64-signed" in problems[1]
    assert problems[2].startswith("/boot/vmlinuz-old is not signed")
    assert secure_boot.image_problems(str(tmp_path / "empty"))[-1].startswith("no kernel")


def test_the_images_links_stay_inside_it(tmp_path):
    """A hostile image's /usr/lib/shim may point at the ramdisk's own files: resolved in the
    target, the link leads nowhere signed."""
    outside = tmp_path / "ramdisk"
    put(outside, "/usr/lib/shim/shimx64.efi.signed", pe())
    root = tmp_path / "target"
    _image(root)
    shim_dir = root / "usr/lib/shim"
    for f in shim_dir.iterdir():
        f.unlink()
    shim_dir.rmdir()
    shim_dir.symlink_to(outside / "usr/lib/shim")
    assert "shim-signed" in secure_boot.image_problems(str(root))[0]


def test_install_refuses_bios_and_an_image_without_the_chain_before_any_command(tmp_path):
    _target_with_grub(tmp_path)
    for mode in ("bios", "uefi"):
        r = FakeRunner()
        with pytest.raises(secure_boot.SecureBootError) as err:
            bootloader.install(r, str(tmp_path), {"boot_mode": mode, "targets": ["/dev/vda"],
                                                  "secure_boot": True})
        assert err.value.exit_code == EXIT_IMAGE_ERROR
        assert ("BIOS" if mode == "bios" else "shim-signed") in str(err.value)
        assert r.calls == []


def test_install_runs_the_images_grub_install_for_the_signed_chain_and_checks_the_esp(tmp_path):
    _target_with_grub(tmp_path)
    _image(tmp_path)
    r = FakeRunner()
    with pytest.raises(secure_boot.SecureBootError) as err:     # grub-install is a fake here
        bootloader.install(r, str(tmp_path), {"boot_mode": "uefi", "targets": ["/dev/vda"],
                                              "secure_boot": True})
    installs = [c for c in r.calls if "grub-install" in c]
    assert len(installs) == 2 and all("--uefi-secure-boot" in c for c in installs)
    assert "EFI/debian/shimx64.efi" in str(err.value)
    # what --uefi-secure-boot leaves: then the install goes through
    for rel in ("EFI/debian/shimx64.efi", "EFI/debian/grubx64.efi", "EFI/BOOT/BOOTX64.EFI",
                "EFI/BOOT/grubx64.efi"):
        put(tmp_path, f"/boot/efi/{rel}", pe())
    assert bootloader.install(FakeRunner(), str(tmp_path), {
        "boot_mode": "uefi", "targets": ["/dev/vda"], "secure_boot": True}) == "uefi"


def test_without_the_images_grub_install_the_signed_chain_is_refused(tmp_path):
    _image(tmp_path)
    (tmp_path / "usr/sbin").mkdir(parents=True)
    r = FakeRunner()
    with pytest.raises(secure_boot.SecureBootError, match="no grub-install"):
        bootloader.install(r, str(tmp_path), {"boot_mode": "uefi", "targets": ["/dev/vda"],
                                              "secure_boot": True})
    assert not any("grub-install" in c for c in r.calls)
