"""The conductor's key forced into provision-dispatch in a booted ramdisk, and the signed update
in place (issue 60): a ramdisk built with --conductor-key and --update-key refuses a shell and
an unregistered command, answers `version`, starts a dry-run job and reports its exit code,
refuses a wheel signed by a key it does not hold, and takes one signed by its key: `version`,
`provision --version` and the next job then run the new code. One VM (tox -e e2e-update)."""

import base64
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from tests.vmbench import VM
from tests.vmbench.ramdisk import REPO_ROOT, cache_dir, ensure_ramdisk

pytestmark = pytest.mark.update
NODE = "7c1e3a52-6f0b-4e8e-9d55-3b2a1c4d5e6f"
JOBS = ("0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210")
NEW = "99.0.0"
NAMESPACE = "provision-agent-update"


def keypair(directory, name):
    """Made once and kept in the cache: the same keys, the same (cached) project layer, so
    `pytest --setup-only` builds it before a run that holds the VM lock."""
    key = directory / name
    if not key.exists():
        directory.mkdir(parents=True, exist_ok=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f",
                        str(key)], check=True)
    return key


def build_wheel(work):
    """This tree as a wheel that says it is NEW (setuptools-scm's pretend version), built from a
    copy as ramdisk/build-project.sh builds its own (pip writes build/ into its source)."""
    src = work / "src"
    src.mkdir()
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"],
                           cwd=REPO_ROOT, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        if os.path.isfile(REPO_ROOT / name):
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / name, src / name)
    pip = cache_dir() / "ramdisk" / "build-venv" / "bin" / "pip"   # has setuptools-scm
    env = dict(os.environ, SETUPTOOLS_SCM_PRETEND_VERSION_FOR_PROVISION_AGENT=NEW)
    subprocess.run([str(pip) if pip.exists() else sys.executable, *([] if pip.exists() else
                    ["-m", "pip"]), "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(work / "dist"), str(src)], env=env, check=True, capture_output=True,
                   timeout=600)
    return next((work / "dist").glob(f"provision_agent-{NEW}-*.whl"))


def sign(key, wheel):
    sig = wheel.with_name(wheel.name + ".sig")
    sig.unlink(missing_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-Y", "sign", "-f", str(key), "-n", NAMESPACE,
                    str(wheel)], check=True, capture_output=True)
    return base64.b64encode(sig.read_bytes()).decode()


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    work = tmp_path_factory.mktemp("update")
    keys = cache_dir() / "vmbench" / "update-test-keys"
    conductor, update_key, other = (keypair(keys, n) for n in ("conductor", "update", "other"))
    ramdisk = ensure_ramdisk(extra=["--conductor-key", f"{conductor}.pub",
                                    "--update-key", f"{update_key}.pub"], out=work / "ramdisk")
    wheel = build_wheel(work)
    return ramdisk, conductor, wheel, sign(update_key, wheel), sign(other, wheel)


def as_conductor(vm, key, *words, stdin=b""):
    """One request with the conductor's key, as the conductor's SSH session sends it."""
    argv = ["ssh", "-T", "-p", str(vm.port), "-i", str(key), "-o", "IdentitiesOnly=yes",
            "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={vm.workdir / 'known_hosts'}",
            "-o", "StrictHostKeyChecking=yes", "-o", "LogLevel=ERROR", "root@127.0.0.1",
            " ".join(words)]
    return subprocess.run(argv, input=stdin, capture_output=True, timeout=300, check=False)


def version(vm, key):
    done = as_conductor(vm, key, "version")
    assert done.returncode == 0, done
    return json.loads(done.stdout)


def dry_run(vm, key, job):
    doc = (REPO_ROOT / "samples" / "single-disk.json").read_bytes()
    done = as_conductor(vm, key, "start", "provision", NODE, job, "--flag=--dry_run",
                        stdin=doc)
    assert done.returncode == 0 and done.stdout == b"started\n", done
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        done = as_conductor(vm, key, "read", NODE, "exit_code", "0", "100")
        if done.returncode == 0:
            return done.stdout.decode().strip()
        assert done.returncode == 3, done          # not there yet
        time.sleep(3)
    raise AssertionError("the dry run did not end within 300 s")


def test_registered_commands_and_a_signed_update_in_a_booted_ramdisk(setup):
    ramdisk, key, wheel, good, bad = setup
    with VM(disks=1, disk_size="2G", name="update", ramdisk=ramdisk) as vm:
        for words, reason in ((("sh", "-c", "id"), b"'sh' is not a registered command"),
                              (("cat", "/etc/shadow"), b"'cat' is not a registered command")):
            done = as_conductor(vm, key, *words)
            assert done.returncode == 126 and reason in done.stderr, done
        before = version(vm, key)
        print("version before:", before)
        assert before["protocol"] == 1 and before["update"] == "enabled"
        assert "update" in before["commands"] and before["provision"] != NEW
        assert dry_run(vm, key, JOBS[0]) == "0"

        done = as_conductor(vm, key, "update", bad, stdin=wheel.read_bytes())
        print("signed by another key:", done.returncode, done.stderr.decode().strip())
        assert done.returncode == 126
        assert b"the signature does not verify against this ramdisk's update keys" \
            in done.stderr
        assert version(vm, key)["provision"] == before["provision"]

        t0 = time.monotonic()
        done = as_conductor(vm, key, "update", good, stdin=wheel.read_bytes())
        print(f"update ({wheel.stat().st_size} bytes) in {time.monotonic() - t0:.1f} s:",
              done.returncode, done.stdout.decode().strip(), done.stderr.decode().strip())
        assert done.returncode == 0, done
        assert json.loads(done.stdout)["previous"] == before["provision"]
        after = version(vm, key)
        print("version after:", after)
        assert after["provision"] == NEW and after["protocol"] == 1
        assert vm.ssh("provision --version").stdout.split()[-1] == NEW
        assert dry_run(vm, key, JOBS[1]) == "0"
        log = vm.ssh("cat /var/log/provision-dispatch.log").stdout.splitlines()
        outcomes = [(json.loads(line)["request"].split(" ")[0], json.loads(line)["outcome"])
                    for line in log]
        assert ("sh", "refused") in outcomes and ("update", "accepted") in outcomes
