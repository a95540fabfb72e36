"""cryptsetup, clevis and age: LUKS2 volumes, their keys and their recovery keys.

Keys never pass through an argument list, a log line or stdin captured for a log: each one is
a file in KEY_DIR, a directory of the ramdisk's /run (tmpfs: RAM only) that only root can
enter, and tools read it by path (--key-file). The image's tools run in a chroot with a /run
of its own (chroot.py), so no hook of the image can read them. Each file is overwritten and
removed once its volume no longer needs it (forget).
"""

import os
import secrets

KEY_DIR = "/run/provision-keys"
KEY_BYTES = 64
# systemd-cryptenroll's recovery key shape: 8 groups of 8 modhex characters, typable on any
# keyboard layout, 256 bits.
MODHEX = "cbdefghijklnrtuv"
LUKS_TYPE = "luks2"


def key_dir(base=KEY_DIR):
    os.makedirs(base, mode=0o700, exist_ok=True)
    os.chmod(base, 0o700)
    return base


def write_secret(path, data):
    """A new root-only file holding data (never one that exists, never through a link)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def new_key(directory, name):
    """A random key for volume name, in a file of its own; its path."""
    return write_secret(os.path.join(directory, f"{name}.key"), secrets.token_bytes(KEY_BYTES))


def recovery_passphrase():
    groups = ("".join(secrets.choice(MODHEX) for _ in range(8)) for _ in range(8))
    return "-".join(groups)


def new_recovery(directory, name):
    """(path of a file holding a new recovery passphrase, the passphrase)."""
    phrase = recovery_passphrase()
    return write_secret(os.path.join(directory, f"{name}.recovery"), phrase.encode()), phrase


def new_passphrase(directory, name, phrase):
    """A file holding the operator's passphrase for volume name, as typed (no newline: the
    console's prompt drops the Enter); its path, for cryptsetup to read as a new key."""
    return write_secret(os.path.join(directory, f"{name}.passphrase"), phrase.encode())


def forget(path):
    """Overwrite and remove a key file (tmpfs keeps no other copy)."""
    try:
        size = os.path.getsize(path)
        with open(path, "r+b") as f:
            f.write(b"\0" * size)
        os.unlink(path)
    except FileNotFoundError:
        pass


def format_argv(device, key_path, cipher, key_size, sector_size=None):
    argv = ["cryptsetup", "luksFormat", "--type", LUKS_TYPE, "--batch-mode",
            "--cipher", cipher, "--key-size", str(key_size), "--key-file", key_path]
    if sector_size:
        argv += ["--sector-size", str(sector_size)]
    return argv + [device]


def luks_format(runner, device, key_path, cipher, key_size, sector_size=None):
    runner.run(format_argv(device, key_path, cipher, key_size, sector_size), timeout=600)


def add_key(runner, device, key_path, new_key_path):
    """A keyslot for the key in new_key_path, authorized by the one in key_path."""
    runner.run(["cryptsetup", "luksAddKey", "--batch-mode", "--key-file", key_path, device,
                new_key_path], timeout=600)


def remove_key(runner, device, key_path):
    """The keyslot that key_path opens is destroyed."""
    runner.run(["cryptsetup", "luksRemoveKey", "--batch-mode", device, key_path],
               timeout=600)


def clevis_bind(runner, device, key_path, config_json):
    """A clevis sss binding (tpm2/tang pins) in a keyslot of its own. The config holds Tang
    URLs and thumbprints, TPM2 PCR numbers: nothing secret."""
    runner.run(["clevis", "luks", "bind", "-y", "-d", device, "-k", key_path, "sss",
                config_json], timeout=300)


def luks_open(runner, device, name, key_path, discard=False):
    argv = ["cryptsetup", "open", "--type", LUKS_TYPE, "--key-file", key_path]
    if discard:
        # --persistent: the installed system's opens keep it too (it is in the header)
        argv += ["--allow-discards", "--persistent"]
    runner.run(argv + [device, name], timeout=300)


def luks_uuid(runner, device):
    return runner.run(["cryptsetup", "luksUUID", device]).stdout.strip()


def age_encrypt(runner, recipients, path):
    """The ASCII-armoured age ciphertext of the file at path for the recipients."""
    argv = ["age", "--encrypt", "--armor"]
    for r in recipients:
        argv += ["--recipient", r]
    return runner.run(argv + [path]).stdout


def crypttab_line(name, uuid, key_file, options):
    return f"{name}\tUUID={uuid}\t{key_file or 'none'}\t{options}"
