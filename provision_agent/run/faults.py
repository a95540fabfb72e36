"""Disk faults during a run: what the kernel and md say after each step, and what then happens.

After every step (and once more at the end) the kernel log since the run started is read for
I/O errors, and each array the run brought up is read for what md absorbed (its members'
bad-block logs, error counters and states). An error on a disk the plan names that no array
absorbed stops the run at once (DiskFault, exit 4): the message names the disk, the step and
the kernel's line. An error md absorbed on a member of a redundant array follows the array's
`on_member_failure`: "fail" (the default) stops the run the same way, naming the member;
"degrade" takes the member out of the array (mdadm --fail, --remove), the run goes on, and
the report and a `member_lost` event name it. After a stop, what the run mounted is unmounted
(the executor) and the volume groups, bcache devices and arrays it brought up are stopped here
(teardown), so that nothing keeps writing to the failing disk or to any other. A disk that
went away mid-run is told as that (DiskGone), naming the step and what the OS shows.
"""

import logging
import os
import re
from dataclasses import dataclass

from provision_agent.drivers import bcache, kernel_log, md_health
from provision_agent.errors import (
    CommandError,
    DiskFault,
    DiskGone,
    DiskStalled,
    ProvisionError,
)

LOG = logging.getLogger(__name__)

SYS_CLASS_BLOCK = "/sys/class/block"
REDUNDANT = (1, 4, 5, 6, 10)
SHOWN_LINES = 3


def kernel_name(path):
    return os.path.basename(os.path.realpath(path))


@dataclass(frozen=True)
class Located:
    """A kernel DeviceError placed on a planned disk: `disk` and `device` kernel names, the
    latter the partition the sector falls in (or the disk itself)."""
    disk: str
    device: str
    error: kernel_log.DeviceError


def _int(path):
    try:
        with open(path) as f:
            return int(f.read(64).strip())
    except (OSError, ValueError):
        return None


def locate(error, disks, sys_class_block=SYS_CLASS_BLOCK):
    """Where `error` happened, as a Located, or None when not on a disk in `disks` (kernel
    names): a disk's sector is placed in the partition holding it (sysfs start and size, in
    512-byte units as the kernel's sector is); a partition's name is placed on its disk."""
    name = error.device
    if name in disks:
        if error.sector is not None:
            base = os.path.join(sys_class_block, name)
            try:
                entries = sorted(os.listdir(base))
            except OSError:
                entries = []
            for entry in entries:
                start = _int(os.path.join(base, entry, "start"))
                size = _int(os.path.join(base, entry, "size"))
                if start is not None and size and start <= error.sector < start + size:
                    return Located(name, entry, error)
        return Located(name, name, error)
    parent = os.path.basename(os.path.dirname(os.path.realpath(
        os.path.join(sys_class_block, name))))
    if parent in disks and os.path.exists(os.path.join(sys_class_block, name, "partition")):
        return Located(parent, name, error)
    return None


def on_disks(device, knames, sys_class_block=None):
    """Whether device (a disk or a partition, any /dev path to it) is one of the disks
    `knames` (kernel names) or on one of them."""
    where = locate(kernel_log.DeviceError(kernel_name(device), None, None, ""), knames,
                   sys_class_block or SYS_CLASS_BLOCK)
    return where is not None


def step_text(steps):
    """"step 7/15 (mkfs: ext4 on /dev/vdb1)" for [(index, count, step)]."""
    return ", ".join(f"step {i}/{n} ({s.kind}: {s.description or s.kind})"
                     for i, n, s in steps)


def kernel_lines(located):
    lines = list(dict.fromkeys(loc.error.line for loc in located))
    more = f" (and {len(lines) - SHOWN_LINES} more lines)" if len(lines) > SHOWN_LINES else ""
    return "; ".join(lines[:SHOWN_LINES]) + more


STOPPED = ("Provision stopped there: nothing more was written to any disk, what it mounted "
           "was unmounted and the arrays, bcache devices and volume groups it brought up were "
           "stopped.")


def disk_fault_message(disk, located, where, cause=None):
    msg = (f"I/O error on disk {disk} during {where}: the kernel logged: "
           f"{kernel_lines(located)}. The disk fails I/O: replace it, or leave it out of the "
           f"layout. {STOPPED}")
    if cause is not None:
        # one line, as Ironic's last_error shows it: the command and its stderr's tail
        said = " ".join(str(cause).split()) or type(cause).__name__
        msg += f" The step's own error: {said[:500]}"
    return msg


