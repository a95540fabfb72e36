"""One SSH command that answers before it is sent anything: what remote.start_bound needs to
check the ramdisk's binding and start the job in one round trip (one exec, where an SFTP read
of the binding and a command took two, 0.5 s under load in the lab's emulated ramdisk).

Everything is bounded as in ssh.Session.run: the session's deadline, and a byte limit on each
part of the output."""

import paramiko

from ironic_driver.conversation import channel as channels
from ironic_driver.conversation import ssh


def run_after(session, command, head_limit, marker, decide, limit=ssh.RUN_OUTPUT_BYTES):
    """session.run() of a command that first prints at most head_limit bytes, then the line
    marker, and only then reads its stdin: decide(those bytes) returns what to send it
    (bytes), or raises, which closes the channel before anything was sent (the command reads
    an end of file). (exit status, output text after the marker)."""
    end = b"\n" + marker.encode() + b"\n"
    try:
        channel = session.client.get_transport().open_session(timeout=session.left())
        channel.set_combine_stderr(True)
        channel.exec_command(command)
        data = channels.receive(session, channel, head_limit + len(end), until=end)
        if end not in data:
            channel.close()
            raise ssh.TooLarge(f"the ramdisk's command ended, or printed more than "
                               f"{head_limit} bytes, before its marker")
        head, rest = data.split(end, 1)
        try:
            stdin = decide(head)
        except BaseException:
            channel.close()
            raise
        channel.sendall(stdin)
        channel.shutdown_write()
        rest += channels.receive(session, channel, limit - len(rest))
        return channels.exit_status(session, channel), rest.decode(errors="replace")
    except (OSError, EOFError, paramiko.SSHException) as exc:
        session.check(exc)
        raise
