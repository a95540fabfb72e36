"""The guest CPU model of every machine the tests boot (qemu directly and libvirt domains).

Under TCG every guest instruction is emulated, and a model that advertises AVX2 makes the
guest's libraries (zstd above all: the test OS's initramfs and the images are zstd) take AVX2
code paths that TCG emulates slowly. qemu64 advertises SSE2-era features only: measured on the
2-core host, the ramdisk booted to SSH in 0.80-0.84x of the time `-cpu max` took and zstd ran
in 0.39x (benchmarks/vmbench_cpu_model.py, benchmarks/results/2026-11-27-vmbench_cpu_model.md).
Both models present an AMD CPU, so the guest kernel picks the same Spectre/Meltdown
mitigations under either. VMBENCH_CPU names another model (`max` for the old behaviour).
"""

import os

DEFAULT = "qemu64"


def model():
    return os.environ.get("VMBENCH_CPU") or DEFAULT


def libvirt_xml():
    """The domain's <cpu> element for model()."""
    name = model()
    if name == "max":
        return "<cpu mode='maximum'/>"
    return f"<cpu mode='custom' match='exact'><model fallback='forbid'>{name}</model></cpu>"
