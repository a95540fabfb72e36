"""Walk the plan's steps in order and carry each out through its driver (a run of partition
tables, each on its own disk, at once).

The executor holds the little state a run needs (what is mounted, which partitions are kept,
the UUIDs it saw) and no policy: what to do and in which order is the planner's. Whatever
happens, the target filesystems are unmounted at the end.
"""

import logging
import os
import time

from provision_agent.drivers import (
    bcache,
    blockinfo,
    lvm,
    md,
    mkfs,
    mount,
    partitions,
    udev,
    wipe,
)
from provision_agent.errors import DiskFault, DiskGone, DiskStalled, MachineMismatch, Problem
from provision_agent.run import crypt_steps, kept_steps, system_steps, target_files

LOG = logging.getLogger(__name__)


# Partition tables written at the same time at most: enough for a full disk shelf, while a
# bigger one still gets a bounded number of tool processes.
TABLES_AT_ONCE = 16


def _tables_at(steps, index):
    """The steps from index on that run together: a run of partition_table steps (each on its
    own disk, the planner puts them one after another), else the one step."""
    end = index + 1
    if steps[index].kind == "partition_table":
        disks = {steps[index].disk}
        while (end < len(steps) and steps[end].kind == "partition_table"
               and steps[end].disk not in disks):
            disks.add(steps[end].disk)
            end += 1
    return steps[index:end]


def _named(step):
    """A step as a failure names it: its description, else its kind and device."""
    where = step.args.get("device") or step.args.get("disk") or ""
    return step.description or f"{step.kind} {where}".strip()


