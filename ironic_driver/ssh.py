"""SSH to the ramdisk with paramiko: key authentication only, host key pinned.

A host key is trusted when it equals driver_info/provision_host_key, or is listed for the
address in the configured known_hosts file. Anything else is refused unless the operator set
accept_unknown_host_keys, which goes through TrustOnRequest below (never paramiko's
auto-add: the decision must be visible in our code and logged).
"""

import base64
import logging
import posixpath

try:
    import paramiko
except ImportError as exc:
    # Ironic shows this text when it cannot load the interface: say what to install.
    raise ImportError(f"the provision deploy interface needs paramiko ({exc}): install it "
                      "on the conductor with pip install 'provision-agent[ironic]'") from exc

LOG = logging.getLogger(__name__)


def quiet_paramiko(logger=logging.getLogger("paramiko")):
    """paramiko logs each step of every SSH handshake at DEBUG, about 45 lines a connection:
    with Ironic's debug = true they were 44 % of the conductor's log in a 500-node deploy,
    written under the log handler's lock that every conductor thread shares. Our own lines
    say what the polls did. An operator who names paramiko in [DEFAULT]default_log_levels
    keeps that level: oslo.log sets it on the logger, and only an unset one is changed."""
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.WARNING)


quiet_paramiko()


class HostKeyError(Exception):
    pass


class TrustOnRequest(paramiko.MissingHostKeyPolicy):
    """Accept an unknown key only because the operator said so; log its fingerprint."""

    def missing_host_key(self, client, hostname, key):
        LOG.warning("Trusting unknown SSH host key %s %s of %s because "
                    "[provision_agent]accept_unknown_host_keys is set",
                    key.get_name(), key.fingerprint, hostname)


class Refuse(paramiko.MissingHostKeyPolicy):
    def missing_host_key(self, client, hostname, key):
        raise HostKeyError(f"host key {key.get_name()} {key.fingerprint} of {hostname} is not "
                           "pinned (driver_info/provision_host_key or "
                           "[provision_agent]ssh_known_hosts_file)")


def parse_public_key(text):
    """'ssh-ed25519 AAAA... [comment]' → paramiko key; ValueError when it is not one."""
    parts = (text or "").split()
    if len(parts) < 2:
        raise ValueError("expected '<type> <base64> [comment]'")
    try:
        return paramiko.PKey.from_type_string(parts[0], _b64decode(parts[1]))
    except Exception as exc:
        raise ValueError(f"not an SSH public key: {exc}") from exc


def fingerprint(text):
    """'SHA256:...' of a public key line, for logs (the key itself is long and public anyway)."""
    return parse_public_key(text).fingerprint


def _b64decode(data):
    return base64.b64decode(data.encode(), validate=True)


def load_private_key(path):
    """Raises OSError or paramiko.SSHException with a readable reason."""
    return paramiko.PKey.from_path(path)


def _known_name(host, port):
    return host if port == 22 else f"[{host}]:{port}"


def connect(host, port, user, key, host_key=None, known_hosts_file=None,
            accept_unknown=False, timeout=10):
    client = paramiko.SSHClient()
    name = _known_name(host, port)
    if known_hosts_file:
        client.load_host_keys(known_hosts_file)
    if host_key:
        pinned = parse_public_key(host_key)
        # A pin in driver_info replaces whatever known_hosts says about this address.
        client.get_host_keys().pop(name, None)
        client.get_host_keys().add(name, pinned.get_name(), pinned)
    client.set_missing_host_key_policy(TrustOnRequest() if accept_unknown else Refuse())
    try:
        client.connect(host, port=port, username=user, pkey=key, timeout=timeout,
                       banner_timeout=timeout, auth_timeout=timeout,
                       allow_agent=False, look_for_keys=False)
    except Exception:
        client.close()
        raise
    return client


def run(client, command, timeout):
    """Run a command; returns (exit status, stdout, stderr)."""
    _stdin, stdout, stderr = client.exec_command(command, timeout=timeout)
    out = stdout.read().decode(errors="replace")
    err = stderr.read().decode(errors="replace")
    return stdout.channel.recv_exit_status(), out, err


def upload(sftp, data, path, mode=0o600):
    tmp = path + ".part"
    with sftp.open(tmp, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    sftp.chmod(tmp, mode)
    sftp.posix_rename(tmp, path)


def read_file(sftp, path, offset=0, limit=None):
    """Bytes of a remote file from offset on (at most limit); None when it does not exist.
    A negative offset counts from the end: the last -offset bytes."""
    try:
        with sftp.open(path, "rb") as f:
            if offset < 0:
                offset = max(0, f.stat().st_size + offset)
            f.seek(offset)
            return f.read() if limit is None else f.read(limit)
    except FileNotFoundError:
        return None
    except IOError as exc:
        if getattr(exc, "errno", None) == 2:
            return None
        raise


def join(*parts):
    return posixpath.join(*parts)

