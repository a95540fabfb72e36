"""SSH to the ramdisk with paramiko: key authentication only, host key pinned.

A host key is trusted when it equals driver_info/provision_host_key, or is listed for the
address in the configured known_hosts file. Anything else is refused unless the operator set
accept_unknown_host_keys, which goes through TrustOnRequest below (never paramiko's
auto-add: the decision must be visible in our code and logged).
"""

import base64
import contextlib
import logging
import posixpath
import socket
import threading
import time

try:
    import paramiko
except ImportError as exc:
    # Ironic shows this text when it cannot load the interface: say what to install.
    raise ImportError(f"the provision deploy interface needs paramiko ({exc}): install it "
                      "on the conductor with pip install 'provision-agent[ironic]'") from exc

from ironic_driver import report
from ironic_driver.conversation import channel as channels
from ironic_driver.conversation.channel import (  # noqa: F401 (callers name ssh.TooLarge)
    LimitExceeded,
    TooLarge,
)

LOG = logging.getLogger(__name__)

# What the conductor's own commands in the ramdisk print: a word, or an error line.
RUN_OUTPUT_BYTES = 16 * 1024


def quiet_paramiko(logger=logging.getLogger("paramiko")):
    """paramiko logs each step of every SSH handshake at DEBUG, about 45 lines a connection:
    with Ironic's debug = true they were 44 % of the conductor's log in a 500-node deploy,
    written under the log handler's lock that every conductor thread shares. Our own lines
    say what the polls did. An operator who names paramiko in [DEFAULT]default_log_levels
    keeps that level: oslo.log sets it on the logger, and only an unset one is changed."""
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.WARNING)


class BoundedRecords(logging.Filter):
    """paramiko logs what the server sent, whole: a line of the banner, a disconnect's or an
    auth banner's text, and (at ERROR, with its traceback) the exception that quotes them. A
    ramdisk's 1 MB banner line was a 1 MB ERROR line with its escape sequences. Each record
    of paramiko's leaves cleaned and cut (report.bounded), whatever level it is logged at."""

    def filter(self, record):
        try:
            text = record.getMessage()
        except Exception:   # a message that does not format: what it was made of
            text = f"{record.msg!r} % {record.args!r}"
        record.msg, record.args = report.bounded(text, report.LOG_CHARS), None
        return True


# A filter applies to the records of the logger it is on, not its children's: every logger
# paramiko logs the transport, its channels and SFTP on (util.get_logger's names).
PARAMIKO_LOGGERS = ("paramiko", "paramiko.transport", "paramiko.transport.sftp",
                    "paramiko.sftp", "paramiko.hostkeys", "paramiko.auth_strategy")


def bound_paramiko_records(names=PARAMIKO_LOGGERS):
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, BoundedRecords) for f in logger.filters):
            logger.addFilter(BoundedRecords())


quiet_paramiko()
bound_paramiko_records()


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


class Unreachable(OSError):
    """No TCP connection to the ramdisk's SSH port (refused, or timed out): a machine still
    booting, not a ramdisk that holds the conductor."""


class BrokenProtocol(Exception):
    """The ramdisk's SFTP server broke the protocol (a garbage packet, an answer of the wrong
    kind, a status message that is not UTF-8): our ramdisk's sftp-server never does, and
    asking again gets the same."""


# paramiko's errors for such answers (it decodes text strictly): neither SSHException nor OSError
_BROKEN = (paramiko.sftp.SFTPError, UnicodeError)


