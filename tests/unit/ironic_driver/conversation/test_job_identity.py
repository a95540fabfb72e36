"""The job identity that lets a conductor adopt a job another one started: the commands run in
a local shell, as the ramdisk's sshd runs them, and the identity's way through job.begin on
Ironic's DB fixtures. tests/ironic/integration/test_failover.py proves it with two real
conductors."""

import subprocess
import time

from ironic_driver.conversation import job, remote
from tests.unit.ironic_driver import dbcase


def _sh(command):
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=10)


def _run_to_its_end(directory, runs, job):
    """Starts a fake provision as `job` in directory and waits for its exit code and for the
    wrapper to let go of the lock."""
    fake = directory.parent / "fake"
    fake.write_text(f'#!/bin/sh\necho run >>{runs}\nexit 0\n')
    fake.chmod(0o755)
    assert _sh(remote.prepare_command(str(directory), job)).stdout == ""
    command = remote.provision_argv(str(fake), "ironic")
    assert _sh(remote.start_command(str(directory), command, job)).returncode == 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if (directory / remote.EXIT_CODE).exists() and \
                subprocess.run(["flock", "-n", str(directory / remote.LOCK), "true"]).returncode \
                == 0:
            return
        time.sleep(0.05)
    raise AssertionError("the fake provision did not finish")


def test_the_same_job_finished_is_found_not_started_again(tmp_path):
    """A conductor died between starting a job and recording it; the job ended before the
    next conductor looked: that one finds it finished, with its files."""
    directory, runs = tmp_path / "d", tmp_path / "runs"
    _run_to_its_end(directory, runs, "job-1")
    again = _sh(remote.prepare_command(str(directory), "job-1"))
    assert again.returncode == 0 and again.stdout.strip() == remote.FINISHED
    assert (directory / remote.EXIT_CODE).read_text().strip() == "0"
    assert (directory / remote.EVENTS).exists()
    assert runs.read_text() == "run\n"


def test_an_earlier_jobs_files_are_cleared_for_a_new_job(tmp_path):
    """The ramdisk kept an earlier job's files (a cleaning before this deploy, in the same
    boot): another identity, so they go and the new job starts."""
    directory, runs = tmp_path / "d", tmp_path / "runs"
    _run_to_its_end(directory, runs, "cleaning")
    fresh = _sh(remote.prepare_command(str(directory), "deploy"))
    assert fresh.returncode == 0 and fresh.stdout == ""
    assert not (directory / remote.EXIT_CODE).exists()
    assert not (directory / remote.JOB).exists()


def test_without_an_identity_a_finished_run_is_cleared_as_before(tmp_path):
    """A node whose job began before the identity existed (a conductor upgraded mid-deploy)."""
    directory, runs = tmp_path / "d", tmp_path / "runs"
    _run_to_its_end(directory, runs, None)
    assert _sh(remote.prepare_command(str(directory))).stdout == ""
    assert not (directory / remote.EXIT_CODE).exists()


class TestJobIdentity(dbcase.NodeTestCase):
    def setUp(self):
        super().setUp()
        self.node = self.make_node(driver_info={"provision_ssh_address": "192.0.2.10"},
                                   instance_info={"image_source": "http://x/img"})

    def test_each_job_gets_its_own_identity_and_the_start_carries_it(self):
        job.begin(self.node)
        first = self.node.driver_internal_info["provision_job"]
        job.begin(self.node)
        second = self.node.driver_internal_info["provision_job"]
        assert first and second and first != second
        self.deploy_waiting(provision_job=second)
        start = self.follow_once(False, {"exit_code": None, "events": [],
                                         "events_offset": 0, "tail": ""})
        assert start.call_args.kwargs["job"] == second
        # the job it found is followed as if this conductor had started it
        assert self.node.driver_internal_info["provision_phase"] == "running"


def test_the_wrapper_says_when_it_started_provision_by_the_ramdisks_clock(tmp_path):
    """The wrapper's start event carries the time it started provision (the ramdisk's clock),
    so provision's own start-up and planning can be told from the SSH start before it."""
    directory, runs = tmp_path / "d", tmp_path / "runs"
    before = time.time()
    _run_to_its_end(directory, runs, "job-1")
    first, *_, last = remote.parse_events((directory / remote.EVENTS).read_bytes())[0]
    assert first["event"] == "wrapper" and first["status"] == "started"
    assert before - 1 <= first["time"] <= time.time()
    assert last == {"event": "wrapper", "status": "exited", "exit_code": 0}
