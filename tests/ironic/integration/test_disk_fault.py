"""A disk's fault in the ramdisk, as a real Ironic's node records it (issue 57): provision's
exit 4 with its one-line message (the disk, the step, the kernel's line) is the first line of
the node's last_error, whole.

The stand-in ramdisk (the local sshd) runs a provision that fails as the real one does when
an image write meets an I/O error: the message made by run/faults.py's own builder, the
`result` event written through run/events.py, the "provision: error:" line and exit 4 as
cli/main.py gives them. (The fault itself, in qemu: tests/e2e/test_faults.py.)
"""

import json
import os
import sys

import pytest

from provision_agent.drivers import kernel_log
from provision_agent.run import faults
from tests import REPO_ROOT
from tests.ironic import realenv

KERNEL = ("I/O error, dev vdb, sector 20992 op 0x1:(WRITE) flags 0x8800 phys_seg 254 prio "
          "class 2")
MESSAGE = faults.disk_fault_message(
    "/dev/vdb", [faults.Located("vdb", "vdb1", kernel_log.DeviceError("vdb", 20992, "WRITE",
                                                                      KERNEL))],
    "step 9/12 (write_image: raw image http://192.0.2.1/data.img to /dev/vdb1)",
    OSError("writing /dev/vdb1 at byte 8388608 failed: Input/output error"))

FAILING = f"""#!{sys.executable}
import sys
sys.path.insert(0, {REPO_ROOT!r})
from types import SimpleNamespace
from provision_agent.run.events import Events
args = sys.argv[1:]
events = Events.from_conf(SimpleNamespace(
    events_file=args[args.index("--events_file") + 1], events_fd=None))
message = {MESSAGE!r}
print("2026-11-29 05:10:01,123 ERROR provision_agent.run.executor: step 9/12 (write_image) "
      "failed after 3.1s", file=sys.stderr)
events.result("failed", 4, message)
events.close()
print("provision: error: " + message, file=sys.stderr)
sys.exit(4)
"""


@pytest.fixture(scope="module")
def ironic(ramdisk, tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("ironic-disk-fault"))
    with realenv.with_script_provision(ramdisk, workdir, FAILING) as server:
        yield server


def test_a_disk_fault_is_one_line_of_last_error_naming_disk_step_and_kernel_line(
        ironic, ramdisk):
    assert "\n" not in MESSAGE
    with open(os.path.join(REPO_ROOT, "samples", "single-disk.json")) as f:
        layout = json.load(f)
    uuid = ironic.enroll("disk-fault", {
        "provision_ssh_address": "127.0.0.1", "provision_ssh_port": ramdisk.port,
        "provision_host_key": ramdisk.host_key,
    }, {"image_source": "http://127.0.0.1:9/i", "provision_layout": layout})
    ironic.set_state(uuid, "active")
    node = ironic.wait_state(uuid, ["active", "deploy failed"], 90)
    assert node["provision_state"] == "deploy failed", node["last_error"]
    assert node["driver_internal_info"]["provision_exit_code"] == 4
    first = node["last_error"].split("\n")[0]
    assert first == "provision exited with 4: " + MESSAGE, node["last_error"]
    for said in ("I/O error on disk /dev/vdb", "during step 9/12 (write_image:",
                 "the kernel logged: " + KERNEL):
        assert said in first
    print("last_error:", node["last_error"])
