"""What one poll of a deploying node costs the conductor: a fresh SSH connection per poll (what
the provision deploy interface does) against one connection kept open between polls.

    python benchmarks/ironic_ssh_poll.py [--polls 30]

Runs against a local sshd (root needed) the same remote.status() call the periodic task makes.
CPU is this process's own (the conductor side); the sshd's share is printed apart, because in
a deployment it is spent in each node's ramdisk, not on the conductor.
"""

import argparse
import os
import resource
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from benchmarks.proc_tree import tree_cpu_seconds  # noqa: E402
from ironic_driver.conversation import remote, ssh  # noqa: E402
from tests.ironic import realenv  # noqa: E402


def own_cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measure(label, polls, sshd, poll):
    c0, s0, t0 = own_cpu(), tree_cpu_seconds(sshd.proc.pid), time.monotonic()
    for _ in range(polls):
        poll()
    wall, cpu = time.monotonic() - t0, own_cpu() - c0
    sshd_cpu = tree_cpu_seconds(sshd.proc.pid) - s0
    print(f"{label}: wall {wall / polls * 1000:.1f} ms, conductor CPU "
          f"{cpu / polls * 1000:.1f} ms, sshd CPU {sshd_cpu / polls * 1000:.1f} ms per poll")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--polls", type=int, default=30)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ironic-ssh-poll-")
    sshd = realenv.Sshd(work).start()
    directory = os.path.join(work, "remote")
    os.makedirs(directory)
    key = ssh.load_private_key(sshd.client_key_file)

    def connect():
        return ssh.connect("127.0.0.1", sshd.port, "root", key, host_key=sshd.host_key,
                           deadline=3600)

    def fresh():
        client = connect()
        try:
            remote.status(client, directory, 0, 5)
        finally:
            client.close()

    try:
        measure("fresh connection per poll", args.polls, sshd, fresh)
        kept = connect()
        try:
            measure("connection kept open", args.polls, sshd,
                    lambda: remote.status(kept, directory, 0, 5))
        finally:
            kept.close()
        print(f"load average {os.getloadavg()[0]:.1f} (2 cores shared with other work)")
    finally:
        sshd.stop()


if __name__ == "__main__":
    main()
