"""An SFTP subsystem for sshd that answers as a ramdisk bent on stalling the conductor would:
the real sftp-server's answers, one byte every DELAY seconds. Each byte comes well within
any per-receive timeout, so only a deadline on the whole look ends a read.

Usage (sshd_config): Subsystem sftp PYTHON slow_sftp.py DELAY
"""

import os
import subprocess
import sys
import threading
import time

SFTP_SERVER = "/usr/lib/openssh/sftp-server"


def main():
    delay = float(sys.argv[1])
    child = subprocess.Popen([SFTP_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def requests_in():
        while True:
            data = os.read(0, 65536)
            if not data:
                child.stdin.close()
                return
            child.stdin.write(data)
            child.stdin.flush()

    threading.Thread(target=requests_in, daemon=True).start()
    while True:
        data = os.read(child.stdout.fileno(), 65536)
        if not data:
            return
        for byte in data:
            os.write(1, bytes([byte]))
            time.sleep(delay)


if __name__ == "__main__":
    main()
