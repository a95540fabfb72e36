"""build-ipa.sh runs our build-base.sh from a scratch recipe directory (issue 35: the same base
recipe for both ramdisks). Every file build-base.sh reads beside itself must be staged there
and be part of the IPA base's cache key: when firmware-packages.txt was added (issue 53) it was
neither, and the IPA build stopped at once with `grep: .../firmware-packages.txt: No such file
or directory` (found by issue 58's head-to-head)."""

import re
import subprocess

from tests.unit.helpers import REPO

RAMDISK = REPO / "ramdisk"


def _beside_base():
    """The files build-base.sh reads from its own directory (`$here/NAME`)."""
    names = set(re.findall(r"\$here/([\w.-]+)", (RAMDISK / "build-base.sh").read_text()))
    assert "packages.txt" in names, names  # the parse still finds what it is meant to
    return names


def _ipa_lines(prefix):
    lines = [ln.strip() for ln in (RAMDISK / "build-ipa.sh").read_text().splitlines()
             if ln.strip().startswith(prefix)]
    assert lines, f"no line of build-ipa.sh starts with {prefix!r}"
    return "\n".join(lines)


def test_every_file_build_base_reads_is_staged_in_the_recipe():
    staged = set(re.findall(r"\$here/([\w.-]+)", _ipa_lines('cp "$here/build-base.sh"')))
    # packages.txt is written there as the union of ours and IPA's lists, not copied.
    missing = _beside_base() - staged - {"packages.txt"}
    assert not missing, f"build-ipa.sh does not copy {sorted(missing)} into its recipe"
    assert 'cat "$here/packages.txt" "$ipa/packages.txt" > "$recipe/packages.txt"' in (
        RAMDISK / "build-ipa.sh").read_text()


def test_every_file_build_base_reads_is_in_the_base_key():
    keyed = set(re.findall(r"\$here/([\w.-]+)", _ipa_lines("base_key=")))
    missing = (_beside_base() | {"build-base.sh"}) - keyed
    assert not missing, f"the IPA base's key does not cover {sorted(missing)}"


def test_a_failed_base_build_leaves_no_ticker_holding_the_lock(tmp_path):
    """build-ipa.sh prints "still building" from a background loop while the base builds. When
    build-base.sh failed, set -e ended the script and left that loop running for ever, holding
    the cache's lock (fd 9): the next build-ipa.sh waited in flock behind it (11:34-11:48
    UTC 2026-11-29). Run here on a copy whose build-base.sh fails at once, with `id` saying
    root (no mmdebstrap is reached)."""
    repo = tmp_path / "repo"
    (repo / "ramdisk" / "ipa").mkdir(parents=True)
    (repo / "scripts").mkdir()
    for name in ("ramdisk/build-ipa.sh", "scripts/lib.sh", "ramdisk/packages.txt",
                 "ramdisk/firmware-packages.txt", "ramdisk/ipa/packages.txt"):
        (repo / name).write_bytes((REPO / name).read_bytes())
    (repo / "ramdisk" / "build-base.sh").write_text("#!/bin/sh\necho base failed >&2\nexit 3\n")
    (repo / "ramdisk" / "build-base.sh").chmod(0o755)
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "id").write_text("#!/bin/sh\necho 0\n")
    (stubs / "id").chmod(0o755)
    cache = tmp_path / "cache"
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "PROVISION_AGENT_CACHE": str(cache),
           "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
    log = tmp_path / "build.log"
    with log.open("w") as out:  # a file, not a pipe: a ticker left behind would keep a pipe open
        run = subprocess.run(["bash", str(repo / "ramdisk" / "build-ipa.sh"), "--mirror",
                              "http://deb.example/debian"], env=env, stdout=out, stderr=out,
                             timeout=60)
    assert run.returncode != 0 and "base failed" in log.read_text(), log.read_text()
    lock = cache / "ipa-ramdisk" / ".lock"
    free = subprocess.run(["flock", "-n", str(lock), "true"], timeout=10)
    holders = subprocess.run(["fuser", str(lock)], capture_output=True, text=True)
    for pid in holders.stdout.split():      # what the old script left behind
        subprocess.run(["kill", pid], check=False)
    assert free.returncode == 0, f"the cache's lock is still held by {holders.stdout.split()}"
