"""The plan's bcache steps (model.Bcache; drivers/bcache.py carries them out)."""

from dataclasses import dataclass
from typing import ClassVar

from provision_agent.plan.step_base import Step


@dataclass
class BcacheCreate(Step):
    """A bcache device over `backing`, cached by `cache` (None: by none) in `cache_mode`,
    both made with `block_size`-byte blocks (the largest of its cache set's devices).
    `format_cache`: this step makes the cache set on `cache`; the other bcache devices of
    that set attach to it. The kernel names the device /dev/bcacheN (read back from the
    backing device's sysfs); `device` is the link by its label `name`, made by udev or by
    the step itself."""
    kind: ClassVar[str] = "bcache_create"
    device: str
    name: str
    backing: str
    cache: str | None
    cache_mode: str
    block_size: int
    format_cache: bool = False


@dataclass
class BcacheBoot(Step):
    """The installed system mounts filesystems on the bcache `devices` at boot: its image
    must carry bcache-tools (the udev rule that registers them, the initramfs hook), checked
    before the bootloader step rebuilds the initramfs."""
    kind: ClassVar[str] = "bcache_boot"
    devices: list