def gone_text(disk, kname):
    """What a removed disk looks like to the OS (a virtio disk's removal logs nothing)."""
    return (f"disk {disk} went away (removed from the machine, or its controller lost it): the "
            f"kernel no longer lists it (no /sys/block/{kname})")


def naming(entries, knames):
    """The kernel's lines that name one of the disks `knames` or a partition of one."""
    if not knames:
        return []
    names = "|".join(re.escape(k) for k in knames)
    pattern = re.compile(rf"(?<![A-Za-z0-9])(?:{names})(?:p?[0-9]{{1,3}})?(?![A-Za-z0-9])")
    return [e.message for e in entries if pattern.search(e.message)]


def disk_gone_message(disk, kname, lines, where, cause=None):
    """One line: the step, the disk, what the OS shows and the kernel said, the step's own
    error when it had one (the watch's DiskGone already names the step and the disk)."""
    head = str(cause) if isinstance(cause, DiskGone) else f"{where}: {gone_text(disk, kname)}"
    shown = list(dict.fromkeys(lines))
    more = f" (and {len(shown) - SHOWN_LINES} more lines)" if len(shown) > SHOWN_LINES else ""
    said = (f"the kernel logged: {'; '.join(shown[:SHOWN_LINES])}{more}" if shown
            else "the kernel logged nothing about it")
    msg = f"{head}; {said}. {STOPPED}"
    if cause is not None and not isinstance(cause, (DiskGone, DiskStalled)):
        said = " ".join(str(cause).split()) or type(cause).__name__
        msg += f" The step's own error: {said[:500]}"
    return msg


def member_fault_message(array, member, disk, why, where, refused=None):
    head = (f"RAID{array['level']} {array['device']}: member {member} (disk {disk}) failed: "
            f"{why}; found after {where}.")
    if refused is not None:
        # degrade, but md cannot run without it (the last mirror, a third RAID6 member)
        said = " ".join(str(refused).split())[:300]
        return (f"{head} The array's on_member_failure is degrade, but md would not run "
                f"without it ({said}): replace the disks. {STOPPED}")
    return (f"{head} The array's on_member_failure is fail (the default): replace the disk, "
            f"or set on_member_failure: degrade to let the array run without the member. "
            f"{STOPPED}")


