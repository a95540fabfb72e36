"""Sizes as the input states them, and the arithmetic to turn them into bytes.

Accepted forms: an integer (MiB), "<number><unit>" with binary (KiB MiB GiB TiB) or decimal
(KB MB GB TB) units or B, "<number>%" (of the containing disk or volume group), and "remaining".
"""

import re
from dataclasses import dataclass

KiB = 1024
MiB = 1024 ** 2
GiB = 1024 ** 3
TiB = 1024 ** 4

UNITS = {
    "B": 1, "KiB": KiB, "MiB": MiB, "GiB": GiB, "TiB": TiB,
    "KB": 1000, "MB": 1000 ** 2, "GB": 1000 ** 3, "TB": 1000 ** 4,
}

# No disk is larger, and sector numbers past it overflow the tools' 64-bit arithmetic.
MAX_BYTES = 1 << 63

# Stripped first, one \s* run: two adjacent ones backtrack quadratically (docs/security.md).
_SIZE_RE = re.compile(r"^(?P<num>\d+(?:\.\d+)?)(?:\s*(?P<unit>[A-Za-z]+|%))?$")
MAX_SIZE_TEXT = 64


@dataclass(frozen=True)
class Size:
    """A requested size: exactly one of bytes, percent or remaining is meaningful."""

    bytes: int = 0
    percent: float = 0.0
    remaining: bool = False

    @property
    def is_fixed(self):
        return not self.remaining and not self.percent

    def resolve(self, whole, available=None):
        """Bytes for this size inside a container of `whole` bytes (`available` for remaining)."""
        if self.remaining:
            return available if available is not None else whole
        if self.percent:
            return int(whole * self.percent / 100)
        return self.bytes

    def __str__(self):
        if self.remaining:
            return "remaining"
        if self.percent:
            return f"{self.percent:g}%"
        return human(self.bytes)


def parse_size(value, default_unit="MiB"):
    """Parse an input size; raise ValueError with a message fit for an operator."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError("a size may not be negative")
        return Size(bytes=_bounded(value * UNITS[default_unit]))
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a size")
    if len(value) > MAX_SIZE_TEXT:
        raise ValueError(f"a size is at most {MAX_SIZE_TEXT} characters")
    value = value.strip()
    if value.lower() == "remaining":
        return Size(remaining=True)
    m = _SIZE_RE.match(value)
    if not m:
        raise ValueError(f"{value!r} is not a size (examples: 512MiB, 20GiB, 40%, remaining)")
    num = float(m.group("num"))
    unit = m.group("unit") or default_unit
    if unit == "%":
        if not 0 < num <= 100:
            raise ValueError(f"{value!r}: a percentage must be above 0 and at most 100")
        return Size(percent=num)
    canonical = {u.lower(): u for u in UNITS}.get(unit.lower())
    if canonical is None:
        raise ValueError(f"{value!r}: unknown unit {unit!r} (use one of {', '.join(UNITS)} or %)")
    return Size(bytes=_bounded(num * UNITS[canonical]))


def _bounded(nbytes):
    if not nbytes <= MAX_BYTES:      # also NaN and infinity
        raise ValueError("a size larger than 8 EiB is larger than any disk")
    return int(nbytes)


def align_up(value, alignment):
    return -(-value // alignment) * alignment


def align_down(value, alignment):
    return value // alignment * alignment


def human(nbytes):
    """Binary units, exact when it divides evenly, else one decimal."""
    for unit, factor in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if nbytes >= factor:
            q = nbytes / factor
            return f"{q:.0f}{unit}" if nbytes % factor == 0 else f"{q:.1f}{unit}"
    return f"{nbytes}B"
