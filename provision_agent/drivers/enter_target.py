"""Make the target the root of this mount namespace, then run a command in it: a program of
its own, never imported (drivers/chroot.py runs it inside `unshare --mount --propagation
private`, so nothing here reaches the ramdisk's mounts).

    python3 -I enter_target.py ROOT COMMAND [ARG]...

A plain chroot leaves the ramdisk's whole tree in the command's mount namespace, and root
leaves a chroot by climbing `..` from a working directory outside it: the conductor's job
files (input document, exit code) in the ramdisk's /run were one climb away. Here ROOT is
moved over `/` first, as switch_root does, and entered: `..` at the top of a mount climbs to
the mount point, `/` of the namespace, and what is mounted there is ROOT again, so every climb
ends in the target. pivot_root(2) is what a container runtime would use, but the ramdisk runs
from the initramfs itself (rootfs), which pivot_root refuses (EINVAL); the move does not.
"""

import os
import subprocess
import sys


def main(argv):
    if len(argv) < 3:
        print("usage: enter_target.py ROOT COMMAND [ARG]...", file=sys.stderr)
        return 125
    root, command = argv[1], argv[2:]
    try:
        # a mount of its own, with its binds and /proc, also when ROOT is a plain directory:
        # only a mount can be moved
        subprocess.run(["mount", "--rbind", root, root], check=True)
        os.chdir(root)      # the bind just made: the move takes this working directory along
        subprocess.run(["mount", "--move", ".", "/"], check=True)
        os.chroot(".")
        os.chdir("/")
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"enter_target: cannot make {root} the root of the command's mount namespace: "
              f"{exc}", file=sys.stderr)
        return 125      # chroot's own code for its own failure
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"enter_target: cannot run {command[0]} in {root}: {exc.strerror}",
              file=sys.stderr)
        return 127 if isinstance(exc, FileNotFoundError) else 126


if __name__ == "__main__":
    sys.exit(main(sys.argv))
