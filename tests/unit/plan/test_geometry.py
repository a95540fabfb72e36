from provision_agent.plan import geometry
from provision_agent.plan.model import Partition
from provision_agent.plan.units import GiB, MiB, TiB, parse_size

SECTOR = 512


def parts(*sizes):
    return [Partition(id=f"p{i}", size=parse_size(s)) for i, s in enumerate(sizes)]


def test_gpt_layout_is_aligned_and_contiguous():
    placed, problems = geometry.place("/dev/sda", 4 * GiB, "gpt", parts("1MiB", "300", "remaining"))
    assert problems == []
    assert [p.device for p in placed] == ["/dev/sda1", "/dev/sda2", "/dev/sda3"]
    assert placed[0].start == 2048
    for a, b in zip(placed, placed[1:]):
        assert b.start == a.end + 1
    for p in placed:
        assert p.start % 2048 == 0 and (p.end + 1) % 2048 == 0
    assert placed[1].size == 300 * MiB
    # The last partition stops before the GPT backup area and on a MiB boundary.
    total = 4 * GiB // SECTOR
    assert placed[2].end <= total - 34 - 1
    assert placed[2].end + 1 == (total - 34) // 2048 * 2048


def test_fixed_sizes_round_up_to_mib_and_percent_rounds_down():
    placed, problems = geometry.place("/dev/sda", 10 * GiB, "gpt",
                                      parts("1000KiB", "33%", "remaining"))
    assert problems == []
    assert placed[0].size == MiB
    usable = (geometry.usable_range(10 * GiB, "gpt")[1] - 2048) * SECTOR
    assert placed[1].size == usable * 33 // 100 // MiB * MiB


def test_msdos_uses_whole_disk_but_gpt_keeps_backup():
    gpt_first, gpt_end = geometry.usable_range(GiB, "gpt")
    dos_first, dos_end = geometry.usable_range(GiB, "msdos")
    assert gpt_first == dos_first == 2048
    assert dos_end == GiB // SECTOR
    assert gpt_end == dos_end - 2048     # the backup area costs the last MiB after alignment


def test_msdos_more_than_four_partitions_makes_extended_and_logicals():
    placed, problems = geometry.place("/dev/vda", 4 * GiB, "msdos",
                                      parts(100, 100, 100, 100, 100, "remaining"))
    assert problems == []
    kinds = [(p.number, p.kind) for p in placed]
    assert kinds == [(1, "primary"), (2, "primary"), (3, "primary"), (4, "extended"),
                     (5, "logical"), (6, "logical"), (7, "logical")]
    ext = placed[3]
    logicals = placed[4:]
    assert ext.start == placed[2].end + 1
    # Every logical partition leaves 1 MiB before it for its EBR, inside the extended one.
    assert logicals[0].start == ext.start + 2048
    assert logicals[1].start == logicals[0].end + 1 + 2048
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
    usable = (geometry.usable_range(GiB, "gpt")[1] - 2048) * SECTOR
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
