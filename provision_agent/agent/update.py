"""provision-dispatch's `update`: the ramdisk's provision replaced in place by a signed wheel.

    update SIGNATURE        stdin: a wheel of provision-agent (at most MAX_WHEEL bytes);
                            SIGNATURE: base64 of `ssh-keygen -Y sign -n provision-agent-update`'s
                            signature of those bytes

The wheel is verified with `ssh-keygen -Y verify` (OpenSSH, already in the ramdisk) against the
allowed_signers file ramdisk/build.sh --update-key bakes in; it must be a newer provision-agent
than the one running; it is unpacked into a new directory under --update_root, its code run
once (its version and protocol read back), and only then made current by renaming a symlink
over `current` (atomic). The ramdisk's console scripts put realpath(current) first on sys.path
(ramdisk/build-project.sh), so every provision and provision-dispatch started afterwards runs
the new code; one that runs already keeps the directory it started from.

Refused, each saying why: a ramdisk built without --update-key, `provision.update=off` on the
kernel command line, a wheel too large, a signature that does not verify against the baked keys,
not a provision-agent wheel, not newer than what runs, a path that leaves the directory, and
any provision job running (its job directory's lock is held).
"""

import base64
import binascii
import contextlib
import email.parser
import fcntl
import glob
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

from packaging import version as pep440

MAX_WHEEL = 32 * 1024 * 1024
MAX_UNPACKED = 128 * 1024 * 1024
MAX_MEMBERS = 20000
NAMESPACE = "provision-agent-update"      # ssh-keygen -Y sign -n, and the signers' principal
KEYS = "/etc/provision/update-keys/allowed_signers"
ROOT = "/run/provision-agent"
CURRENT = "current"
DISABLE = "provision.update=off"
SIGNATURE = {"type": "string", "pattern": "^[A-Za-z0-9+/=]{1,3000}$", "maxLength": 3000}
VERIFY_TIMEOUT = 60
PROBE_TIMEOUT = 120
KEEP = 2                                # the current directory and the one before


class Refused(Exception):
    """The update is not applied; the text says why."""


def disabled(config):
    """Why this ramdisk takes no update, or None when it does."""
    try:
        with open(config.cmdline_file) as f:
            if DISABLE in f.read(8192).split():
                return f"updates are disabled by {DISABLE} on the kernel command line"
    except OSError:
        pass
    if not _keys(config.update_keys):
        return ("updates are disabled: this ramdisk was built without an update key "
                "(ramdisk/build.sh --update-key FILE)")
    return None


def _keys(path):
    try:
        with open(path) as f:
            return [line for line in f.read(65536).splitlines()
                    if line.strip() and not line.lstrip().startswith("#")]
    except OSError:
        return []


def state(config):
    """`version`'s "update" field: "enabled", or "disabled: why"."""
    why = disabled(config)
    return "enabled" if why is None else f"disabled: {why}"


def run(args, config, stdin, stdout):
    """The registered command: an applied update prints the new version's answer as JSON;
    Refused goes to the dispatcher, which logs it and exits 126 with one line saying why."""
    answer = apply(args["signature"], config, stdin)
    stdout.write((json.dumps(answer) + "\n").encode())
    return 0


def apply(signature_b64, config, stdin):
    # stdin first, whatever the answer: a client still sending when the channel closes would
    # see a broken pipe instead of the reason
    wheel = stdin.read(MAX_WHEEL + 1)
    if len(wheel) > MAX_WHEEL:
        raise Refused(f"the wheel on stdin is larger than {MAX_WHEEL} bytes")
    why = disabled(config)
    if why:
        raise Refused(why)
    try:
        signature = base64.b64decode(signature_b64, validate=True)
    except (binascii.Error, ValueError):
        raise Refused("the signature is not base64") from None
    with _no_job_running(config.job_root):
        os.makedirs(config.update_root, mode=0o700, exist_ok=True)
        work = tempfile.mkdtemp(prefix="incoming-", dir=config.update_root)
        try:
            verify(wheel, signature, config.update_keys, work)
            new = _check_wheel(os.path.join(work, "wheel"), running_version(config))
            return _install(os.path.join(work, "wheel"), new, config)
        finally:
            shutil.rmtree(work, ignore_errors=True)


@contextlib.contextmanager
def _no_job_running(job_root):
    """Holds every job directory's lock (a running provision holds its own: refused), so that
    no job starts while the code under it is switched."""
    held = []
    try:
        for lock in sorted(glob.glob(os.path.join(glob.escape(job_root), "*", "lock"))):
            f = open(lock, "a")
            held.append(f)
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                node = os.path.basename(os.path.dirname(lock))
                raise Refused(f"a provision job is running for node {node[:36]}: update "
                              "when it has ended") from None
        yield
    finally:
        for f in held:
            f.close()


def verify(wheel, signature, keys, work):
    """Refused unless signature is a valid SSH signature of wheel, in NAMESPACE, by a key
    of the allowed_signers file keys."""
    for name, data in (("wheel", wheel), ("wheel.sig", signature)):
        with open(os.path.join(work, name), "wb") as f:
            f.write(data)
    try:
        with open(os.path.join(work, "wheel"), "rb") as data:
            done = subprocess.run(["ssh-keygen", "-Y", "verify", "-f", keys, "-I", NAMESPACE,
                                   "-n", NAMESPACE, "-s", os.path.join(work, "wheel.sig")],
                                  stdin=data, capture_output=True, timeout=VERIFY_TIMEOUT,
                                  check=False)
    except subprocess.TimeoutExpired:
        raise Refused(f"ssh-keygen -Y verify took more than {VERIFY_TIMEOUT} s") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).decode(errors="replace").strip()
        said = " ".join(said.split())[:300]
        raise Refused("the signature does not verify against this ramdisk's update keys "
                      f"(ssh-keygen -Y verify: {said or 'exit ' + str(done.returncode)})")


