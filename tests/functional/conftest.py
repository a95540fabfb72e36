import subprocess

import pytest

from tests.functional.prereq import sh


@pytest.fixture
def loop(tmp_path):
    """make(size, sector_size=None) -> a loop device over a sparse file of that size (of that
    logical sector size: 4096 is a 4Kn disk), detached afterwards."""
    made = []

    def make(size, sector_size=None):
        backing = tmp_path / f"loop{len(made)}.img"
        with open(backing, "wb") as f:
            f.truncate(size)
        sectors = ["--sector-size", str(sector_size)] if sector_size else []
        dev = sh("losetup", *sectors, "-f", "--show", str(backing)).strip()
        made.append(dev)
        return dev

    yield make
    for dev in made:
        # -R: a test may leave mounts stacked on the device (a run that failed midway)
        subprocess.run(["umount", "-R", dev], capture_output=True)
        subprocess.run(["losetup", "-d", dev], capture_output=True)
