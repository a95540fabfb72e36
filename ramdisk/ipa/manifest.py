"""Writes manifest.json for the IPA ramdisk (ramdisk/build-ipa.sh) in the style of ours
(ramdisk/manifest.py, whose helpers it uses): what went in (Debian packages, kernel, wheels),
what came out (sizes, sha256), what it cost (seconds, which layers were reused), and a one-line
summary beside our ramdisk's size when that one has been built.
"""

import argparse
import json
import os
import sys
import time

sys.dont_write_bytecode = True      # no __pycache__ in the clone
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from manifest import artefact, base_build_seconds, packages  # noqa: E402  (ramdisk/manifest.py)


def wheels(path):
    pins = {}
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split()[0].split("==")
            pins[name] = version
    return pins


def main():
    ap = argparse.ArgumentParser()
    for opt in ("--out", "--base", "--layer", "--base-state", "--layer-state", "--mirror",
                "--suite", "--wheels"):
        ap.add_argument(opt, required=True)
    ap.add_argument("--times", nargs=3, type=float, required=True)
    ap.add_argument("--ours", help="our ramdisk's manifest.json, to print the sizes side by side")
    a = ap.parse_args()

    t0, t1, t2 = a.times
    pkgs = packages(a.base)
    pins = wheels(a.wheels)
    kver = open(os.path.join(a.base, "kernel-version")).read().strip()
    manifest = {
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "suite": a.suite,
        "mirror": a.mirror,
        "kernel": kver,
        "ironic_python_agent": pins.get("ironic-python-agent"),
        "artefacts": {
            "vmlinuz": artefact(os.path.join(a.out, "vmlinuz")),
            "initramfs": artefact(os.path.join(a.out, "initramfs")),
        },
        "layers": {
            "base": dict(artefact(os.path.join(a.base, "base.cpio.zst")), state=a.base_state,
                         cold_build_seconds=base_build_seconds(a.base)),
            "ipa": dict(artefact(a.layer), state=a.layer_state),
        },
        "seconds": {"base": round(t1 - t0, 1), "ipa": round(t2 - t1, 1),
                    "total": round(time.time() - t0, 1)},
        "packages": pkgs,
        "wheels": pins,
    }
    tmp = os.path.join(a.out, "manifest.json.tmp")
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    os.replace(tmp, os.path.join(a.out, "manifest.json"))

    mib = 1 << 20
    size = manifest["artefacts"]["initramfs"]["bytes"] / mib
    ours = ""
    if a.ours and os.path.exists(a.ours):
        ours = json.load(open(a.ours))["artefacts"]["initramfs"]["bytes"] / mib
        ours = f" (ours: {ours:.1f} MiB)"
    print(f"ipa-ramdisk: IPA {manifest['ironic_python_agent']}, kernel {kver}, {len(pkgs)} "
          f"packages, {len(pins)} wheels, initramfs {size:.1f} MiB{ours} (base {a.base_state}, "
          f"ipa {a.layer_state}); base {manifest['seconds']['base']}s + ipa "
          f"{manifest['seconds']['ipa']}s, total {manifest['seconds']['total']}s")


if __name__ == "__main__":
    main()
