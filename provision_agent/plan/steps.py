"""The plan's vocabulary: one dataclass per step kind, its fields the step's arguments.

The planner builds these, the executor dispatches each through its handler table, and the
printed plan is these fields (`args`): fully resolved (device paths, partition offsets and
sizes in bytes), so that the plan is exactly what runs. Values only knowable at run time (filesystem
UUIDs of written images, for example) are read by the executor from the device named in the
step. The JSON plan is a public contract (Ironic shows it, programs read it): its schema is
`schema/plan-v1.json`, generated from these classes (docs/plan-format.md) and checked against
what the planner emits by the tests.

A site adds a kind through the stevedore namespace `provision_agent.step_kinds` (extensions.py):
a Step subclass with its own `kind`, registered here at load time.
"""

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar

from provision_agent.plan.step_base import OPTIONAL, Step
from provision_agent.plan.steps_bcache import BcacheBoot, BcacheCreate
from provision_agent.plan.steps_crypt import Crypttab, LuksFormat, LuksOpen

__all__ = ["OPTIONAL", "Step", "BcacheBoot", "BcacheCreate", "Crypttab", "LuksFormat",
           "LuksOpen"]


@dataclass
class Wipe(Step):
    """Old signatures off a disk; `keep`: partition numbers left byte for byte."""
    kind: ClassVar[str] = "wipe"
    disk: str
    keep: list = field(default_factory=list)


@dataclass
class PartitionTable(Step):
    """The table is written here whole, with the disk's partition steps that follow (one
    sgdisk or sfdisk call), and those steps then only report it; an msdos table around kept
    partitions is edited one partition step at a time."""
    kind: ClassVar[str] = "partition_table"
    disk: str
    label: str                  # gpt | msdos


@dataclass
class Partition(Step):
    """`offset` and `size` in bytes, multiples of `sector_size`, the disk's logical block
    size the table is written in; `type` a GPT type GUID or an MBR type byte ("0x83"); `kind`
    primary | extended | logical (msdos) or None (gpt)."""
    kind: ClassVar[str] = "partition"
    disk: str
    number: int
    device: str
    offset: int
    size: int
    sector_size: int
    type: str
    name: str | None = None
    flags: list = field(default_factory=list)
    # "kind" in the plan; named so here because a step's kind is its class's
    kind_: str | None = field(default=None, metadata={"name": "kind"})
    guid: str | None = None
    keep: bool = False


@dataclass
class Settle(Step):
    """Re-read the tables of `disks`; the partition `devices` must exist afterwards."""
    kind: ClassVar[str] = "settle"
    disks: list
    devices: list


@dataclass
class MdCreate(Step):
    """An md array `device` (/dev/md/NAME) over `members`; `metadata` 1.0 for what firmware
    reads as a plain filesystem."""
    kind: ClassVar[str] = "md_create"
    device: str
    name: str
    level: int
    members: list
    spares: list = field(default_factory=list)
    metadata: str = "1.2"
    chunk_kib: int | None = None
    # fail | degrade: what a member that fails during the run does (run/faults.py)
    on_member_failure: str = "fail"


@dataclass
class MdAssemble(Step):
    """A kept array brought up as it is from its `members` (kept partitions or whole disks)."""
    kind: ClassVar[str] = "md_assemble"
    device: str
    name: str
    level: int
    members: list
    spares: list = field(default_factory=list)
    on_member_failure: str = "fail"


@dataclass
class WipeContents(Step):
    """The contents of `device` (a kept partition or array, whose place stays) given up:
    `how` "superblock" (every signature, the first and last MiB) or "zero" (every byte)."""
    kind: ClassVar[str] = "wipe_contents"
    device: str
    how: str


@dataclass
class PvCreate(Step):
    """An LVM physical volume on `device`."""
    kind: ClassVar[str] = "pv_create"
    device: str


@dataclass
class VgCreate(Step):
    """A volume group `name` over the physical volumes `pvs`."""
    kind: ClassVar[str] = "vg_create"
    name: str
    pvs: list


@dataclass
class LvCreate(Step):
    """`size_bytes`, or `extents` in lvcreate -l form ("100%FREE", "40%VG")."""
    kind: ClassVar[str] = "lv_create"
    vg: str
    name: str
    device: str
    size_bytes: int | None
    extents: str | None
    stripes: int | None = None


@dataclass
class VgActivate(Step):
    """A kept VG brought up as it is: made of the kept partitions `pvs`, holding `lvs`."""
    kind: ClassVar[str] = "vg_activate"
    name: str
    pvs: list
    lvs: list
    devices: list


@dataclass
class Mkfs(Step):
    """`volume_id_of`: a device whose filesystem UUID this one takes (an ESP copy)."""
    kind: ClassVar[str] = "mkfs"
    device: str
    fs_type: str
    label: str | None = None
    options: list = field(default_factory=list)
    volume_id_of: str | None = field(default=None, metadata=OPTIONAL)


@dataclass
class WriteImage(Step):
    """`device` for block-level formats, `mount_point` (inside the target root) for tar;
    `signature`: a detached OpenPGP signature verified while the image streams (its URL
    shortened, inline armour `<redacted>`); `whole_disk`: a qcow2 converted onto a whole disk,
    whose partition table is checked against the disk's sector size before the run's first
    write, as a `disk` image's is, and again before it is converted."""
    kind: ClassVar[str] = "write_image"
    device: str | None
    mount_point: str | None
    uri: str
    format: str                 # raw | disk | tar | qcow2
    compression: str = "auto"
    checksum: str | None = None
    checksum_of: str = "compressed"
    allow_no_checksum: bool = False
    fs_type: str | None = None
    checksum_url: str | None = field(default=None, metadata=OPTIONAL)
    checksum_algo: str | None = field(default=None, metadata=OPTIONAL)
    authorization: str | None = field(default=None, metadata=OPTIONAL)
    signature: str | None = field(default=None, metadata=OPTIONAL)
    allow_unsigned: bool | None = field(default=None, metadata=OPTIONAL)
    whole_disk: bool | None = field(default=None, metadata=OPTIONAL)


