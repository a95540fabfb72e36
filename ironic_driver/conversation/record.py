"""Recording a job's progress in the node: a database-write turn (turns.py), the exclusive
lock, the save; resuming the deploy or the cleaning, or failing it."""

from ironic.common import states
from ironic.conductor import deployments
from ironic.conductor import utils as manager_utils

from ironic_driver import report
from ironic_driver.conversation import job, timeouts, turns

WRITER = turns.WRITER
PREFIX = job.PREFIX


def save(task, updates, touch=False, retry_lock=True, still=job.ramdisk_expected):
    """Write under an exclusive lock; False when the node moved on meanwhile (still(node) no
    longer holds). touch: move the node's provisioning time too (timeouts.py)."""
    info = task.node.driver_internal_info
    if still(task.node) and all(info.get(k) == v for k, v in updates.items()):
        # Most polls of a running provision change nothing: no lock, no database write.
        return True
    try:
        if not take(task, updates, retry_lock, still):
            return False
        if touch:
            timeouts.touch(task.node)
        task.node.save()
    finally:
        # No turn is held past the write: the look may go on to SSH (a heartbeat starting
        # the job), and a slow ramdisk must not keep other nodes from being recorded.
        WRITER.leave()
    return True


def take(task, updates, retry_lock=True, still=job.ramdisk_expected):
    """The writer's turn, the exclusive lock and updates set on the node (not saved);
    False when the node moved on meanwhile (still(node), checked under the lock, is false)."""
    WRITER.enter()
    if task.shared:
        task.upgrade_lock(purpose="recording provision progress", retry=retry_lock)
    node = task.node
    if not still(node):
        return False
    for key, value in updates.items():
        node.set_driver_internal_info(key, value)
    return True


def resume_deploy(task, spawn):
    """What the conductor's continue_node_deploy does, on the lock this task already holds.
    notify_conductor_resume_deploy would save our fields, release the lock and have the
    conductor take it again: three database writes more per node, each one that sqlite
    may refuse while another writer is in, and at 500 nodes the finished provisions queued
    up behind them. Here the resume event saves our fields with the new state, and the
    worker that runs the remaining deploy steps keeps the lock."""
    task.process_event("resume")
    task.set_spawn_error_hook(manager_utils.spawn_deploying_error_handler, task.node)
    task.spawn_after(spawn, deployments.continue_node_deploy, task)


def fail(task, message):
    """Fail the deploy or the cleaning with message in last_error. Whatever message quotes
    (a ramdisk's output or SSH error, a heartbeat's text) goes in cleaned and bounded."""
    message = report.bounded(message, report.MESSAGE_CHARS)
    WRITER.enter()
    if task.shared:
        task.upgrade_lock(purpose="failing a provision job")
    node = task.node
    if node.provision_state not in job.WAIT_STATES:
        return
    node.set_driver_internal_info(PREFIX + "phase", "failed")
    if node.provision_state == states.CLEANWAIT:
        manager_utils.cleaning_error_handler(task, message)
    elif node.provision_state == states.SERVICEWAIT:
        manager_utils.servicing_error_handler(task, message)
    else:
        manager_utils.deploying_error_handler(task, f"Deploy of node {node.uuid} failed: "
                                                    f"{message}", message)
