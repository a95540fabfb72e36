"""Reading one command's channel of an SSH session to the ramdisk, bounded: its output up to
a byte limit (or up to a marker), then its exit status, each within the session's deadline.
ssh.Session.run and ssh_after.run_after (a command that answers before it is sent anything)
read their channels here. session: anything with left() (seconds to its deadline) and check()
(LimitExceeded once the deadline passed)."""


class LimitExceeded(Exception):
    """The ramdisk took longer than one look may (it may be slow, or stalling on purpose)."""


class TooLarge(Exception):
    """The ramdisk answered with more than the conductor reads: not our ramdisk's answer."""


def receive(session, channel, limit, until=None):
    """The channel's output to its end, or until the bytes until were seen; TooLarge (the
    channel closed) past limit bytes."""
    data = bytearray()
    while until is None or until not in data:
        channel.settimeout(session.left())
        chunk = channel.recv(min(32768, max(1, limit + 1 - len(data))))
        if not chunk:
            break
        data += chunk
        if len(data) > limit:
            channel.close()
            raise TooLarge(f"the ramdisk answered a command with more than {limit} bytes")
        session.check()
    return bytes(data)


def exit_status(session, channel):
    """The command's exit status, waited for within the session's deadline."""
    if not channel.status_event.wait(session.left()):
        session.check()
        raise LimitExceeded("the ramdisk did not report a command's exit status")
    status = channel.recv_exit_status()
    # A connection shut down by the deadline ends the output like an exit would.
    session.check()
    return status
