"""The conductor's SSH to a ramdisk at an IPv6 address (issue 62): a real paramiko server on
[::1], its host key pinned by known_hosts in OpenSSH's form for IPv6 literals ([addr]:port off
port 22, the bare address on it) or by driver_info's key; a key pinned for another address is
refused."""

import socket
import threading

import paramiko
import pytest

from ironic_driver.conversation import ssh


class _Server(paramiko.ServerInterface):
    def __init__(self, client_key):
        self.client_key = client_key

    def get_allowed_auths(self, username):
        return "publickey"

    def check_auth_publickey(self, username, key):
        return paramiko.AUTH_SUCCESSFUL if key == self.client_key else paramiko.AUTH_FAILED

    def check_channel_request(self, kind, chanid):
        return paramiko.OPEN_SUCCEEDED if kind == "session" else \
            paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_exec_request(self, channel, command):
        def answer():       # once paramiko has said yes to the request
            channel.send(b"ran " + command)
            channel.send_exit_status(0)
            channel.close()
        threading.Timer(0.05, answer).start()
        return True


@pytest.fixture
def ramdisk_v6():
    """(port, host key, client key) of an SSH server on [::1] that serves connections until
    the test ends."""
    host_key = paramiko.RSAKey.generate(2048)
    client_key = paramiko.RSAKey.generate(2048)
    listener = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    listener.bind(("::1", 0))
    listener.listen(4)
    transports = []

    def serve():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            t = paramiko.Transport(conn)
            t.add_server_key(host_key)
            t.start_server(server=_Server(client_key))
            transports.append(t)

    threading.Thread(target=serve, daemon=True).start()
    yield listener.getsockname()[1], host_key, client_key
    listener.close()
    for t in transports:
        t.close()


def _line(key):
    return f"{key.get_name()} {key.get_base64()}"


def test_known_hosts_names_for_ipv6():
    assert ssh._known_name("fd00::5", 22) == "fd00::5"
    assert ssh._known_name("fd00::5", 2222) == "[fd00::5]:2222"


def test_pinned_by_known_hosts_in_openssh_form(tmp_path, ramdisk_v6):
    port, host_key, client_key = ramdisk_v6
    known = tmp_path / "known_hosts"
    known.write_text(f"[::1]:{port} {_line(host_key)}\n")
    with ssh.connect("::1", port, "root", client_key, known_hosts_file=str(known)) as s:
        assert s.run("true") == (0, "ran true")


def test_pinned_by_driver_info_key(ramdisk_v6):
    port, host_key, client_key = ramdisk_v6
    with ssh.connect("::1", port, "root", client_key, host_key=_line(host_key)) as s:
        assert s.run("id") == (0, "ran id")


def test_a_key_pinned_for_another_address_is_refused(tmp_path, ramdisk_v6):
    port, host_key, client_key = ramdisk_v6
    known = tmp_path / "known_hosts"
    known.write_text(f"[fd00::1]:{port} {_line(host_key)}\n::1 {_line(host_key)}\n")
    with pytest.raises(ssh.HostKeyError, match=r"of \[::1\]:\d+ is not pinned"):
        ssh.connect("::1", port, "root", client_key, known_hosts_file=str(known))