class Executor:
    def __init__(self, runner, events, target_root, options=None, layout=None, faults=None):
        self.runner = runner
        self.faults = faults        # a real run's faults.FaultWatch (run/faults.py)
        self.events = events
        self.root = target_root
        self.options = options or {}
        self.layout = layout        # the resolved layout, for plug-ins (plugin_context.py)
        self.mounts = mount.Mounts(runner, target_root)
        self.labels = {}            # disk -> partition table label
        self.kept = set()           # partition devices left intact
        self.filesystems = []       # what mkfs made, with UUIDs
        self.results = []
        self.failed_step = None     # "step 3/9 (mkfs /dev/vdb1)": the first that failed
        self.keep_numbers = {}      # disk -> partition numbers the table must keep
        self.new_parts = {}         # disk -> its new partitions' step args, in plan order
        self.in_table = set()       # partition devices already written with their table
        self.tables = {}            # disk -> {number: (start, size)}: the planned table
                                    # (512-byte units)
        self.table_follows = set()  # disks a later step writes a table onto and re-reads:
                                    # a partition_table, or a disk or qcow2 image written whole
        self.wiped = set()          # disks a wipe step clears
        self.appended = set()       # disks a configdrive partition is added to
        self.crypt = crypt_steps.CryptSteps(runner, target_root, self.options)
        self.files = target_files.TargetFiles(runner, target_root, self.mounts)
        # kind -> handler(step): the one table steps are dispatched through; a plug-in's
        # kinds are added when its first step comes (extensions.py)
        self.handlers = {
            "wipe": self.do_wipe, "partition_table": self.do_partition_table,
            "partition": self.do_partition, "settle": self.do_settle,
            "md_create": self.do_md_create, "pv_create": self.do_pv_create,
            "bcache_create": self.do_bcache_create, "bcache_boot": self.files.bcache_boot,
            "vg_create": self.do_vg_create, "lv_create": self.do_lv_create,
            "vg_activate": self.do_vg_activate, "mkfs": self.do_mkfs,
            "fstab": self.files.fstab, "mdadm_conf": self.files.mdadm_conf,
            "multipath_conf": self.files.multipath_conf, "iscsi_conf": self.files.iscsi_conf,
            "luks_format": self.crypt.luks_format, "luks_open": self.crypt.luks_open,
            "crypttab": self.crypt.crypttab, **kept_steps.handlers(self),
            **system_steps.handlers(self)}

    def execute(self, steps):
        started = time.monotonic()
        os.makedirs(self.root, exist_ok=True)
        self._look_ahead(steps)
        stopped = False
        try:
            index = 0
            while index < len(steps):
                group = _tables_at(steps, index)
                self._run(index + 1, len(steps), group)
                index += len(group)
            if self.faults:
                self.faults.final(len(steps))
        except (DiskFault, DiskGone):
            stopped = True
            raise
        finally:
            left = self.mounts.umount_all()
            if left:
                LOG.error("still mounted after the run: %s", ", ".join(left))
            if stopped and self.faults:
                self.faults.teardown()
        report = {"status": "ok", "seconds": round(time.monotonic() - started, 2),
                  "steps": self.results, "filesystems": self.filesystems}
        if self.faults and self.faults.lost:
            report["degraded"] = self.faults.lost
        if self.crypt.recovery_keys:
            report["recovery_keys"] = self.crypt.recovery_keys
        return report

    def _look_ahead(self, steps):
        """What a step needs to know of the ones after it: the partitions a table keeps, those
        written together with their table, the whole planned table (to compare with what the
        kernel shows), the disks whose wipe is followed by a new table (whose own write
        makes the kernel re-read it) or by a whole-disk image (re-read once it is written),
        and the disks a configdrive partition is added to (whose sgdisk call re-reads)."""
        for step in steps:
            if step.kind == "partition_table":
                self.table_follows.add(step.disk)
            if step.kind == "write_image" and step.format in ("disk", "qcow2") and step.device:
                self.table_follows.add(step.device)
            if step.kind == "configdrive" and step.append_to:
                self.appended.add(step.append_to)
            if step.kind == "wipe":
                self.wiped.add(step.disk)
            if step.kind != "partition":
                continue
            # as sysfs shows the kernel's partitions: in 512-byte units at any sector size
            self.tables.setdefault(step.disk, {})[step.number] = (
                step.offset // 512, None if step.kind_ == "extended" else step.size // 512)
            if step.keep:
                self.keep_numbers.setdefault(step.disk, []).append(step.number)
            else:
                self.new_parts.setdefault(step.disk, []).append(step.args)

    def _run(self, first, count, steps):
        """Run steps: one, or at the same time partition tables of distinct disks (each
        sgdisk that writes sleeps its second before the kernel re-reads, so a server's disks
        would otherwise wait a second each). Every step is reported, in plan order, once all
        are over; the first failure is raised only then, with no tool left writing."""
        together = f" (one of {len(steps)} tables written at once)" if len(steps) > 1 else ""
        for index, step in enumerate(steps, first):
            LOG.info("step %d/%d: %s%s", index, count, step.description or step.kind, together)
            self.events.step(index, count, step.kind, "start", description=step.description)
        if len(steps) == 1:
            outcomes = [self._timed(steps[0])]
        else:
            from concurrent.futures import ThreadPoolExecutor
            with ThreadPoolExecutor(max_workers=min(len(steps), TABLES_AT_ONCE)) as pool:
                outcomes = list(pool.map(self._timed, steps))
        failure = None
        for index, (step, (result, exc, took)) in enumerate(zip(steps, outcomes), first):
            if exc is not None:
                self.failed_step = self.failed_step or f"step {index}/{count} ({_named(step)})"
                if isinstance(exc, (DiskStalled, DiskGone)):  # which step it stopped
                    exc = type(exc)(f"step {index}/{count} ({_named(step)}): {exc}")
                self.events.step(index, count, step.kind, "failed", error=str(exc)[-2000:])
                LOG.error("step %d/%d (%s) failed after %.1fs", index, count, step.kind, took)
                failure = failure or exc
                continue
            took = round(took, 2)
            self.events.step(index, count, step.kind, "done", seconds=took)
            self.results.append({"index": index, "kind": step.kind,
                                 "description": step.description, "seconds": took,
                                 "result": result})
        if self.faults:
            # a disk's I/O error, or a member's under its array's policy: raised in place of
            # the step's own error, which it explains
            self.faults.after([(i, count, s) for i, s in enumerate(steps, first)], failure)
        if failure is not None:
            raise failure

    def _timed(self, step):
        """(result, exception, seconds) of the step's do_ method."""
        t0 = time.monotonic()
        try:
            handler = self.handlers.get(step.kind)
            if handler is None:
                from provision_agent.plan import extensions  # only a plan with a plug-in kind
                handler = self.handlers[step.kind] = extensions.handler(
                    step.kind, self._plugin_context(step.kind))
            result = handler(step)
            # the disk watch's fault that came while the step ran fails it even when its tools
            # said nothing: a removed disk's buffered writes, fsync and e2fsck "succeed"
            fault = getattr(self.runner, "fault", None)
            if isinstance(fault, (DiskGone, DiskStalled)):
                return None, fault, time.monotonic() - t0
            return result, None, time.monotonic() - t0
        except Exception as exc:
            return None, exc, time.monotonic() - t0

    def _plugin_context(self, kind):
        from provision_agent.run import plugin_context
        return plugin_context.Context(
            self.runner, self.events, self.root, self.options, self.layout,
            plugin_context.Target(self.runner, self.root, self.mounts), kind)

    # storage

    def do_wipe(self, step):
        wipe.wipe(self.runner, step.disk, step.keep or [],
                  reread=step.disk not in self.table_follows, cleared=self.wiped)

    def do_partition_table(self, step):
        disk, keep = step.disk, self.keep_numbers.get(step.disk, [])
        self.labels[disk] = step.label
        parts = self.new_parts.get(disk, [])
        if step.label == "gpt":
            partitions.write_gpt(self.runner, disk, parts, keep)
        elif not keep:
            partitions.write_msdos(self.runner, disk, parts)
        else:
            # an msdos table edited around kept partitions: one partition at a time
            partitions.new_msdos_table(self.runner, disk, keep)
            return None
        self.in_table.update(p["device"] for p in parts)
        return {"partitions": [p["device"] for p in parts]}

    def do_partition(self, step):
        if step.keep:
            self.kept.add(step.device)
            return {"kept": True}
        if step.device in self.in_table:
            return {"written_with_table": True}
        partitions.create(self.runner, step.args, self.labels.get(step.disk, "gpt"))

    def do_settle(self, step):
        for disk in step.disks:
            udev.reread_partitions(self.runner, disk, self.tables.get(disk))
            if disk.startswith(bcache.BY_LABEL):
                bcache.link_partitions(self.runner, disk, step.devices)
        udev.wait_for_devices(self.runner, step.devices)
        wipe.clear_new(self.runner, [d for d in step.devices if d not in self.kept])

    def do_md_create(self, step):
        md.create(self.runner, step.args)
        udev.settle(self.runner)
        udev.wait_for_devices(self.runner, [step.device])
        wipe.clear_new(self.runner, [step.device])

    def do_bcache_create(self, step):
        """The backing (and a new cache set's) device is blank (a new partition, a wiped disk,
        an array cleared when made); what the bcache device shows is cleared as an array's."""
        made = bcache.create(self.runner, step.args)
        udev.settle(self.runner)
        wipe.clear_new(self.runner, [step.device])
        return made

    def do_pv_create(self, step):
        lvm.pv_create(self.runner, step.device)

    def do_vg_create(self, step):
        lvm.vg_create(self.runner, step.name, step.pvs)

    def do_lv_create(self, step):
        lvm.lv_create(self.runner, step.args)
        udev.wait_for_devices(self.runner, [step.device])

    def do_vg_activate(self, step):
        # checked in the preflight too; the partition table has been rewritten since
        problems = lvm.kept_vg_problems(self.runner, step.args)
        if problems:
            raise MachineMismatch([Problem(f"volume group {step.name}", p) for p in problems])
        lvm.activate(self.runner, step.name)
        udev.settle(self.runner)
        udev.wait_for_devices(self.runner, step.devices)
        self.kept.update(step.devices)
        return {"kept": step.lvs}

    def do_mkfs(self, step):
        options = list(step.options or [])
        if step.volume_id_of:
            options += mkfs.same_volume_id(blockinfo.uuid(self.runner, step.volume_id_of),
                                           options)
        mkfs.make(self.runner, step.fs_type, step.device, step.label, options)
        uuid = blockinfo.uuid(self.runner, step.device)
        self.filesystems.append({"device": step.device, "fs_type": step.fs_type,
                                 "label": step.label, "uuid": uuid})
        return {"uuid": uuid}
