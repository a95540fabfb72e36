"""The bench's iSCSI target (tests/vmbench/iscsi_target.py, Debian's tgt) serves its LUN and
enforces CHAP, proven from the host without a kernel initiator (this host's kernel has no
iscsi_tcp): a login's security stage spoken over TCP as RFC 7143 says, CHAP (MD5) answered
with the right secret (accepted: the target moves on to the operational stage) and a wrong one
(refused: status 0x0201, authentication failure). The VM test (tests/e2e/test_iscsi.py) logs
in with open-iscsi."""

import hashlib
import socket
import struct

from tests.functional.prereq import require
from tests.vmbench.iscsi_target import IQN, IscsiTarget

pytestmark = require("tgtd", "tgtadm", root=False)

INITIATOR = "iqn.2026-11.example.provision:host-test"
USER, SECRET = "node1", "chap-secret-12345"
MiB = 1 << 20


def login_pdu(data, stage=(0, 1), transit=True, itt=1):
    """A Login Request (RFC 7143 11.12): immediate, opcode 0x03, CSG/NSG, the text keys."""
    csg, nsg = stage
    flags = (0x80 if transit else 0) | (csg << 2) | nsg
    body = b"\0".join(k.encode() for k in data) + b"\0"
    isid = bytes([0x40, 0x00, 0x01, 0x37, 0x00, 0x01])
    bhs = struct.pack(">BBBBB3s6sHIHHII16x", 0x43, flags, 0, 0, 0,
                      len(body).to_bytes(3, "big"), isid, 0, itt, 0, 0, 0, 0)
    return bhs + body + b"\0" * (-len(body) % 4)


def read_response(sock):
    """(status class, status detail, {key: value}) of a Login Response (opcode 0x23)."""
    bhs = b""
    while len(bhs) < 48:
        chunk = sock.recv(48 - len(bhs))
        assert chunk, "the target closed the connection"
        bhs += chunk
    assert bhs[0] & 0x3F == 0x23, f"not a Login Response: opcode {bhs[0]:#x}"
    length = int.from_bytes(bhs[5:8], "big")
    data = b""
    while len(data) < length + (-length % 4):
        data += sock.recv(length + (-length % 4) - len(data))
    keys = dict(kv.split("=", 1) for kv in data[:length].decode().split("\0") if "=" in kv)
    return bhs[36], bhs[37], keys


def chap_login(portal, secret, offer="CHAP,None"):
    host, port = portal.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(login_pdu([f"InitiatorName={INITIATOR}", "SessionType=Normal",
                                f"TargetName={IQN}", f"AuthMethod={offer}"], transit=False))
        cls, detail, keys = read_response(sock)
        if cls or keys.get("AuthMethod") != "CHAP":
            return cls, detail, keys
        sock.sendall(login_pdu(["CHAP_A=5"], transit=False, itt=2))
        cls, detail, keys = read_response(sock)
        assert cls == 0 and keys["CHAP_A"] == "5", keys
        ident, challenge = int(keys["CHAP_I"]), bytes.fromhex(keys["CHAP_C"][2:])
        answer = hashlib.md5(bytes([ident]) + secret.encode() + challenge).hexdigest()
        sock.sendall(login_pdu([f"CHAP_N={USER}", f"CHAP_R=0x{answer}"], itt=3))
        return read_response(sock)


def test_the_target_serves_its_lun_and_enforces_chap(tmp_path):
    with IscsiTarget(tmp_path, {1: 64 * MiB}, chap=(USER, SECRET)) as tgt:
        shown = tgt.show()
        assert shown["luns"] == {0: 0, 1: 67 * 1000 * 1000}       # tgt's MB, rounded
        assert "Backing store path: " + str(tgt.lun_path(1)) in shown["text"]
        assert shown["accounts"] == [USER]
        assert tgt.guest_portal == f"10.0.2.2:{tgt.port}"
        # the right secret: the target leaves the security stage (CHAP accepted)
        cls, detail, keys = chap_login(tgt.portal, SECRET)
        assert (cls, detail) == (0, 0), keys
        # a wrong one: authentication failure
        assert chap_login(tgt.portal, "not-the-secret")[:2] == (2, 1)
        # no CHAP at all: the target will not let the initiator in
        cls, detail, keys = chap_login(tgt.portal, SECRET, offer="None")
        assert cls == 2 or keys.get("AuthMethod") == "Reject", (cls, detail, keys)
    assert tgt.lun_path(1).stat().st_size == 64 * MiB


def test_without_chap_the_target_lets_the_initiator_in(tmp_path):
    with IscsiTarget(tmp_path, {1: 16 * MiB}) as tgt:
        cls, detail, keys = chap_login(tgt.portal, "", offer="None")
        assert (cls, detail) == (0, 0) and keys.get("AuthMethod") == "None", keys