def current_answer(update_root):
    """{"provision": VERSION, "protocol": N} of the update made current, or None."""
    answer = _read_json(os.path.join(update_root, CURRENT, "version.json"))
    if answer and isinstance(answer.get("provision"), str) \
            and isinstance(answer.get("protocol"), int):
        return answer
    return None


def running_version(config):
    """The provision-agent version running now: the current update's, else the build's."""
    answer = current_answer(config.update_root)
    if answer:
        return answer["provision"]
    try:
        return importlib.metadata.version("provision-agent")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def _read_json(path):
    try:
        with open(path) as f:
            answer = json.loads(f.read(4096))
        return answer if isinstance(answer, dict) else None
    except (OSError, ValueError):
        return None


SAFE_MEMBER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,99}(/[A-Za-z0-9_][A-Za-z0-9_.+-]{0,99})"
                         r"{0,15}/?")


def _check_wheel(path, running):
    """The wheel's version, once it is a provision-agent wheel newer than running whose
    members all stay inside the directory they are unpacked to."""
    try:
        with zipfile.ZipFile(path) as z:
            members = z.infolist()
            if len(members) > MAX_MEMBERS:
                raise Refused(f"the wheel has more than {MAX_MEMBERS} files")
            if sum(m.file_size for m in members) > MAX_UNPACKED:
                raise Refused(f"the wheel unpacks to more than {MAX_UNPACKED} bytes")
            for m in members:
                if not SAFE_MEMBER.fullmatch(m.filename) or ".." in m.filename.split("/"):
                    raise Refused(f"the wheel holds a path that is not a plain relative one: "
                                  f"{m.filename[:100]!r}")
            metadata = [m for m in members
                        if re.fullmatch(r"provision_agent-[^/]+\.dist-info/METADATA", m.filename)]
            if len(metadata) != 1:
                raise Refused("it is not a wheel of provision-agent (no provision_agent-"
                              "VERSION.dist-info/METADATA)")
            text = z.read(metadata[0]).decode("utf-8", errors="replace")
    except (zipfile.BadZipFile, OSError) as exc:
        raise Refused(f"the data on stdin is not a wheel (zip): {exc}") from None
    fields = email.parser.Parser().parsestr(text[:65536], headersonly=True)
    new = str(fields.get("Version", ""))
    try:
        newer = pep440.Version(new) > pep440.Version(running)
    except pep440.InvalidVersion:
        raise Refused(f"the wheel's version {new[:40]!r} or the running one {running[:40]!r} "
                      "is not a version number") from None
    if not newer:
        raise Refused(f"the wheel's provision-agent {new} is not newer than the one running "
                      f"({running}): no downgrade, no reinstall")
    return new


def _install(wheel, new, config):
    """Unpacks the wheel beside the current code, runs it once, then switches `current`."""
    target = tempfile.mkdtemp(prefix=f"{new}-", dir=config.update_root)
    try:
        with zipfile.ZipFile(wheel) as z:
            z.extractall(target)
        answer = _probe(target)
        if answer.get("provision") != new:
            raise Refused(f"the unpacked wheel says it is provision-agent "
                          f"{str(answer.get('provision'))[:40]}, its metadata {new}")
        answer["previous"] = running_version(config)
        with open(os.path.join(target, "version.json"), "w") as f:
            f.write(json.dumps(answer) + "\n")
        os.chmod(target, 0o755)
        link = os.path.join(config.update_root, CURRENT)
        os.symlink(os.path.basename(target), link + ".new")
        os.replace(link + ".new", link)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    _prune(config.update_root, os.path.basename(target))
    return answer


PROBE = ("import importlib.metadata, json, sys; sys.path.insert(0, sys.argv[1]); "
         "from provision_agent.agent import ramdisk_commands as c; "
         "d = next(importlib.metadata.distributions(name='provision-agent', path=sys.path)); "
         "print(json.dumps({'provision': d.version, 'protocol': c.PROTOCOL}))")


def _probe(directory):
    """The new code's own answer (version, protocol), run from directory: code that does not
    import is refused before it is made current."""
    try:
        done = subprocess.run([sys.executable, "-I", "-c", PROBE, directory],
                              capture_output=True, timeout=PROBE_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        raise Refused(f"the new code did not answer within {PROBE_TIMEOUT} s") from None
    try:
        answer = json.loads(done.stdout[:4096]) if done.returncode == 0 else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not isinstance(answer.get("protocol"), int):
        said = " ".join(done.stderr.decode(errors="replace").split()[-40:])[:300]
        raise Refused(f"the new code does not run (exit {done.returncode}): {said}")
    return answer


def _prune(root, keep_name):
    """Removes updates older than the one before keep_name (tmpfs is RAM)."""
    dirs = [d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))
            and not d.startswith("incoming-") and d != CURRENT]
    dirs.sort(key=lambda d: os.stat(os.path.join(root, d)).st_mtime, reverse=True)
    kept = [keep_name] + [d for d in dirs if d != keep_name][:KEEP - 1]
    for d in dirs:
        if d not in kept:
            shutil.rmtree(os.path.join(root, d), ignore_errors=True)
