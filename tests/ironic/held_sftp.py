"""An SFTP subsystem for sshd that holds a conductor between starting a job and reading it back:
the real sftp-server, except that a request to open a job's exit_code file waits while the
control directory holds a file `hold-<job directory's name>` (the node's UUID).

A conductor's look at a ramdisk starts the job (a command over SSH) and then, before it
records anything, reads the exit code over SFTP; held here, that conductor stays between the
two for as long as the test wants (tests/ironic/test_failover.py kills it there). Every
other request, and every job without a hold file, passes at once.

Usage (sshd_config): Subsystem sftp PYTHON held_sftp.py CONTROL_DIR
"""

import os
import struct
import subprocess
import sys
import time

SFTP_SERVER = "/usr/lib/openssh/sftp-server"
SSH_FXP_OPEN = 3


def read_exactly(fd, n):
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def held_name(packet):
    """The job directory's name when packet is an OPEN of an exit_code file, else None."""
    if len(packet) < 9 or packet[0] != SSH_FXP_OPEN:
        return None
    (length,) = struct.unpack(">I", packet[5:9])
    path = packet[9:9 + length].decode(errors="replace")
    directory, name = os.path.split(path)
    return os.path.basename(directory) if name == "exit_code" else None


def main():
    control = sys.argv[1]
    # Replies go from sftp-server straight to sshd; only requests pass through here.
    child = subprocess.Popen([SFTP_SERVER], stdin=subprocess.PIPE, stdout=sys.stdout.buffer)
    while True:
        header = read_exactly(0, 4)
        if header is None:
            break
        body = read_exactly(0, struct.unpack(">I", header)[0])
        if body is None:
            break
        name = held_name(body)
        while name and os.path.exists(os.path.join(control, f"hold-{name}")):
            time.sleep(0.05)
        child.stdin.write(header + body)
        child.stdin.flush()
    child.stdin.close()
    child.wait()


if __name__ == "__main__":
    main()
