"""The plan's vocabulary: typed steps with plain, JSON-able arguments.

The planner produces a list of Step; the executor dispatches on Step.kind to driver calls.
Arguments are fully resolved (device paths, sector ranges, sizes in bytes) so that the printed
plan is exactly what will run. Values only knowable at run time (filesystem UUIDs of written
images, for example) are read by the executor from the device named in the step.

Kinds, in the order a plan uses them, and their args:
  wipe             disk, keep (list of partition numbers left byte-for-byte intact)
  partition_table  disk, label ("gpt" | "msdos"); the table is written here whole, with the
                   disk's partition steps that follow (one sgdisk or sfdisk call), and those
                   steps then only report it; an msdos table around kept partitions is
                   edited one partition step at a time
  partition        disk, number, device, start, end (sectors, inclusive, 512-byte units),
                   type (GPT type GUID for gpt; MBR type byte as "0x83" for msdos), name (GPT
                   partition name or null), flags (list: "boot", "esp", "bios_grub", "raid",
                   "lvm", "swap"), kind ("primary" | "extended" | "logical" | null for gpt),
                   guid (unique partition GUID or null)
  settle           disks, devices (partition devices that must exist afterwards)
  md_create        device ("/dev/md/NAME"), name, level (0,1,4,5,6,10), members, spares,
                   metadata ("1.0", "1.2", ...), chunk_kib (int or null)
  pv_create        device
  vg_create        name, pvs
  lv_create        vg, name, device ("/dev/VG/NAME"), size_bytes (int or null),
                   extents (lvcreate -l form such as "100%FREE" or "40%VG", or null),
                   stripes (int or null)
  vg_activate      name, pvs (the kept partitions it must consist of), lvs (names that must
                   exist), devices ("/dev/VG/NAME" of those): a kept VG, activated as it is
  mkfs             device, fs_type (ext2|ext3|ext4|xfs|vfat|btrfs|swap), label, options (list
                   of extra mkfs arguments)
  write_image      device (target block device, or null for tar), mount_point (for tar, the
                   path inside the target root), uri, format ("raw" | "disk" | "tar" | "qcow2"),
                   compression, checksum, checksum_of, allow_no_checksum, fs_type
  mount            device, mount_point (path inside the target root, "/" first), fs_type, options
  fstab            entries: list of {device, mount_point, fs_type, options, dump, pass}; the
                   executor writes each by UUID read from the device
  mdadm_conf       arrays: list of md device paths; device_members (when a member is on a
                   multipath disk): every member, each written as a DEVICE line by a stable
                   link so md never assembles from one path's copy of a partition
  multipath_conf   wwids: the multipath disks' WWIDs, added to the target's
                   /etc/multipath/wwids so that the installed system assembles them
  bootloader       see the bootloader module
  configdrive      see the configdrive module
  umount           mount_points (deepest first)
"""

from dataclasses import asdict, dataclass, field

KINDS = (
    "wipe", "partition_table", "partition", "settle", "md_create", "pv_create", "vg_create",
    "lv_create", "vg_activate", "mkfs", "write_image", "mount", "fstab", "mdadm_conf", "multipath_conf", "bootloader",
    "configdrive", "umount",
)


@dataclass
class Step:
    kind: str
    args: dict = field(default_factory=dict)
    # A short human sentence for the printed plan and for progress events.
    description: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown step kind {self.kind!r}")

    def to_dict(self):
        return asdict(self)
