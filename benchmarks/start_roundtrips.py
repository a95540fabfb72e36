"""The conductor's start of a job over SSH, the old way and the new, against our ramdisk in the
VM bench (issue 58; a benchmark, not a test).

old: the binding read over SFTP (remote.verify_binding), then the one command that takes the
document on stdin and starts the job (remote.start_with_input_command);
new: both in one command (remote.start_bound: the binding printed, checked, then `go` and the
document). Each start is a fresh SSH connection as the conductor makes it
(ironic_driver.conversation.ssh.connect, the host key pinned), a new job directory, and a
"provision" that is /bin/true; the two ways alternate, timed by the host's monotonic clock:

    python3 -m benchmarks.start_roundtrips [--local] [ROUNDS]

--local: against the integration suite's local sshd (tests/ironic/realenv.Sshd) instead of a
VM: no emulation, what the round trips alone cost.
"""

import os
import statistics
import sys
import tempfile
import time

from ironic_driver.conversation import remote, ssh
from provision_agent import binding
from tests.vmbench import VM
from tests.vmbench.ramdisk import client_key

NODE = "5a1d1f0e-8b2c-4f6b-9f3d-7c0e2a4b6d88"
TOKEN = "the-token"
BINDINGS = "/run/provision-bench-binding"
DOCUMENT = '{"instance_info": {"image_source": "http://x/y"}}\n' * 40


def one(target, way, n):
    """(connect s, start s) of one start; target: (port, key, host key, bindings, jobs)."""
    port, key, host_key, bindings, jobs = target
    began = time.monotonic()
    session = ssh.connect("127.0.0.1", port, "root", key, host_key=host_key, timeout=30)
    connected = time.monotonic()
    directory, command = f"{jobs}/{way}-{n}", ["/bin/true"]
    try:
        if way == "old":
            remote.verify_binding(session, bindings, NODE, TOKEN)
            fresh = remote.start(session, directory, DOCUMENT, command, job=f"j{n}")
        else:
            fresh = remote.start(session, directory, DOCUMENT, command, job=f"j{n}",
                                 bound=(bindings, NODE, TOKEN))
    finally:
        session.close()
    assert fresh, f"{way} {n} did not start"
    return connected - began, time.monotonic() - connected


def rounds_against(target, rounds):
    times = {"old": [], "new": []}
    for n in range(rounds):
        for way in (("old", "new") if n % 2 == 0 else ("new", "old")):
            times[way].append(one(target, way, n))
    return times


def in_vm(rounds):
    key = ssh.load_private_key(str(client_key()))
    with VM(disks=1, disk_size="1G", name="start-roundtrips") as vm:
        vm.write_text(f"{BINDINGS}/{NODE}", binding.render(NODE, TOKEN))
        vm.ssh(f"chmod 700 {BINDINGS}; mkdir -p /tmp/jobs")
        host_key = vm.host_public_key or vm.ramdisk.host_public_key
        times = rounds_against((vm.port, key, host_key, BINDINGS, "/tmp/jobs"), rounds)
        got = vm.ssh("cat /tmp/jobs/new-0/input.json").stdout
    assert got == DOCUMENT, "the new start did not deliver the document"
    return times


def local(rounds):
    from tests.ironic import realenv
    with tempfile.TemporaryDirectory() as work:
        sshd = realenv.Sshd(work).start()
        try:
            bindings = os.path.join(work, "binding")
            binding.write(bindings, NODE, TOKEN)
            key = ssh.load_private_key(sshd.client_key_file)
            target = (sshd.port, key, sshd.host_key, bindings, os.path.join(work, "jobs"))
            times = rounds_against(target, rounds)
            with open(os.path.join(work, "jobs", "new-0", "input.json")) as f:
                assert f.read() == DOCUMENT, "the new start did not deliver the document"
        finally:
            sshd.stop()
    return times


def main(argv):
    where = local if argv[:1] == ["--local"] else in_vm
    argv = argv[1:] if argv[:1] == ["--local"] else argv
    times = where(int(argv[0]) if argv else 8)
    for way, rows in times.items():
        connect = statistics.median(r[0] for r in rows)
        start = statistics.median(r[1] for r in rows)
        print(f"{way}: {len(rows)} starts, median connect {connect:.3f} s, median binding + "
              f"upload + start {start:.3f} s (each: "
              + ", ".join(f"{r[1]:.3f}" for r in rows) + ")")
    ratio = statistics.median(r[1] for r in times["new"]) / statistics.median(
        r[1] for r in times["old"])
    print(f"new/old, binding + upload + start: {ratio:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
