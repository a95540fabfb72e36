"""Scale check (not a test): one conductor, N nodes deploying at once with the provision
interface against one local sshd standing in for N ramdisks, whose `provision` only sleeps.

    python benchmarks/ironic_scale.py [--nodes 50] [--sleep 20] [--poll 2]

Prints the time from the deploy requests to all nodes active, and the most threads the
Ironic processes had meanwhile (a conductor holding a worker per deploy would show N more).
Needs root (sshd), ironic and paramiko in the running venv.
"""

import argparse
import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from tests.ironic import realenv  # noqa: E402


def threads_of_tree(pid):
    """Threads of pid and its descendants (the all-in-one ironic forks its services)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            total += len(os.listdir(f"/proc/{p}/task"))
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=50)
    ap.add_argument("--sleep", type=int, default=20)
    ap.add_argument("--poll", type=int, default=2)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ironic-scale-")
    fake = os.path.join(work, "fake-provision")
    with open(fake, "w") as f:
        f.write(f"#!/bin/sh\necho fake provision \"$@\"\nsleep {args.sleep}\nexit 0\n")
    os.chmod(fake, 0o755)
    sshd = realenv.Sshd(work).start()
    ironic = realenv.Ironic(work, {
        "ssh_private_key_file": sshd.client_key_file, "poll_interval": args.poll,
        "deploy_timeout": 600, "data_driver": "native", "provision_command": fake,
        "remote_dir": os.path.join(work, "remote")})
    try:
        ironic.start()
        with open(os.path.join(ROOT, "samples", "single-disk.json")) as f:
            layout = json.load(f)
        uuids = []
        for i in range(args.nodes):
            node = ironic.request("POST", "/v1/nodes", {
                "name": f"n{i}", "driver": "fake-hardware", "deploy_interface": "provision",
                "driver_info": {"provision_ssh_address": "127.0.0.1",
                                "provision_ssh_port": sshd.port,
                                "provision_host_key": sshd.host_key},
                "instance_info": {"image_source": "http://127.0.0.1:9/i",
                                  "provision_layout": layout}}).json()
            uuids.append(node["uuid"])
        for target, state in (("manage", "manageable"), ("provide", "available")):
            for u in uuids:
                ironic.set_state(u, target)
            for u in uuids:
                ironic.wait_state(u, [state], 120)
        base_threads = threads_of_tree(ironic.proc.pid)
        t0 = time.monotonic()
        for u in uuids:
            ironic.set_state(u, "active")
        peak, states = base_threads, {}
        while time.monotonic() - t0 < 900:
            peak = max(peak, threads_of_tree(ironic.proc.pid))
            nodes = ironic.get("/v1/nodes?fields=uuid,provision_state")["nodes"]
            states = {}
            for n in nodes:
                states[n["provision_state"]] = states.get(n["provision_state"], 0) + 1
            if states.get("active", 0) + states.get("deploy failed", 0) == args.nodes:
                break
            time.sleep(0.5)
        elapsed = time.monotonic() - t0
        print(f"nodes={args.nodes} provision_sleep={args.sleep}s poll={args.poll}s "
              f"states={states} time_to_all_done={elapsed:.1f}s "
              f"threads_before={base_threads} threads_peak={peak}")
    finally:
        ironic.stop()
        sshd.stop()
        print(f"workdir {work}")


if __name__ == "__main__":
    main()