class Session:
    """One SSH connection to a ramdisk that ends, whatever the ramdisk does, by its deadline.

    paramiko's timeouts bound each receive, not an operation: a ramdisk that answers a byte
    at a time, or serves /dev/zero, keeps one going as long as it likes. So the whole
    connection gets a deadline: a timer shuts the socket down when it passes, every blocked
    call fails, and the look ends with LimitExceeded. Every read also names its byte limit."""

    def __init__(self, client, sock, seconds, started):
        self.client = client
        self._sock = sock
        self.seconds = seconds
        self.expired = False
        self._end = started + seconds
        self._sftp = None
        self._timer = threading.Timer(max(0.0, self._end - time.monotonic()), self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _expire(self):
        self.expired = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def left(self):
        """Seconds until the deadline (at least a small positive number, for timeouts)."""
        return max(0.05, self._end - time.monotonic())

    def check(self, exc=None):
        """LimitExceeded when the deadline passed (exc: what the shutdown made fail)."""
        if self.expired or time.monotonic() >= self._end:
            raise LimitExceeded(f"the ramdisk did not finish answering within {self.seconds:g} "
                                "s; the connection was closed") from exc

    def sftp(self):
        if self._sftp is None:
            self._sftp = self.client.open_sftp()
        self._sftp.get_channel().settimeout(self.left())
        return self._sftp

    def run(self, command, limit=RUN_OUTPUT_BYTES, stdin=None, raw=False):
        """(exit status, output text: stdout and stderr together), at most limit bytes;
        stdin: bytes sent to the command's standard input, then closed. raw: bytes out."""
        try:
            channel = self.client.get_transport().open_session(timeout=self.left())
            channel.set_combine_stderr(True)
            channel.exec_command(command)
            if stdin is not None:   # bounded by the session's deadline, as everything
                channel.sendall(stdin)
                channel.shutdown_write()
            data = channels.receive(self, channel, limit)
            status = channels.exit_status(self, channel)
            return status, data if raw else data.decode(errors="replace")
        except (OSError, EOFError, paramiko.SSHException) as exc:
            self.check(exc)
            raise

    def read(self, path, offset=0, limit=4096):
        """read_file() of path over this session."""
        try:
            data = read_file(self.sftp(), path, offset, limit)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            self.check(exc)
            raise
        except _BROKEN as exc:
            self._broken(exc)
        self.check()
        return data

    def upload(self, data, path, mode=0o600):
        try:
            upload(self.sftp(), data, path, mode)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            self.check(exc)
            raise
        except _BROKEN as exc:
            self._broken(exc)

    def _broken(self, exc):
        self.check(exc)
        raise BrokenProtocol(f"its SFTP server broke the protocol ({type(exc).__name__}: "
                             f"{report.bounded(exc, 200)})") from None

    def close(self):
        self._timer.cancel()
        self.client.close()
        with contextlib.suppress(OSError):
            self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def connect(host, port, user, key, host_key=None, known_hosts_file=None,
            accept_unknown=False, timeout=10, deadline=None):
    """A Session whose every step, the handshake included, ends within deadline seconds
    (default: timeout)."""
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
    started = time.monotonic()
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        raise Unreachable(f"cannot connect to {host} port {port}: "
                          f"{type(exc).__name__}: {exc}") from exc
    session = Session(client, sock, deadline or timeout, started)
    try:
        client.connect(host, port=port, username=user, pkey=key, timeout=timeout,
                       banner_timeout=timeout, auth_timeout=timeout, sock=sock,
                       allow_agent=False, look_for_keys=False)
    except (OSError, EOFError, paramiko.SSHException) as exc:
        session.close()
        session.check(exc)
        raise
    except BaseException:
        session.close()
        raise
    return session


def upload(sftp, data, path, mode=0o600):
    tmp = path + ".part"
    with sftp.open(tmp, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    sftp.chmod(tmp, mode)
    sftp.posix_rename(tmp, path)


def read_file(sftp, path, offset=0, limit=4096):
    """At most limit bytes of a remote file from offset on; None when it does not exist.
    A negative offset counts from the end: the last -offset bytes (as the file's size says:
    a device or a pipe has none, and is read from its start)."""
    try:
        with sftp.open(path, "rb") as f:
            if offset < 0:
                offset = max(0, f.stat().st_size + offset)
            f.seek(offset)
            return f.read(limit)
    except FileNotFoundError:
        return None
    except IOError as exc:
        if getattr(exc, "errno", None) == 2:
            return None
        raise


def join(*parts):
    return posixpath.join(*parts)
