"""provision-dispatch's `update`: a wheel signed with `ssh-keygen -Y sign` by a key the
ramdisk holds is unpacked and made current; every other case is refused (exit 126, one line
saying why) and leaves the running code as it was. Real ssh-keygen signatures and keys."""

import base64
import fcntl
import io
import json
import os
import subprocess
import zipfile

import pytest

from provision_agent.agent import dispatch, ironic, update

NODE = "1be26c0b-03f2-4d3e-b7c9-8a0b41f7a3b1"
GOOD_CODE = "PROTOCOL = 1\n"


def keypair(directory, name):
    key = directory / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)],
                   check=True)
    return key


def make_wheel(path, version="99.0.0", code=GOOD_CODE, extra=()):
    """A minimal provision-agent wheel: enough for the update's probe to import and answer."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("provision_agent/__init__.py", "")
        z.writestr("provision_agent/agent/__init__.py", "")
        z.writestr("provision_agent/agent/ramdisk_commands.py", code)
        z.writestr(f"provision_agent-{version}.dist-info/METADATA",
                   f"Metadata-Version: 2.1\nName: provision-agent\nVersion: {version}\n")
        for name, data in extra:
            z.writestr(name, data)
    return path.read_bytes()


def sign(key, data, tmp_path, namespace=update.NAMESPACE):
    target = tmp_path / "to-sign"
    target.write_bytes(data)
    (tmp_path / "to-sign.sig").unlink(missing_ok=True)   # ssh-keygen keeps an existing one
    subprocess.run(["ssh-keygen", "-q", "-Y", "sign", "-f", str(key), "-n", namespace,
                    str(target)], check=True, capture_output=True)
    return base64.b64encode((tmp_path / "to-sign.sig").read_bytes()).decode()


@pytest.fixture
def ramdisk(tmp_path):
    """A ramdisk's update setup: an allowed_signers file with one key, as build.sh bakes it."""
    key = keypair(tmp_path, "update-key")
    signers = tmp_path / "allowed_signers"
    signers.write_text(f'{update.NAMESPACE} namespaces="{update.NAMESPACE}" '
                       f'{(tmp_path / "update-key.pub").read_text()}')
    (tmp_path / "cmdline").write_text("console=ttyS0 ipa-api-url=http://x\n")
    argv = ["--job_root", str(tmp_path / "jobs"), "--binding_dir", str(tmp_path / "bind"),
            "--log_file", str(tmp_path / "dispatch.log"), "--update_keys", str(signers),
            "--update_root", str(tmp_path / "run"), "--cmdline_file", str(tmp_path / "cmdline")]
    return tmp_path, argv, key


def call(ramdisk, request, stdin=b""):
    out = io.BytesIO()
    rc = dispatch.main(ramdisk[1], {"SSH_ORIGINAL_COMMAND": request}, io.BytesIO(stdin), out)
    return rc, out.getvalue()


def push(ramdisk, wheel, signature, capsys):
    rc, out = call(ramdisk, f"update {signature}", wheel)
    return rc, out, capsys.readouterr().err


def current(ramdisk):
    link = ramdisk[0] / "run" / "current"
    return os.path.realpath(link) if link.is_symlink() else None


def assert_refused(rc, out, err, ramdisk, reason, before=None):
    assert rc == dispatch.REFUSED and out == b""
    assert err.count("\n") == 1 and err.startswith("provision-dispatch: update refused: ")
    assert reason in err, err
    record = json.loads((ramdisk[0] / "dispatch.log").read_text().splitlines()[-1])
    assert record["outcome"] == "refused" and reason in record["reason"]
    assert current(ramdisk) == before            # the running code is unchanged
    run = ramdisk[0] / "run"
    assert not run.exists() or not [p for p in os.listdir(run) if p.startswith("incoming-")]


def test_a_good_signature_is_made_current_and_reported(ramdisk, capsys):
    tmp_path, _, key = ramdisk
    wheel = make_wheel(tmp_path / "w.whl")
    rc, out, err = push(ramdisk, wheel, sign(key, wheel, tmp_path), capsys)
    assert rc == 0, err
    answer = json.loads(out)
    assert answer["provision"] == "99.0.0" and answer["protocol"] == 1
    assert answer["previous"] == dispatch.ramdisk_commands.version()
    target = current(ramdisk)
    assert os.path.isfile(os.path.join(target, "provision_agent", "agent",
                                       "ramdisk_commands.py"))
    # what the heartbeat says from now on, and the next `version`'s update state
    assert ironic.agent_version(str(tmp_path / "run")) == "99.0.0 protocol=1"
    rc, out = call(ramdisk, "version")
    assert rc == 0 and json.loads(out)["update"] == "enabled"
    # a second, newer update replaces it; the one before stays, an older one would go
    wheel2 = make_wheel(tmp_path / "w2.whl", version="99.1.0")
    rc, out, err = push(ramdisk, wheel2, sign(key, wheel2, tmp_path), capsys)
    assert rc == 0, err
    assert json.loads(out)["previous"] == "99.0.0"
    assert os.path.isdir(target) and current(ramdisk) != target


def test_a_bad_signature_is_refused(ramdisk, capsys):
    tmp_path, _, key = ramdisk
    wheel = make_wheel(tmp_path / "w.whl")
    signature = sign(key, wheel + b"x", tmp_path)        # the signature of other bytes
    rc, out, err = push(ramdisk, wheel, signature, capsys)
    assert_refused(rc, out, err, ramdisk, "the signature does not verify against this "
                   "ramdisk's update keys (ssh-keygen -Y verify:")


