"""build-ipa.sh runs our build-base.sh from a scratch recipe directory (issue 35: the same base
recipe for both ramdisks). Every file build-base.sh reads beside itself must be staged there
and be part of the IPA base's cache key: when firmware-packages.txt was added (issue 53) it was
neither, and the IPA build stopped at once with `grep: .../firmware-packages.txt: No such file
or directory` (found by issue 58's head-to-head)."""

import re

from tests.unit.helpers import REPO

RAMDISK = REPO / "ramdisk"


def _beside_base():
    """The files build-base.sh reads from its own directory (`$here/NAME`)."""
    names = set(re.findall(r"\$here/([\w.-]+)", (RAMDISK / "build-base.sh").read_text()))
    assert "packages.txt" in names, names  # the parse still finds what it is meant to
    return names


def _ipa_lines(prefix):
    lines = [ln.strip() for ln in (RAMDISK / "build-ipa.sh").read_text().splitlines()
             if ln.strip().startswith(prefix)]
    assert lines, f"no line of build-ipa.sh starts with {prefix!r}"
    return "\n".join(lines)


def test_every_file_build_base_reads_is_staged_in_the_recipe():
    staged = set(re.findall(r"\$here/([\w.-]+)", _ipa_lines('cp "$here/build-base.sh"')))
    # packages.txt is written there as the union of ours and IPA's lists, not copied.
    missing = _beside_base() - staged - {"packages.txt"}
    assert not missing, f"build-ipa.sh does not copy {sorted(missing)} into its recipe"
    assert 'cat "$here/packages.txt" "$ipa/packages.txt" > "$recipe/packages.txt"' in (
        RAMDISK / "build-ipa.sh").read_text()


def test_every_file_build_base_reads_is_in_the_base_key():
    keyed = set(re.findall(r"\$here/([\w.-]+)", _ipa_lines("base_key=")))
    missing = (_beside_base() | {"build-base.sh"}) - keyed
    assert not missing, f"the IPA base's key does not cover {sorted(missing)}"