class FaultWatch:
    """Checks after each step of a real run (the executor calls `after`, then `final`)."""

    def __init__(self, runner, events, disk_names, sys_class_block=SYS_CLASS_BLOCK,
                 sys_block=md_health.SYS_BLOCK):
        self.runner, self.events = runner, events
        self.sys_class_block, self.sys_block = sys_class_block, sys_block
        self.disks = {kernel_name(d): d for d in disk_names}    # vdb -> the plan's name
        # those the kernel had when the run began: one of them missing later went away
        self.present = [k for k in self.disks if os.path.exists(
            os.path.join(sys_class_block, k))]
        self.log = kernel_log.KernelLog(runner)
        self.arrays = {}        # device -> {"device", "level", "policy", "members": {kname: path}}
        self.vgs = []           # volume groups the run created or activated
        self.luks = []          # mappings the run opened
        self.bcache = []        # backing devices the run registered
        self.cache_sets = []    # cache devices whose set the run made
        self.lost = []          # members taken out under on_member_failure: degrade
        self.absorbed = []      # kernel lines on members of arrays (for the report)

    def _bring_up(self, step):
        if step.kind in ("md_create", "md_assemble"):
            self.arrays[step.device] = {
                "device": step.device, "level": step.level,
                "policy": getattr(step, "on_member_failure", "fail"),
                "members": {kernel_name(m): m for m in step.members + step.spares}}
        elif step.kind in ("vg_create", "vg_activate"):
            self.vgs.append(step.name)
        elif step.kind == "luks_open":
            self.luks.append(step.name)
        elif step.kind == "bcache_create":
            self.bcache.append(step.backing)
            if step.cache and step.format_cache:
                self.cache_sets.append(step.cache)

    def after(self, done, failure=None):
        """After the steps `done` ([(index, count, step)]) ran: raise DiskFault when a disk
        failed I/O or a member failed under policy fail; `failure` is the steps' own error."""
        for _, _, step in done:
            self._bring_up(step)
        self._check(step_text(done), failure)

    def _located(self, entries):
        """The kernel's new device errors that are on the plan's disks."""
        return [loc for loc in (locate(e, self.disks, self.sys_class_block)
                                for e in kernel_log.device_errors(entries)) if loc]

    def gone(self):
        """The plan's disks (kernel names) that were there when the run began and are not."""
        return [k for k in self.present
                if not os.path.exists(os.path.join(self.sys_class_block, k))]

    def _check(self, where, failure):
        entries = self.log.new()
        gone = self.gone()
        if gone:
            # removed mid-run: said as that, whatever the tools met (or did not) after it
            raise DiskGone(disk_gone_message(self.disks[gone[0]], gone[0],
                                             naming(entries, gone), where, failure)) from failure
        found = self._located(entries)
        outside = [loc for loc in found if self._array_of(loc.device) is None]
        if failure is not None and found:
            outside = found     # the step failed and a disk said why: whatever it is under
        if outside:
            disk = self.disks[outside[0].disk]
            raise DiskFault(disk_fault_message(disk, outside, where, failure), disk,
                            where) from failure
        self.absorbed += [loc for loc in found if loc not in outside]
        if failure is None:
            self._check_arrays(found, where)

    def _array_of(self, kname):
        for array in self.arrays.values():
            if kname in array["members"] and array["level"] in REDUNDANT:
                return array
        return None

    def _check_arrays(self, found, where):
        for array in self.arrays.values():
            if array["level"] not in REDUNDANT:
                continue
            health = md_health.read(array["device"], self.sys_block)
            said = md_health.member_problems(health) if health else {}
            for kname in array["members"]:
                mine = [loc for loc in found if loc.device == kname]
                if mine:
                    said[kname] = "; ".join(filter(None, [
                        said.get(kname), f"the kernel logged: {kernel_lines(mine)}"]))
            for kname, why in said.items():
                member = array["members"].get(kname, f"/dev/{kname}")
                if any(x["member"] == member for x in self.lost):
                    continue
                self._member_failed(array, member, kname, why, where)

    def _member_failed(self, array, member, kname, why, where):
        where_on = locate(kernel_log.DeviceError(kname, None, None, ""), self.disks,
                          self.sys_class_block)
        disk = self.disks[where_on.disk] if where_on else f"/dev/{kname}"
        if array["policy"] != "degrade":
            raise DiskFault(member_fault_message(array, member, disk, why, where), disk, where)
        LOG.error("RAID%s %s: member %s (disk %s) failed: %s; on_member_failure is degrade: "
                  "taking it out of the array", array["level"], array["device"], member, disk,
                  why)
        try:
            md_health.remove_member(self.runner, array["device"], member)
        except CommandError as exc:
            raise DiskFault(member_fault_message(array, member, disk, why, where, exc), disk,
                            where) from exc
        lost = {"array": array["device"], "member": member, "disk": disk, "reason": why,
                "found_after": where}
        self.lost.append(lost)
        self.events.emit("member_lost", **lost)

    def final(self, count):
        """Once every step is done: the last look, and what md still has to do."""
        self._check(f"the last step ({count}/{count})", None)
        for array in self.arrays.values():
            health = md_health.read(array["device"], self.sys_block)
            if health and health.sync_action not in ("", "idle"):
                LOG.warning("%s: md's %s is at %s sectors when the run ends; md finishes it "
                            "in the installed system, and what it meets from here on is md's "
                            "to report", array["device"], health.sync_action,
                            health.sync_completed)

    def teardown(self):
        """After a stop (the executor unmounted first): the volume groups, encrypted mappings,
        bcache devices and their cache sets (through sysfs, each waited for at most
        bcache.WAIT) and arrays this run brought up, taken down in that order; best effort,
        each said."""
        for name in reversed(self.vgs):
            self._quiet(["vgchange", "-an", name])
        for name in reversed(self.luks):
            self._quiet(["cryptsetup", "close", name])
        for stop, devices in ((bcache.stop_backing, self.bcache),
                              (bcache.stop_set, self.cache_sets)):
            for device in reversed(devices):
                try:
                    stop(device, self.sys_class_block)
                except (OSError, ProvisionError) as exc:
                    LOG.error("after the stop: bcache on %s: %s", device, exc)
        for device in reversed(list(self.arrays)):
            self._quiet(["mdadm", "--stop", device])

    def _quiet(self, argv):
        res = self.runner.run(argv, check=False)
        if res.returncode != 0:
            LOG.error("after the stop: %s exited %s: %s", " ".join(argv), res.returncode,
                      res.stderr.strip()[:300])
