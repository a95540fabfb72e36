"""The encryption steps' handlers against a scripted runner: the commands, where the keys live
(never in an argument, never left behind), the recovery key sealed, crypttab, and the image
check that names what is missing."""

import hashlib
import os
import stat

import pytest

from provision_agent.drivers import luks
from provision_agent.errors import ImageError
from provision_agent.plan.steps import make
from provision_agent.run.crypt_steps import CryptSteps, missing_packages

UUID = "0b0c1a6e-5d2e-4b7a-9d0f-2c1e5f7a9b3c"
CLEVIS = {"t": 1, "pins": {"tpm2": {"pcr_bank": "sha256", "pcr_ids": "7"}}}
AGE = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"


class Result:
    def __init__(self, stdout=""):
        self.stdout = stdout


class Runner:
    """Records argv; checks that each key file a command names exists and is root-only."""

    def __init__(self):
        self.argvs = []
        self.key_contents = set()

    def run(self, argv, **kw):
        self.argvs.append(list(argv))
        for arg in argv:
            if str(arg).startswith("/") and os.path.exists(arg) and \
                    os.path.dirname(arg).endswith("keys"):
                assert stat.S_IMODE(os.stat(arg).st_mode) == 0o600
                with open(arg, "rb") as f:
                    self.key_contents.add(f.read())
        if argv[:2] == ["cryptsetup", "luksUUID"]:
            return Result(UUID + "\n")
        if argv[0] == "age":
            return Result("-----BEGIN AGE ENCRYPTED FILE-----\nYWdl\n-----END AGE ENCRYPTED "
                          "FILE-----\n")
        return Result()


def image(root, *paths):
    for p in paths:
        os.makedirs(os.path.dirname(root + p), exist_ok=True)
        open(root + p, "w").close()


DEBIAN_CLEVIS_TPM2 = ["/usr/sbin/cryptsetup", "/usr/share/initramfs-tools/hooks/cryptroot",
                      "/usr/bin/clevis-luks-unlock", "/usr/share/initramfs-tools/hooks/clevis",
                      "/usr/bin/clevis-decrypt-tpm2"]


@pytest.fixture
def crypt(tmp_path):
    root = str(tmp_path / "target")
    os.makedirs(root)
    return CryptSteps(Runner(), root, key_base=str(tmp_path / "keys")), root


def fmt(**kw):
    args = {"device": "/dev/md/os", "name": "cryptos", "cipher": "aes-xts-plain64",
            "key_size": 512, "recovery_recipients": [AGE], "clevis": CLEVIS}
    args.update(kw)
    return make("luks_format", {k: v for k, v in args.items() if v is not None})


def test_a_tpm2_volume_is_made_sealed_opened_and_left_with_clevis_and_recovery_only(crypt):
    steps, root = crypt
    result = steps.luks_format(fmt())
    steps.luks_open(make("luks_open", {"device": "/dev/md/os", "name": "cryptos"}))
    image(root, *DEBIAN_CLEVIS_TPM2)
    steps.crypttab(make("crypttab", {"entries": [{
        "name": "cryptos", "device": "/dev/md/os", "key_file": None, "options": "luks",
        "unlock": ["tpm2"], "root": True}]}))
    argvs = steps.runner.argvs
    heads = [" ".join(a[:2]) for a in argvs]
    assert heads == ["cryptsetup luksFormat", "cryptsetup luksAddKey", "age --encrypt",
                     "clevis luks", "cryptsetup luksUUID", "cryptsetup open",
                     "cryptsetup luksUUID", "cryptsetup luksRemoveKey"]
    install_key = argvs[0][argvs[0].index("--key-file") + 1]
    assert argvs[0][-1] == "/dev/md/os" and "--type" in argvs[0] and "luks2" in argvs[0]
    assert argvs[3] == ["clevis", "luks", "bind", "-y", "-d", "/dev/md/os", "-k", install_key,
                        "sss", '{"pins": {"tpm2": {"pcr_bank": "sha256", "pcr_ids": "7"}}, '
                               '"t": 1}']
    assert argvs[-1] == ["cryptsetup", "luksRemoveKey", "--batch-mode", "/dev/md/os",
                         install_key]
    # keys went by path only, and none is left in the key directory
    assert len(steps.runner.key_contents) == 2             # the install key, the recovery key
    shown = repr(argvs)
    for key in steps.runner.key_contents:
        assert key.decode(errors="replace") not in shown
    assert os.listdir(os.path.dirname(install_key)) == []
    assert result == {"luks_uuid": UUID}
    assert steps.recovery_keys == [{"name": "cryptos", "device": "/dev/md/os",
                                    "luks_uuid": UUID,
                                    "age": "-----BEGIN AGE ENCRYPTED FILE-----\nYWdl\n"
                                           "-----END AGE ENCRYPTED FILE-----\n"}]
    with open(root + "/etc/crypttab") as f:
        assert f.read().splitlines()[1] == f"cryptos\tUUID={UUID}\tnone\tluks"


