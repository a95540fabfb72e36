"""An SFTP subsystem for sshd that answers as a hostile ramdisk's could: the version handshake
as any server does, then every request with one kind of bad answer.

    status N   a failure status whose message is N bytes: terminal escapes, then "A"s
    badutf8    a failure status whose message is not UTF-8
    garbage    a packet whose length has its high byte set (paramiko: "Garbage packet")

Usage (sshd_config): Subsystem sftp PYTHON hostile_sftp.py MODE [N]
"""

import os
import struct
import sys

SSH_FXP_INIT, SSH_FXP_VERSION, SSH_FXP_STATUS = 1, 2, 101
SSH_FX_FAILURE = 4
ESCAPES = b"\x1b[2J\x1b[31m\x1b]0;owned\x07"


def read_exactly(n):
    data = b""
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def send(kind, payload):
    data = struct.pack(">IB", len(payload) + 1, kind) + payload
    while data:
        data = data[os.write(1, data):]


def string(data):
    return struct.pack(">I", len(data)) + data


def main():
    mode = sys.argv[1]
    if mode == "status":
        size = int(sys.argv[2])
        message = (ESCAPES + b"A" * size)[:size]
    else:
        message = b"\xff\xfe not UTF-8"
    while True:
        header = read_exactly(4)
        if header is None:
            return
        body = read_exactly(struct.unpack(">I", header)[0])
        if not body:
            return
        if body[0] == SSH_FXP_INIT:
            send(SSH_FXP_VERSION, struct.pack(">I", 3))
            continue
        request_id = body[1:5]
        if mode == "garbage":
            os.write(1, b"\xff\xff\xff\xff garbage")
            continue
        send(SSH_FXP_STATUS, request_id + struct.pack(">I", SSH_FX_FAILURE) + string(message)
             + string(b""))


if __name__ == "__main__":
    main()
