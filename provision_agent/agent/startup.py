"""How provision-ironic-agent starts: its options, and the wait for /init's network.

ramdisk/init starts the agent before its wait for the network, with --after naming the file
it writes when that wait is over: the agent's Python start and imports (requests, tenacity:
about a second under the lab's emulation) then go on beside the DHCP and RA exchanges
instead of after them, before the first heartbeat (issue 58).
"""

import argparse
import logging
import os
import time

from provision_agent.agent.host import DEFAULT_HOST_KEY
from provision_agent.agent.job_watch import DEFAULT_JOB_DIR

LOG = logging.getLogger("provision-ironic-agent")

# [provision_agent]binding_dir on the conductor: keep the two defaults equal. Outside what the
# image's chroot gets of /run (provision_agent/drivers/chroot.py).
DEFAULT_BINDING_DIR = "/run/provision-ironic-agent"
# /init's network wait ends by its deadline (netup.sh NET_DEADLINE, 60 s), a margin beyond it
AFTER_SECONDS = 90.0
AFTER_POLL = 0.1


def after_network(path, seconds, clock=time.monotonic, sleep=time.sleep):
    """Returns once path exists, or seconds after the call (said in the log); at once without
    a path."""
    if not path:
        return
    deadline = clock() + seconds
    while not os.path.exists(path):
        if clock() >= deadline:
            LOG.warning("%s did not appear within %.0f s: looking up without waiting for "
                        "the ramdisk's network", path, seconds)
            return
        sleep(AFTER_POLL)


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="provision-ironic-agent",
        description="Find this machine's node in Ironic (lookup by MAC) and heartbeat, so that "
                    "the conductor's provision deploy interface learns where to reach the "
                    "ramdisk over SSH and which host key to expect. Settings come from the "
                    "kernel command line (ipa-api-url, ipa-agent-token, ipa-insecure); the "
                    "options override them.")
    p.add_argument("--cmdline_file", default="/proc/cmdline",
                   help="Kernel command line to read (default %(default)s).")
    p.add_argument("--api_url", help="Ironic API URL (default: ipa-api-url).")
    p.add_argument("--mac", action="append", help="MAC address to look up by (repeatable; "
                   "default: every Ethernet NIC's).")
    p.add_argument("--address", help="Address to announce (default: the source address of "
                   "the route to the API).")
    p.add_argument("--ssh_port", type=int, default=22, help="sshd's port (default 22).")
    p.add_argument("--host_key_file", default=DEFAULT_HOST_KEY,
                   help="SSH host public key to report (default %(default)s).")
    p.add_argument("--binding_dir", default=DEFAULT_BINDING_DIR,
                   help="Where the node binding the conductor checks is written (root-only; "
                        "default %(default)s, the conductor's [provision_agent]binding_dir).")
    p.add_argument("--job_dir", default=DEFAULT_JOB_DIR,
                   help="Where the conductor runs its job (its [provision_agent]remote_dir; "
                        "default %(default)s): when the job's exit code appears there, the "
                        "next heartbeat goes at once and says so, so the conductor need not "
                        "wait for its next look.")
    p.add_argument("--interval", type=float, default=60,
                   help="Seconds between heartbeats once settled (default 60; Ironic's "
                        "[api]ramdisk_heartbeat_timeout is 300).")
    p.add_argument("--after", metavar="FILE",
                   help="Look the machine up only once FILE exists (ramdisk/init writes it "
                        "when its wait for the network is over), waiting at most "
                        "--after_seconds: started before that, the agent has its imports done "
                        "by then.")
    p.add_argument("--after_seconds", type=float, default=AFTER_SECONDS,
                   help="The longest wait for --after's file (default %(default)s); then the "
                        "lookup goes ahead without it, retried as without a network.")
    p.add_argument("--debug", action="store_true")
    return p.parse_args(argv)