def test_the_recovery_passphrase_is_systemd_shaped_and_random():
    a, b = luks.recovery_passphrase(), luks.recovery_passphrase()
    assert a != b and len(a) == 71 and a.count("-") == 7
    assert set(a.replace("-", "")) <= set(luks.MODHEX)


def test_a_key_file_is_checked_copied_into_the_target_root_only_and_kept_in_its_slot(crypt,
                                                                                      tmp_path):
    steps, root = crypt
    key = tmp_path / "data.key"
    key.write_bytes(b"k" * 64)
    digest = "sha256:" + hashlib.sha256(b"k" * 64).hexdigest()
    steps.luks_format(fmt(device="/dev/os/data", name="data", clevis=None,
                          key_file=str(key), key_checksum=digest))
    image(root, "/usr/sbin/cryptsetup")
    steps.crypttab(make("crypttab", {"entries": [{
        "name": "data", "device": "/dev/os/data", "options": "luks,discard",
        "key_file": "/etc/cryptsetup-keys.d/data.key", "unlock": ["key_file"],
        "root": False}]}))
    copied = root + "/etc/cryptsetup-keys.d/data.key"
    assert open(copied, "rb").read() == b"k" * 64
    assert stat.S_IMODE(os.stat(copied).st_mode) == 0o400
    assert not any(a[:2] == ["cryptsetup", "luksRemoveKey"] for a in steps.runner.argvs)
    with pytest.raises(ImageError, match="checksum is not the one given"):
        steps.luks_format(fmt(device="/dev/sdb", name="other", clevis=None, key_file=str(key),
                              key_checksum="sha256:" + "0" * 64))


def test_an_image_without_what_unlocking_needs_is_refused_naming_the_packages(crypt):
    steps, root = crypt
    image(root, "/usr/sbin/cryptsetup")
    entries = [{"name": "cryptos", "device": "/dev/md/os", "key_file": None, "options": "luks",
                "unlock": ["tpm2", "tang"], "root": True},
               {"name": "data", "device": "/dev/os/data", "key_file": None,
                "options": "luks,_netdev", "unlock": ["tang"], "root": False}]
    assert missing_packages(root, entries) == [
        "cryptsetup-initramfs", "clevis-luks", "clevis-initramfs", "clevis-tpm2", "clevis",
        "clevis-systemd"]
    steps.keys["/dev/md/os"] = "/nonexistent"
    with pytest.raises(ImageError, match="install cryptsetup-initramfs, clevis-luks"):
        steps.crypttab(make("crypttab", {"entries": entries}))
    assert not os.path.exists(root + "/etc/crypttab")
    assert steps.runner.argvs == []                       # refused before any command


def test_links_in_the_image_are_followed_inside_it_never_out(crypt, tmp_path):
    _steps, root = crypt
    outside = tmp_path / "outside-cryptsetup"
    outside.write_text("")
    os.makedirs(root + "/usr/sbin")
    os.symlink(str(outside), root + "/usr/sbin/cryptsetup")   # exists only on the ramdisk
    entries = [{"name": "d", "device": "/dev/x", "key_file": "/k", "options": "luks",
                "unlock": ["key_file"], "root": False}]
    assert missing_packages(root, entries) == ["cryptsetup-bin"]
    image(root, "/bin/cryptsetup")                           # merged-/usr style link target
    os.unlink(root + "/usr/sbin/cryptsetup")
    os.symlink("/bin/cryptsetup", root + "/usr/sbin/cryptsetup")
    assert missing_packages(root, entries) == []


PASSPHRASE = "Tr0ub4dor&3 horse-battery"