def test_a_key_the_ramdisk_does_not_hold_is_refused(ramdisk, capsys):
    tmp_path, _, _ = ramdisk
    wheel = make_wheel(tmp_path / "w.whl")
    other = keypair(tmp_path, "other-key")
    rc, out, err = push(ramdisk, wheel, sign(other, wheel, tmp_path), capsys)
    assert_refused(rc, out, err, ramdisk, "does not verify")


def test_another_namespace_is_refused(ramdisk, capsys):
    tmp_path, _, key = ramdisk
    wheel = make_wheel(tmp_path / "w.whl")
    rc, out, err = push(ramdisk, wheel, sign(key, wheel, tmp_path, namespace="file"), capsys)
    assert_refused(rc, out, err, ramdisk, "does not verify")


def test_a_wheel_too_big_is_refused(ramdisk, capsys, monkeypatch):
    tmp_path, _, key = ramdisk
    wheel = make_wheel(tmp_path / "w.whl")
    monkeypatch.setattr(update, "MAX_WHEEL", len(wheel) - 1)
    rc, out, err = push(ramdisk, wheel, sign(key, wheel, tmp_path), capsys)
    assert_refused(rc, out, err, ramdisk, f"the wheel on stdin is larger than {len(wheel) - 1}")


def test_refused_while_a_job_runs(ramdisk, capsys):
    tmp_path, _, key = ramdisk
    wheel = make_wheel(tmp_path / "w.whl")
    (tmp_path / "jobs" / NODE).mkdir(parents=True)
    with open(tmp_path / "jobs" / NODE / "lock", "a") as lock:   # as the running job's flock
        fcntl.flock(lock, fcntl.LOCK_EX)
        rc, out, err = push(ramdisk, wheel, sign(key, wheel, tmp_path), capsys)
    assert_refused(rc, out, err, ramdisk, f"a provision job is running for node {NODE}")
    # the job ended: the same push goes through
    rc, out, err = push(ramdisk, wheel, sign(key, wheel, tmp_path), capsys)
    assert rc == 0, err


def test_disabled_without_a_key(ramdisk, capsys):
    tmp_path, _, key = ramdisk
    (tmp_path / "allowed_signers").write_text("# no key\n")
    wheel = make_wheel(tmp_path / "w.whl")
    rc, out, err = push(ramdisk, wheel, sign(key, wheel, tmp_path), capsys)
    assert_refused(rc, out, err, ramdisk, "updates are disabled: this ramdisk was built "
                   "without an update key (ramdisk/build.sh --update-key FILE)")
    rc, out = call(ramdisk, "version")
    assert json.loads(out)["update"].startswith("disabled: updates are disabled: this ramdisk")


def test_disabled_on_the_kernel_command_line(ramdisk, capsys):
    tmp_path, _, key = ramdisk
    (tmp_path / "cmdline").write_text("console=ttyS0 provision.update=off\n")
    wheel = make_wheel(tmp_path / "w.whl")
    rc, out, err = push(ramdisk, wheel, sign(key, wheel, tmp_path), capsys)
    assert_refused(rc, out, err, ramdisk, "updates are disabled by provision.update=off on "
                   "the kernel command line")


@pytest.mark.parametrize("version, reason", [
    ("0.0.1", "is not newer than the one running"),
    ("not-a-version", "is not a version number"),
])
def test_no_downgrade(ramdisk, capsys, version, reason):
    tmp_path, _, key = ramdisk
    wheel = make_wheel(tmp_path / "w.whl", version=version)
    rc, out, err = push(ramdisk, wheel, sign(key, wheel, tmp_path), capsys)
    assert_refused(rc, out, err, ramdisk, reason)


@pytest.mark.parametrize("make, reason", [
    (lambda p: make_wheel(p, extra=[("../escape.py", "")]), "not a plain relative one"),
    (lambda p: make_wheel(p, extra=[("/etc/cron.d/x", "")]), "not a plain relative one"),
    (lambda p: b"PK not a zip", "is not a wheel (zip)"),
    (lambda p: make_wheel(p, code="raise SystemExit(3)\n"), "the new code does not run (exit 3)"),
])
def test_a_signed_but_unusable_wheel_is_refused(ramdisk, capsys, make, reason):
    tmp_path, _, key = ramdisk
    wheel = make(tmp_path / "w.whl")
    rc, out, err = push(ramdisk, wheel, sign(key, wheel, tmp_path), capsys)
    assert_refused(rc, out, err, ramdisk, reason)
    assert not (tmp_path / "escape.py").exists()


def test_a_failed_update_keeps_the_current_one(ramdisk, capsys):
    tmp_path, _, key = ramdisk
    wheel = make_wheel(tmp_path / "w.whl")
    assert push(ramdisk, wheel, sign(key, wheel, tmp_path), capsys)[0] == 0
    before = current(ramdisk)
    other = keypair(tmp_path, "other-key")
    wheel2 = make_wheel(tmp_path / "w2.whl", version="99.1.0")
    rc, out, err = push(ramdisk, wheel2, sign(other, wheel2, tmp_path), capsys)
    assert_refused(rc, out, err, ramdisk, "does not verify", before=before)
    assert ironic.agent_version(str(tmp_path / "run")) == "99.0.0 protocol=1"


def test_the_signature_argument_is_checked_by_its_schema(ramdisk, capsys):
    rc, out = call(ramdisk, "update not;base64")
    assert rc == dispatch.REFUSED and "update: signature:" in capsys.readouterr().err
