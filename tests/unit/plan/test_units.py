import pytest

from provision_agent.plan.units import GiB, KiB, MiB, Size, align_down, align_up, human, parse_size


@pytest.mark.parametrize("text,expected", [
    (512, 512 * MiB),
    ("512", 512 * MiB),
    ("512MiB", 512 * MiB),
    ("1GiB", GiB),
    ("1.5GiB", int(1.5 * GiB)),
    ("4KiB", 4 * KiB),
    ("1GB", 10 ** 9),
    ("100MB", 100 * 10 ** 6),
    ("7B", 7),
    ("2 gib", 2 * GiB),
])
def test_fixed_sizes(text, expected):
    assert parse_size(text).bytes == expected
    assert parse_size(text).is_fixed


def test_percent_and_remaining():
    assert parse_size("40%").percent == 40
    assert parse_size("40%").resolve(1000) == 400
    assert parse_size("remaining").remaining
    assert parse_size("remaining").resolve(1000, available=123) == 123


def test_default_unit_kib_for_chunks():
    assert parse_size(512, "KiB").bytes == 512 * KiB


@pytest.mark.parametrize("bad", ["", "abc", "10 parsecs", "0%", "101%", "-5", -1, True, None,
                                 [1], "5 %%"])
def test_bad_sizes_raise_value_error(bad):
    with pytest.raises(ValueError):
        parse_size(bad)


def test_alignment():
    assert align_up(1, MiB) == MiB
    assert align_up(MiB, MiB) == MiB
    assert align_down(MiB + 1, MiB) == MiB
    assert align_down(MiB - 1, MiB) == 0


def test_human():
    assert human(MiB) == "1MiB"
    assert human(int(1.5 * GiB)) == "1.5GiB"
    assert human(100) == "100B"
    assert str(Size(remaining=True)) == "remaining"
    assert str(Size(percent=12.5)) == "12.5%"
