"""What the machine should look like, independent of any input format.

Data drivers build a Layout; validation checks it; resolution binds it to real disks; the
planner turns the bound layout into steps. Every referencable object has an `id` unique across
the layout; references between objects are by id. `origin` is where the object came from in the
input (a JSON path, or a Fuel space/volume index) so that errors can point back at it.
"""

from dataclasses import dataclass, field

from provision_agent.plan.units import Size

PARTITION_TYPES = ("bios_grub", "esp", "raid", "lvm", "swap", "linux", "custom")
FS_TYPES = ("ext2", "ext3", "ext4", "xfs", "vfat", "btrfs", "swap", "jfs", "ntfs", "reiserfs")
# Why provision makes no ZFS (curtin's zpool and zfs actions, its zfsroot filesystem type): the
# schema takes them so that validation can say so.
ZFS_REFUSED = ("ZFS is not made by provision: OpenZFS's kernel module is not in Debian main "
               "(Debian ships it in contrib as zfs-dkms, source compiled for each kernel, for "
               "its CDDL licence), and the ramdisk is built from main and non-free-firmware "
               "only; built, its modules are about 29 MiB (Alpine's zfs-lts package), a "
               "quarter of the ramdisk's 120 MiB budget. Use md RAID and LVM, or btrfs")
# Filesystems the schema takes that provision's ramdisk cannot make (type: why), so that
# validation can say so. jfs, ntfs and reiserfs are made since the ramdisk carries their mkfs
# (ramdisk/packages.txt).
FS_TYPES_NOT_CARRIED = {"zfs": ZFS_REFUSED, "zfsroot": ZFS_REFUSED}
# Filesystems the ramdisk makes but cannot mount (type: why): a mount point is refused.
FS_TYPES_NOT_MOUNTED = {
    "ntfs": "Linux 6.1 (the ramdisk's kernel) mounts NTFS as ntfs3, or as ntfs through "
            "ntfs-3g over FUSE, and the ramdisk carries neither module"}
MOUNT_TYPES = ("tmpfs", "ramfs", "bind")
CACHE_MODES = ("writethrough", "writeback", "writearound", "none")
RAID_LEVELS = (0, 1, 4, 5, 6, 10)
IMAGE_FORMATS = ("raw", "disk", "tar", "qcow2")
COMPRESSIONS = ("auto", "none", "gzip", "xz", "bzip2", "zstd")


@dataclass
class Partition:
    id: str
    size: Size
    type: str = "linux"
    type_guid: str | None = None      # only for type "custom"
    name: str | None = None           # GPT partition name
    guid: str | None = None           # unique partition GUID to set
    flags: list = field(default_factory=list)
    keep: bool = False
    # keep it if the disk's table holds it (its place read from that table), else create it:
    # Ironic's preserve_ephemeral. Resolution (plan/existing.py) decides `keep` from the table.
    keep_if_present: bool = False
    origin: str = ""
    number: int | None = None         # None: one more than the partition before (geometry)
    offset: Size | None = None        # first byte; None: aligned behind the partition before
    # "superblock" | "zero": its contents are new (a kept one keeps only its place)
    wipe: str | None = None


@dataclass
class IscsiTarget:
    """A LUN the ramdisk logs in to before it looks at the disks (plan/iscsi.py checks it).
    The CHAP passwords are kept out of repr() so no log line can show them."""
    portal: str                        # "A.B.C.D[:PORT]" or "[IPv6][:PORT]"
    target: str                        # the target's iSCSI name (iqn., eui., naa.)
    lun: int = 0
    chap_username: str | None = None   # the target checks the initiator (CHAP)
    chap_password: str | None = field(default=None, repr=False)
    mutual_username: str | None = None  # the initiator checks the target (mutual CHAP)
    mutual_password: str | None = field(default=None, repr=False)
    initiator: str | None = None       # this machine's initiator name; None: generated


