"""The chroot helper for real on the host (root): a command run in the target sees a /run of
its own (not the machine's, where the conductor's job files live), a /proc of its own PID
namespace (its /proc/1/root is the target's root, no process of the machine shows), the udev
database copied in, and what it leaves running dies with it; a command that breaks out of
the chroot (the double chroot: chroot into a subdirectory without entering it, climb `..`
from the working directory left outside, chroot there) finds only the target again, never
the machine's tree with the job's input and exit code (issue 52 item 16). The target is the
host's /usr bound read-only under a temporary root."""

import os
import shutil
import subprocess
import uuid

import pytest

from provision_agent.drivers import chroot
from provision_agent.run.runner import Runner
from tests.functional.prereq import require, sh

pytestmark = require("unshare", "chroot", "mount", "findmnt")

PROBE = r"""
echo "run=$(ls -A /run | tr '\n' ' ')"
echo "job=$(cat /run/provision-ironic/$1/exit_code 2>/dev/null || echo absent)"
echo "pid1-root=$(readlink /proc/1/root)"
echo "via-pid1=$(cat /proc/1/root/run/provision-ironic/$1/exit_code 2>/dev/null || echo absent)"
echo "processes=$(ls -d /proc/[0-9]* | wc -l)"
echo "udev=$(cat /run/udev/data/b252:0)"
sleep "$2" &
"""


@pytest.fixture
def target(tmp_path):
    root = tmp_path / "root"
    (root / "usr").mkdir(parents=True)
    for name in ("bin", "lib", "lib64", "sbin"):
        if os.path.islink(f"/{name}"):
            os.symlink(os.readlink(f"/{name}"), root / name)
    sh("mount", "--bind", "-o", "ro", "/usr", str(root / "usr"))
    yield root
    subprocess.run(["umount", str(root / "usr")], check=False)


@pytest.fixture
def conductor_job():
    """A job directory of the conductor's in this machine's /run, as a ramdisk has one."""
    node = f"chroot-test-{uuid.uuid4().hex[:8]}"
    made_parent = not os.path.isdir("/run/provision-ironic")
    job = os.path.join("/run/provision-ironic", node)
    os.makedirs(job)
    with open(os.path.join(job, "exit_code"), "w") as f:
        f.write("CONDUCTOR-READS-THIS\n")
    yield node, job
    shutil.rmtree(job)
    if made_parent:
        os.rmdir("/run/provision-ironic")


def test_a_command_in_the_target_reaches_neither_run_nor_proc_of_the_machine(
        tmp_path, target, conductor_job):
    node, job = conductor_job
    db = tmp_path / "udev" / "data"
    db.mkdir(parents=True)
    (db / "b252:0").write_text("E:ID_SERIAL=disk0\n")
    left = f"{600 + uuid.uuid4().int % 1000}.5"       # a sleep no one else runs
    with chroot.bound(Runner(), str(target), udev_db=str(tmp_path / "udev")) as ch:
        out = ch.run(["sh", "-c", PROBE, "probe", node, left], timeout=60).stdout
    seen = dict(line.split("=", 1) for line in out.strip().splitlines())
    assert seen["run"].split() == ["lock", "udev"], seen
    assert seen["job"] == "absent" and seen["via-pid1"] == "absent", seen
    assert seen["pid1-root"] == "/", seen
    assert int(seen["processes"]) <= 4, seen        # sh, and the pipeline's own
    assert seen["udev"] == "E:ID_SERIAL=disk0", seen
    ps = subprocess.run(["pgrep", "-f", f"sleep {left}"], capture_output=True, text=True)
    assert ps.stdout == "", "a process the command left running outlived it"
    with open(os.path.join(job, "exit_code")) as f:
        assert f.read() == "CONDUCTOR-READS-THIS\n"
    mounts = sh("findmnt", "-rn", "-o", "TARGET")
    assert [m for m in mounts.splitlines() if m.startswith(f"{target}/") and
            not m.endswith("/usr")] == []


# The classic chroot escape, as root in the target: chroot into a subdirectory while the
# working directory stays outside it, climb `..` from there, and chroot where it ends.
ESCAPE = r"""
use strict;
my ($job) = @ARGV;
mkdir "/run/esc";
chroot "/run/esc" or die "chroot: $!";
chdir ".." for 1 .. 64;
chroot "." or die "chroot .: $!";
chdir "/";
my $input = "absent";
if (open my $f, "<", "$job/input.json") { local $/; ($input = <$f>) =~ s/\n//g; }
my $wrote = "no";
if (open my $w, ">", "$job/exit_code") { print $w "0\n"; close $w; $wrote = "yes"; }
opendir my $d, "/";
print "input=$input\n", "wrote=$wrote\n";
print "top=", join(" ", sort grep { !/^\.\.?$/ } readdir $d), "\n";
"""


def test_a_command_that_breaks_out_of_the_chroot_finds_only_the_target(
        tmp_path, target, conductor_job):
    node, job = conductor_job
    with open(os.path.join(job, "input.json"), "w") as f:
        f.write('{"pull_secret": "OPERATORS"}\n')
    with chroot.bound(Runner(), str(target), udev_db=str(tmp_path / "no-udev")) as ch:
        out = ch.run(["perl", "-e", ESCAPE, f"/run/provision-ironic/{node}"],
                     timeout=60).stdout
    seen = dict(line.split("=", 1) for line in out.strip().splitlines())
    assert seen["input"] == "absent" and seen["wrote"] == "no", seen
    # where the climb ended: the target's own root, not the machine's
    assert sorted(seen["top"].split()) == sorted(os.listdir(target)), seen
    with open(os.path.join(job, "exit_code")) as f:
        assert f.read() == "CONDUCTOR-READS-THIS\n"
