import pytest

from provision_agent.plan import geometry
from provision_agent.plan.model import Partition
from provision_agent.plan.units import GiB, KiB, MiB, TiB, parse_size


def parts(*sizes):
    return [Partition(id=f"p{i}", size=parse_size(s)) for i, s in enumerate(sizes)]


def test_gpt_layout_is_aligned_and_contiguous():
    placed, problems = geometry.place("/dev/sda", 4 * GiB, "gpt", parts("1MiB", "300", "remaining"))
    assert problems == []
    assert [p.device for p in placed] == ["/dev/sda1", "/dev/sda2", "/dev/sda3"]
    assert placed[0].offset == MiB
    for a, b in zip(placed, placed[1:]):
        assert b.offset == a.end
    for p in placed:
        assert p.offset % MiB == 0 and p.end % MiB == 0
    assert placed[1].size == 300 * MiB
    # The last partition stops before the GPT backup area (33 sectors) and on a MiB boundary.
    assert placed[2].end <= 4 * GiB - 33 * 512
    assert placed[2].end == (4 * GiB - 33 * 512) // MiB * MiB


def test_fixed_sizes_round_up_to_mib_and_percent_rounds_down():
    placed, problems = geometry.place("/dev/sda", 10 * GiB, "gpt",
                                      parts("1000KiB", "33%", "remaining"))
    assert problems == []
    assert placed[0].size == MiB
    usable = geometry.usable_range(10 * GiB, "gpt")[1] - MiB
    assert placed[1].size == usable * 33 // 100 // MiB * MiB


def test_msdos_uses_whole_disk_but_gpt_keeps_backup():
    gpt_first, gpt_end = geometry.usable_range(GiB, "gpt")
    dos_first, dos_end = geometry.usable_range(GiB, "msdos")
    assert gpt_first == dos_first == MiB
    assert dos_end == GiB
    assert gpt_end == dos_end - MiB     # the backup area costs the last MiB after alignment


def test_msdos_more_than_four_partitions_makes_extended_and_logicals():
    placed, problems = geometry.place("/dev/vda", 4 * GiB, "msdos",
                                      parts(100, 100, 100, 100, 100, "remaining"))
    assert problems == []
    kinds = [(p.number, p.kind) for p in placed]
    assert kinds == [(1, "primary"), (2, "primary"), (3, "primary"), (4, "extended"),
                     (5, "logical"), (6, "logical"), (7, "logical")]
    ext = placed[3]
    logicals = placed[4:]
    assert ext.offset == placed[2].end
    # Every logical partition leaves 1 MiB before it for its EBR, inside the extended one.
    assert logicals[0].offset == ext.offset + MiB
    assert logicals[1].offset == logicals[0].end + MiB
    assert logicals[-1].end <= ext.end
    assert [p.part_id for p in placed] == ["p0", "p1", "p2", None, "p3", "p4", "p5"]


def test_four_msdos_partitions_stay_primary():
    placed, _ = geometry.place("/dev/vda", GiB, "msdos", parts(100, 100, 100, "remaining"))
    assert [p.kind for p in placed] == ["primary"] * 4


def test_too_small_disk_is_a_problem_with_numbers():
    placed, problems = geometry.place("/dev/vda", GiB, "gpt", parts("2GiB"))
    assert placed == []
    assert "need 2GiB" in problems[0] and "/dev/vda" in problems[0]


def test_remaining_without_space_is_a_problem():
    usable = geometry.usable_range(GiB, "gpt")[1] - MiB
    _, problems = geometry.place("/dev/vda", GiB, "gpt",
                                 parts(f"{usable}B", "remaining"))
    assert "no space left" in problems[0]


def test_msdos_beyond_2tib_is_refused():
    _, problems = geometry.place("/dev/sdb", 3 * TiB, "msdos", parts("remaining"))
    assert "2TiB" in problems[0]
    _, problems = geometry.place("/dev/sdb", 3 * TiB, "gpt", parts("remaining"))
    assert problems == []


def test_nvme_partition_names():
    placed, _ = geometry.place("/dev/nvme0n1", GiB, "gpt", parts("remaining"))
    assert placed[0].device == "/dev/nvme0n1p1"


# The same layouts at each logical sector size: 512, 512e (512 logical on 4096 physical
# blocks) and 4Kn. Every number is in bytes; the driver writes them in the disk's sectors.
SIZES = [(512, 512), (512, 4096), (4096, 4096)]