@dataclass
class Disk:
    id: str
    hints: dict                        # root-device-hint style: name, by_path, by_id, serial, ...
    fallback_hints: list = field(default_factory=list)   # tried in order when hints find none
    table: str = "gpt"
    partitions: list = field(default_factory=list)
    wipe: bool = True
    # the input names `table`: written (empty) even when the disk lists no partitions
    table_named: bool = False
    origin: str = ""
    from_inventory: bool = False       # hints a program picked: they name no removable disk
    pick: str | None = None            # "smallest": several matches are no error (Ironic's rule)
    exclude: list = field(default_factory=list)   # hint sets of disks this never is
    iscsi: IscsiTarget | None = None   # a LUN logged in to first; `hints` then name its by-path


@dataclass
class Raid:
    id: str
    name: str
    level: int
    members: list                      # ids of partitions or disks
    spares: list = field(default_factory=list)
    metadata: str = "1.2"
    chunk_kib: int | None = None
    origin: str = ""
    keep: bool = False                 # assemble the existing array; create nothing
    wipe: str | None = None            # "superblock" | "zero": its contents are new
    table: str = "gpt"                 # with partitions: the array's partition table
    partitions: list = field(default_factory=list)   # the array is then used through them
    on_member_failure: str = "fail"    # "degrade": a failed member is taken out, the run goes on


@dataclass
class Bcache:
    """A bcache device over `backing` (a partition, an array or a whole disk), cached by
    `cache` (a cache set, which several bcache devices may share) or by none. The kernel
    names it /dev/bcacheN; the plan knows it by its label, `name`."""
    id: str
    name: str
    backing: str
    cache: str | None = None
    cache_mode: str = "writethrough"
    origin: str = ""
    table: str = "gpt"                 # with partitions: its partition table
    partitions: list = field(default_factory=list)   # the device is then used through them


@dataclass
class LogicalVolume:
    id: str
    name: str
    size: Size
    stripes: int | None = None
    origin: str = ""


@dataclass
class VolumeGroup:
    id: str
    name: str
    pvs: list                          # ids of partitions, raids or disks
    logical_volumes: list = field(default_factory=list)
    keep: bool = False                 # activate the existing VG; create and format nothing
    origin: str = ""


@dataclass
class KeyFile:
    """A key file for a data volume, unlocked from an already unlocked root."""
    # A signed URL is a credential: kept out of repr() so no log line can show it.
    uri: str = field(repr=False)
    checksum: str = ""                 # "algo:hex", mandatory
    # The key is copied onto the installed root; on a plain one it is refused unless this says
    # the key in clear there is meant (validate_crypt says why).
    allow_plain_root: bool = False


@dataclass
class Encrypted:
    """A LUKS2 volume on `device` (a partition, an array, a logical volume or a whole disk),
    opened as /dev/mapper/NAME; its id is usable wherever a device id is. Unlocked in the
    installed system by TPM2 and/or Tang (clevis, `threshold` of them), or by a key file;
    and/or by a passphrase typed at its console."""
    id: str
    device: str
    name: str
    cipher: str = "aes-xts-plain64"
    key_size: int = 512                # bits; XTS splits it into two keys
    sector_size: int | None = None     # None: what cryptsetup picks for the device (blocks.py)
    discard: bool = False
    tpm2_pcrs: list | None = None      # None: no TPM2 binding
    tpm2_bank: str = "sha256"
    tang: list = field(default_factory=list)    # [{"url": ..., "thumbprint": ...}]
    threshold: int = 1
    key_file: KeyFile | None = None
    origin: str = ""
    # A credential (typed at the console at boot): kept out of repr() so no log line shows it.
    passphrase: str | None = field(default=None, repr=False)

    def methods(self):
        """How many clevis pins unlock it (TPM2 counts one, each Tang server one)."""
        return (1 if self.tpm2_pcrs is not None else 0) + len(self.tang)


@dataclass
class Filesystem:
    device: str                        # id of a partition, raid, logical volume or disk
    type: str
    mount: str | None = None
    label: str | None = None
    mount_options: str = "defaults"
    mkfs_options: list = field(default_factory=list)
    fstab_pass: int | None = None      # None: 1 for /, 2 for other mounted fs, 0 for swap
    origin: str = ""
    fstab_freq: int = 0                # fstab's fifth field (dump(8)'s frequency)