@pytest.mark.parametrize("clevis", [None, CLEVIS])
def test_a_passphrase_gets_a_keyslot_of_its_own_by_a_private_file_never_an_argument(
        crypt, clevis, caplog):
    """The passphrase reaches cryptsetup as a root-only file of the private key directory,
    exactly as typed (no newline: the console's prompt drops the Enter), and is wiped as soon
    as its keyslot is made; the install key's slot goes with crypttab, which says `none` so
    that the installed system asks for it at the console."""
    caplog.set_level("DEBUG")
    steps, root = crypt
    steps.luks_format(fmt(clevis=clevis, passphrase=PASSPHRASE))
    argvs = steps.runner.argvs
    heads = [" ".join(a[:2]) for a in argvs]
    assert heads[:4] == ["cryptsetup luksFormat", "cryptsetup luksAddKey", "age --encrypt",
                         "cryptsetup luksAddKey"]
    install_key = argvs[0][argvs[0].index("--key-file") + 1]
    typed = argvs[3][-1]
    assert argvs[3] == ["cryptsetup", "luksAddKey", "--batch-mode", "--key-file", install_key,
                        "/dev/md/os", typed]
    assert os.path.dirname(typed) == os.path.dirname(install_key) and typed.endswith(
        "cryptos.passphrase")
    assert PASSPHRASE.encode() in steps.runner.key_contents     # read while it existed, 0600
    assert not os.path.exists(typed)                           # wiped right after
    assert ("clevis luks" in heads) is (clevis is not None)
    steps.luks_open(make("luks_open", {"device": "/dev/md/os", "name": "cryptos"}))
    image(root, *DEBIAN_CLEVIS_TPM2)
    steps.crypttab(make("crypttab", {"entries": [{
        "name": "cryptos", "device": "/dev/md/os", "key_file": None, "options": "luks",
        "unlock": (["tpm2"] if clevis else []) + ["passphrase"], "root": True}]}))
    assert argvs[-1] == ["cryptsetup", "luksRemoveKey", "--batch-mode", "/dev/md/os",
                         install_key]
    assert os.listdir(os.path.dirname(install_key)) == []
    with open(root + "/etc/crypttab") as f:
        assert f.read().splitlines()[1] == f"cryptos\tUUID={UUID}\tnone\tluks"
    assert PASSPHRASE not in repr(argvs) + caplog.text + repr(steps.recovery_keys)


def test_a_passphrase_volume_needs_only_cryptsetup_of_the_image():
    entries = [{"name": "data", "device": "/dev/os/data", "key_file": None, "options": "luks",
                "unlock": ["passphrase"], "root": False}]
    assert missing_packages("/nonexistent", entries) == ["cryptsetup-bin"]
    root = dict(entries[0], root=True)
    assert missing_packages("/nonexistent", [root]) == ["cryptsetup-bin", "cryptsetup-initramfs"]


def test_the_passphrase_is_in_no_event_log_line_or_error_of_a_run(tmp_path, caplog):
    """The executor's events (what Ironic keeps), its log and a failed step's error, for a run
    that formats a passphrase volume and fails to open it."""
    import io

    from provision_agent.errors import CommandError
    from provision_agent.run.events import Events
    from provision_agent.run.executor import Executor
    from tests.unit.fakes import FakeRunner
    caplog.set_level("DEBUG")
    stream = io.StringIO()
    runner = FakeRunner({"cryptsetup luksUUID": UUID + "\n", "age": "-----BEGIN AGE-----\n"},
                        fail=("cryptsetup open",))
    ex = Executor(runner, Events([stream]), str(tmp_path / "target"))
    ex.crypt.key_base = str(tmp_path / "keys")
    with pytest.raises(CommandError) as exc:
        ex.execute([fmt(clevis=None, passphrase=PASSPHRASE),
                    make("luks_open", {"device": "/dev/md/os", "name": "cryptos"})])
    events = stream.getvalue()
    assert '"kind": "luks_format", "status": "done"' in events
    assert '"status": "failed"' in events
    assert ["cryptsetup", "luksAddKey"] in [c[:2] for c in runner.calls[3:4]]
    assert PASSPHRASE not in events + caplog.text + str(exc.value) + repr(runner.calls)


def test_a_rhel_family_image_is_checked_by_its_own_paths_and_told_its_package_names(tmp_path):
    """clevis-dracut installs dracut's module as 60clevis (RHEL, Fedora): an image with it
    opens its TPM2 root at boot; one without is told the RHEL-family package names."""
    from tests.unit.drivers import image_trees
    root = str(tmp_path / "rocky")
    image_trees.rhel(tmp_path / "rocky", "rocky9")
    entries = [{"name": "cryptos", "device": "/dev/md/os", "key_file": None, "options": "luks",
                "unlock": ["tpm2"], "root": True}]
    assert missing_packages(root, entries) == ["cryptsetup", "clevis-luks", "clevis-dracut",
                                               "clevis"]
    for path in ("/usr/sbin/cryptsetup", "/usr/bin/clevis-luks-unlock",
                 "/usr/bin/clevis-decrypt-tpm2", "/usr/lib/dracut/modules.d/60clevis/x"):
        image(root, path)
    assert missing_packages(root, entries) == []