@pytest.mark.parametrize("logical,physical", SIZES)
def test_the_issues_gpt_layout_is_the_same_bytes_at_every_sector_size(logical, physical):
    """ESP 512 MiB, /boot 1 GiB, / the rest on 4 GiB: what failed at the partition step on a
    4Kn loop device when the plan's 512-byte sector numbers went to sgdisk."""
    placed, problems = geometry.place("/dev/vda", 4 * GiB, "gpt",
                                      parts("512MiB", "1GiB", "remaining"),
                                      sector=logical, physical=physical)
    assert problems == []
    assert [(p.offset, p.size) for p in placed] == [
        (MiB, 512 * MiB), (513 * MiB, GiB), (1537 * MiB, 4 * GiB - 1537 * MiB - MiB)]
    for p in placed:
        assert p.offset % logical == p.size % logical == 0
        assert p.offset % physical == p.size % physical == 0


def test_gpt_reservations_are_whole_sectors_of_the_disks_size():
    # 512: protective MBR, header, 32 sectors of entries; the backup 32 + 1 at the end
    assert geometry.gpt_head_bytes(512) == 34 * 512 == 17 * KiB
    assert geometry.gpt_tail_bytes(512) == 33 * 512
    # 4096: protective MBR, header, 4 sectors of entries; the backup 4 + 1 at the end
    assert geometry.gpt_head_bytes(4096) == 6 * 4096 == 24 * KiB
    assert geometry.gpt_tail_bytes(4096) == 5 * 4096 == 20 * KiB
    assert geometry.gpt_entries_sectors(1024) == 16 and geometry.gpt_entries_sectors(2048) == 8


@pytest.mark.parametrize("tail,logical,end", [
    (17 * KiB, 512, 3 * MiB),     # the 512-byte backup (16.5 KiB) fits behind the 3rd MiB
    (17 * KiB, 4096, 2 * MiB),    # the 4096-byte one (20 KiB) does not
    (20 * KiB, 4096, 3 * MiB),
])
def test_the_gpt_backup_area_is_kept_free_at_the_disks_sector_size(tail, logical, end):
    first, usable_end = geometry.usable_range(3 * MiB + tail, "gpt", sector=logical)
    assert first == MiB
    assert usable_end == end
    assert usable_end <= 3 * MiB + tail - geometry.gpt_tail_bytes(logical)


def test_alignment_is_a_mib_and_a_multiple_of_both_block_sizes():
    assert geometry.alignment(512, 512) == MiB
    assert geometry.alignment(512, 4096) == MiB
    assert geometry.alignment(4096, 4096) == MiB
    # a device whose physical block does not divide 1 MiB (some RAID controllers report their
    # stripe): partitions start and end on a common multiple
    assert geometry.alignment(512, 3 * MiB) == 3 * MiB
    placed, problems = geometry.place("/dev/sdb", 64 * GiB, "gpt", parts("100MiB", "remaining"),
                                      sector=512, physical=3 * MiB)
    assert problems == []
    assert all(p.offset % (3 * MiB) == 0 and p.size % (3 * MiB) == 0 for p in placed)
    assert placed[0].size == 102 * MiB      # rounded up to the alignment


def test_msdos_addresses_2tib_at_512_and_16tib_at_4096():
    _, problems = geometry.place("/dev/sdb", 3 * TiB, "msdos", parts("remaining"), sector=4096)
    assert problems == []
    placed, problems = geometry.place("/dev/sdb", 17 * TiB, "msdos", parts("remaining"),
                                      sector=4096)
    assert "16TiB with 4096-byte sectors" in problems[0]
    _, problems = geometry.place("/dev/sdb", 3 * TiB, "msdos", parts("remaining"), sector=512)
    assert "2TiB with 512-byte sectors" in problems[0]


@pytest.mark.parametrize("logical,physical", [(520, 520), (4096, 512), (8192, 8192)])
def test_sector_sizes_no_table_is_written_for_are_a_problem(logical, physical):
    placed, problems = geometry.place("/dev/sdb", GiB, "gpt", parts("remaining"),
                                      sector=logical, physical=physical)
    assert placed == [] and "/dev/sdb reports a logical block size" in problems[0]


@pytest.mark.parametrize("logical,physical", SIZES)
def test_msdos_with_logical_partitions_is_the_same_bytes_at_every_sector_size(logical,
                                                                             physical):
    """Three primaries, the extended partition and logicals behind 1 MiB for each EBR: the
    same bytes at 512, 512e and 4Kn, every start and end on whole physical blocks (the VM's
    4Kn SCSI disk reads them back, tests/e2e/test_sector_sizes.py)."""
    placed, problems = geometry.place("/dev/sda", 4 * GiB, "msdos",
                                      parts(256, "2GiB", 256, 256, 256, "remaining"),
                                      sector=logical, physical=physical)
    assert problems == []
    assert [(p.number, p.kind, p.offset // MiB, p.size // MiB) for p in placed] == [
        (1, "primary", 1, 256), (2, "primary", 257, 2048), (3, "primary", 2305, 256),
        (4, "extended", 2561, 4096 - 2561), (5, "logical", 2562, 256),
        (6, "logical", 2819, 256), (7, "logical", 3076, 4096 - 3076)]
    for p in placed:
        assert p.offset % physical == p.size % physical == 0
