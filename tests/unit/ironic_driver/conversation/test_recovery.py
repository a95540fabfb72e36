"""Recovery keys as the ramdisk leaves them: read bounded, kept only if they are sealed."""

import json
from unittest import mock

import pytest
from ironic.conductor import task_manager

from ironic_driver.conversation import follow, job, recovery, remote
from tests.unit.ironic_driver import dbcase
from tests.unit.ironic_driver.conversation.test_heartbeat import KEY as HOST_KEY
from tests.unit.ironic_driver.conversation.test_remote import Client

SEALED = ("-----BEGIN AGE ENCRYPTED FILE-----\nYWdlLWVuY3J5cHRpb24ub3JnL3YxCi0+IFgyNTUx\n"
          "-----END AGE ENCRYPTED FILE-----\n")
KEY = {"name": "cryptos", "device": "/dev/md/os",
       "luks_uuid": "0b0c1a6e-5d2e-4b7a-9d0f-2c1e5f7a9b3c", "age": SEALED}


def test_an_exit_0_brings_the_sealed_keys_back(tmp_path):
    (tmp_path / remote.EXIT_CODE).write_text("0\n")
    (tmp_path / recovery.FILE).write_text(json.dumps([KEY]))
    assert remote.status(Client(), str(tmp_path), 0, 3)["recovery_keys"] == [KEY]


def test_without_encryption_there_is_nothing_to_bring(tmp_path):
    (tmp_path / remote.EXIT_CODE).write_text("0\n")
    assert remote.status(Client(), str(tmp_path), 0, 3)["recovery_keys"] is None


@pytest.mark.parametrize("text, why", [
    ("[", "not JSON"),
    ("[]", "not a list of 1 to"),
    (json.dumps([dict(KEY, extra="x")]), "is not {name, device, luks_uuid, age}"),
    (json.dumps([dict(KEY, age="the passphrase in the clear")]), "is not age ciphertext"),
    (json.dumps([dict(KEY, name="x" * 129)]), "bounded strings"),
])
def test_anything_else_is_refused_as_a_bad_ramdisk(tmp_path, text, why):
    (tmp_path / remote.EXIT_CODE).write_text("0\n")
    (tmp_path / recovery.FILE).write_text(text)
    with pytest.raises(remote.BadRamdisk, match=why):
        remote.status(Client(), str(tmp_path), 0, 3)


def test_an_endless_file_is_read_to_its_limit_only(tmp_path):
    (tmp_path / remote.EXIT_CODE).write_text("0\n")
    (tmp_path / recovery.FILE).write_bytes(b"[" * (recovery.MAX_BYTES * 3))
    client = Client()
    with pytest.raises(remote.BadRamdisk, match="more than"):
        remote.status(client, str(tmp_path), 0, 3)
    assert client.sftp.bytes_read <= recovery.MAX_BYTES + 64 + remote.TAIL_BYTES


def test_provision_is_told_where_to_leave_them_and_erase_is_not():
    run = remote.start_command("/run/p/n1", ["/usr/bin/provision", "--data_driver", "ironic"])
    assert "--recovery_key_file /run/p/n1/recovery-keys.json" in run
    erase = remote.start_command("/run/p/n1", ["/usr/bin/provision", "erase"])
    assert "--recovery_key_file" not in erase
    # a new job never finds an earlier one's keys
    assert "recovery-keys.json" in remote.prepare_command("/run/p/n1", "job-1")


class TestIntoTheNodeOnly(dbcase.NodeTestCase):
    def setUp(self):
        super().setUp()
        self.node = self.make_node(driver_info={}, instance_info={})

    def test_an_exit_0_keeps_the_keys_in_driver_internal_info_and_nowhere_else(self):
        self.deploy_waiting(provision_phase="running", provision_ssh_address="192.0.2.20",
                            provision_ssh_port=22, provision_host_key=HOST_KEY)
        with mock.patch.object(follow, "_resume") as resume:
            self.follow_once(True, {"exit_code": 0, "events": [{"event": "done"}],
                                    "events_offset": 10, "tail": "ok",
                                    "recovery_keys": [KEY]})
        updates = resume.call_args.args[2]
        self.assertEqual([KEY], updates["provision_recovery_keys"])
        self.assertNotIn(SEALED, json.dumps(updates["provision_events"]))

    def test_the_next_job_forgets_them_with_the_disks_it_erases_or_rewrites(self):
        self.deploy_waiting(provision_recovery_keys=[KEY])
        with task_manager.acquire(self.context, self.node.uuid) as task:
            job.begin(task.node)
            self.assertNotIn("provision_recovery_keys", task.node.driver_internal_info)
