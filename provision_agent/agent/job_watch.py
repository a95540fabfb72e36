"""Noticing in the ramdisk that the conductor's job exited, so that the next heartbeat says so
(agent_status "end", Ironic's ramdisk API 1.72) at once instead of the conductor finding out at
its next look.

The conductor starts provision detached in <job_dir>/<node UUID> (its [provision_agent]
remote_dir), and the wrapper renames the exit code into place only after provision exited
(ironic_driver/conversation/remote.py): the rename gives the file a new inode, so each exit is
reported once. The heartbeat is a hint and nothing more: the conductor reads the exit code
itself over SSH, and looks at a node at most once per poll_interval whatever the heartbeats say.
"""

import os

from provision_agent import binding

# [provision_agent]remote_dir on the conductor: keep the two defaults equal.
DEFAULT_JOB_DIR = "/run/provision-ironic"
EXIT_CODE = "exit_code"


class ExitWatch:
    def __init__(self, job_dir=DEFAULT_JOB_DIR):
        self.job_dir = job_dir
        self.reported = None

    def _mark(self, node):
        # A UUID only: the name comes from the API's answer and becomes a path.
        if not self.job_dir or not node or not binding.UUID_RE.fullmatch(node):
            return None
        try:
            st = os.stat(os.path.join(self.job_dir, node, EXIT_CODE))
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_mtime_ns)

    def pending(self, node):
        """The mark of node's job exit not reported yet, or None."""
        mark = self._mark(node)
        return mark if mark is not None and mark != self.reported else None
