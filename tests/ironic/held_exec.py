"""The stand-in ramdisk's forced command (authorized_keys `command=`) that holds a conductor
between starting a job and recording it: every command runs as sshd would run it, except that
a job's start (the one command that ends in `setsid flock ...`, ironic_driver's
remote.start_command) waits, once it has started the job, while the control directory holds
`hold-<job directory's name>` (the node's UUID).

Since the start became one command and the conductor records the job as soon as it returns,
there is no read between the two for held_sftp.py to hold; holding the start's return keeps
the conductor where test_failover kills it: the job started, nothing of it recorded.

Usage (authorized_keys): command="PYTHON held_exec.py CONTROL_DIR" KEY
"""

import os
import re
import shlex
import subprocess
import sys
import time

# remote.start_command's `cd DIR || exit 1; ...` (DIR as shlex.quote wrote it)
START = re.compile(r"cd ('[^']*'|\S+) \|\| exit 1; .*setsid flock ", re.S)


def main():
    control = sys.argv[1]
    command = os.environ.get("SSH_ORIGINAL_COMMAND", "")
    if not command:
        sys.exit("held_exec: no command (a shell is not offered here)")
    rc = subprocess.run(["sh", "-c", command]).returncode
    start = START.search(command)
    if start:
        hold = os.path.join(control, "hold-" + os.path.basename(shlex.split(start.group(1))[0]))
        while os.path.exists(hold):
            time.sleep(0.05)
    sys.exit(rc)


if __name__ == "__main__":
    main()