@dataclass
class Mount(Step):
    """`device` mounted at `mount_point` inside the target root."""
    kind: ClassVar[str] = "mount"
    device: str
    mount_point: str
    fs_type: str
    options: str = "defaults"


@dataclass
class Fstab(Step):
    """entries: {device, mount_point, fs_type, options, dump, pass}, written by UUID; a tmpfs,
    ramfs or bind mount's: {spec, mount_point, fs_type, options, dump, pass, make_dirs}, spec
    written as it is, the make_dirs directories made in the target where it has none."""
    kind: ClassVar[str] = "fstab"
    entries: list


@dataclass
class MdadmConf(Step):
    """`device_members` (a member on a multipath disk): every member, each a DEVICE line by a
    stable link, so md never assembles from one path's copy of a partition."""
    kind: ClassVar[str] = "mdadm_conf"
    arrays: list
    device_members: list | None = field(default=None, metadata=OPTIONAL)


@dataclass
class MultipathConf(Step):
    """WWIDs added to the target's /etc/multipath/wwids."""
    kind: ClassVar[str] = "multipath_conf"
    wwids: list


@dataclass
class IscsiConf(Step):
    """The installed system logs in to `targets` at boot ({portal, target, lun, chap,
    chap_mutual}: no secret; the ramdisk's node records, which hold them, are copied) as
    `initiator` (None: the name the ramdisk logged in with); `root`: the target `/` is on,
    logged in to by the initramfs (/etc/iscsi/iscsi.initramfs)."""
    kind: ClassVar[str] = "iscsi_conf"
    initiator: str | None
    targets: list
    root: dict | None = None


@dataclass
class Bootloader(Step):
    """`type` grub2: grub for `boot_mode` on the `targets` disks; an ESP copied to
    `esp_copies` (UEFI); with `secure_boot`, the image's shim and signed grub, each checked.
    `initramfs`: "rebuild" (the image's tool regenerates it) or "keep" (the image's own, if
    it carries the tools in `initramfs_needs`; plan/initramfs_policy.py); a plan without it
    rebuilds. `type` image: the whole-disk images on `targets` bring their own; each gets an
    NVRAM entry for the loader on its ESP (UEFI only). `uefi_targets`: with `boot_mode` auto,
    the targets of a machine that boots in UEFI mode where they differ from `targets` (a / on
    an array's partition boots from its members' MBRs in BIOS mode, from the ESPs in UEFI)."""
    kind: ClassVar[str] = "bootloader"
    type: str
    boot_mode: str
    targets: list
    kernel_params: str = ""
    esp_copies: list = field(default_factory=list)
    secure_boot: bool = False
    initramfs: str = field(default="rebuild", metadata=OPTIONAL)
    initramfs_needs: list = field(default_factory=list, metadata=OPTIONAL)
    uefi_targets: list | None = field(default=None, metadata=OPTIONAL)


@dataclass
class Configdrive(Step):
    """Onto `device`; or, behind a whole-disk image, onto a new `size_bytes` partition
    appended to `append_to` once the image is written (named after `partitions_of`)."""
    kind: ClassVar[str] = "configdrive"
    device: str | None
    format: str
    content: str | None = None
    meta_data: dict | None = None
    user_data: str | None = None
    network_data: dict | None = None
    append_to: str | None = field(default=None, metadata=OPTIONAL)
    size_bytes: int | None = field(default=None, metadata=OPTIONAL)
    partitions_of: str | None = field(default=None, metadata=OPTIONAL)


@dataclass
class Umount(Step):
    """The target filesystems unmounted, deepest first."""
    kind: ClassVar[str] = "umount"
    mount_points: list


BUILT_IN = (Wipe, PartitionTable, Partition, Settle, MdCreate, MdAssemble, WipeContents,
            BcacheCreate, LuksFormat, LuksOpen, PvCreate, VgCreate, LvCreate, VgActivate, Mkfs,
            WriteImage, Mount, Fstab, MdadmConf, MultipathConf, IscsiConf, Crypttab, BcacheBoot,
            Bootloader, Configdrive, Umount)
KINDS = {cls.kind: cls for cls in BUILT_IN}


def register(cls):
    """A plug-in's step kind; refuses one that would shadow another."""
    if not (isinstance(cls, type) and issubclass(cls, Step) and cls.kind):
        raise ValueError(f"{cls!r} is not a Step subclass with a kind")
    if KINDS.get(cls.kind, cls) is not cls:
        raise ValueError(f"step kind {cls.kind!r} is already taken")
    KINDS[cls.kind] = cls
    return cls


def make(kind, args, description=""):
    """A step from its JSON form (kind, args): what a plan document holds."""
    cls = KINDS.get(kind)
    if cls is None:
        raise ValueError(f"unknown step kind {kind!r}")
    names = {f.metadata.get("name", f.name): f.name for f in dataclasses.fields(cls)
             if f.name != "description"}
    unknown = set(args) - set(names)
    if unknown:
        raise ValueError(f"step kind {kind!r} has no argument {sorted(unknown)[0]!r}")
    return cls(description=description, **{names[k]: v for k, v in args.items()})