@dataclass
class Mount:
    """A mount of no device's filesystem, written to the installed system's fstab only (not
    mounted during the run): tmpfs or ramfs (memory), or bind (`source`, a directory of the
    installed system, seen again at `mount`)."""
    type: str                          # tmpfs | ramfs | bind
    mount: str
    source: str | None = None          # bind only
    mount_options: str | None = None   # None: "defaults"; a bind's always include bind
    fstab_freq: int = 0
    fstab_pass: int = 0
    origin: str = ""

    def options(self):
        """The fstab options field: a bind mount's has bind (or rbind) first."""
        given = self.mount_options or "defaults"
        if self.type != "bind" or {"bind", "rbind"} & set(given.split(",")):
            return given
        return "bind" if given == "defaults" else f"bind,{given}"


@dataclass
class Image:
    uri: str
    format: str = "raw"
    target: str = "/"                  # device id for raw/qcow2, disk id for disk, mount for tar
    compression: str = "auto"
    checksum: str | None = None        # "algo:hex"
    checksum_of: str = "compressed"
    allow_no_checksum: bool = False
    origin: str = ""
    checksum_url: str | None = None    # a checksum file, read when the image is
    checksum_algo: str | None = None   # its digest's algorithm; None: from the length
    # The download's Authorization header: kept out of repr() so no log line can show it.
    authorization: str | None = field(default=None, repr=False)
    # A detached OpenPGP signature: a URL that may carry credentials, or inline armour.
    signature: str | None = field(default=None, repr=False)
    allow_unsigned: bool = False


@dataclass
class Bootloader:
    type: str = "grub2"
    boot_mode: str = "auto"            # bios | uefi | auto (detected at run time)
    targets: list | None = None        # disk ids; None: every disk holding a boot partition
    kernel_params: str = ""
    secure_boot: bool = False          # shim + signed grub, checked signed, from the image
    initramfs: str = "auto"            # auto | rebuild (plan/initramfs_policy.py)
    origin: str = ""


@dataclass
class Configdrive:
    format: str = "config-2"           # config-2 | nocloud
    content: str | None = None         # Ironic form: gzip+base64 ISO, or a URL
    meta_data: dict | None = None
    user_data: str | None = None
    network_data: dict | None = None
    partition: str | None = None       # partition id; None: a small partition at the disk's end
    disk: str | None = None            # disk id for the created partition; None: first disk
    origin: str = ""


@dataclass
class Layout:
    disks: list = field(default_factory=list)
    raids: list = field(default_factory=list)
    bcache: list = field(default_factory=list)          # Bcache
    volume_groups: list = field(default_factory=list)
    encrypted: list = field(default_factory=list)
    # age recipients the recovery keys are encrypted to (public keys: not secret)
    recovery_recipients: list = field(default_factory=list)
    filesystems: list = field(default_factory=list)
    mounts: list = field(default_factory=list)         # Mount: tmpfs, ramfs, bind (fstab)
    images: list = field(default_factory=list)
    bootloader: Bootloader | None = None
    configdrive: Configdrive | None = None
    # plug-in step kinds' sections, by name (extensions.py)
    extensions: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)      # shown with the plan; nothing refused

    def partitions(self):
        """(disk, array or bcache device, partition) of every partition, disks' first."""
        for holder in self.disks + [x for x in self.raids + self.bcache if x.partitions]:
            for part in holder.partitions:
                yield holder, part

    def logical_volumes(self):
        for vg in self.volume_groups:
            for lv in vg.logical_volumes:
                yield vg, lv

    def whole_disk_targets(self):
        """Ids of the disks a whole-disk image is written to: format disk, or a qcow2
        converted onto a whole disk (Ironic's qcow2 disk images, the commonest in Glance)."""
        disk_ids = {d.id for d in self.disks}
        return {im.target for im in self.images
                if im.format == "disk" or (im.format == "qcow2" and im.target in disk_ids)}

    def kept_ids(self):
        """Ids of the devices whose contents stay: kept partitions and arrays not wiped, and
        the LVs of kept VGs."""
        kept = {p.id for _, p in self.partitions() if p.keep and not p.wipe}
        kept |= {r.id for r in self.raids if r.keep and not r.wipe and not r.partitions}
        return kept | {lv.id for vg, lv in self.logical_volumes() if vg.keep}
