"""Writes manifest.json next to the ramdisk artefacts and prints a one-screen summary.

What went in (package versions, kernel), what came out (sizes, sha256) and what it cost
(build seconds, which layers were reused), so a test failure can be tied to an exact ramdisk.
"""

import argparse
import hashlib
import json
import os
import time


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def artefact(path):
    return {"path": path, "bytes": os.path.getsize(path), "sha256": sha256(path)}


def packages(base):
    pkgs = {}
    with open(os.path.join(base, "packages.tsv")) as f:
        for line in f:
            name, version, kib = (line.rstrip("\n").split("\t") + ["", ""])[:3]
            pkgs[name] = {"version": version, "installed_kib": int(kib or 0)}
    return pkgs


def base_build_seconds(base):
    # build.sh writes "END - START" there; evaluate it here rather than depend on bc.
    try:
        end, start = open(os.path.join(base, "build-time")).read().split(" - ")
        return round(float(end) - float(start), 1)
    except (OSError, ValueError):
        return None


def extras():
    """What build.sh --extra-* added, by name and content: whoever holds a ramdisk can tell a
    vendor's build from ours, and which vendor files went in."""
    got = {"packages": [], "wheels": [], "files": []}
    for key, env in (("packages", "EXTRA_PACKAGES"), ("wheels", "EXTRA_WHEELS"),
                     ("files", "EXTRA_FILES")):
        for arg in os.environ.get(env, "").split():
            path, _, dest = arg.partition(":")
            if not os.path.isfile(path):
                got[key].append({"name": arg})
                continue
            entry = {"name": os.path.basename(path), "sha256": sha256(path)}
            if dest:
                entry["path"] = dest
            got[key].append(entry)
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--base", required=True)
    ap.add_argument("--project", required=True)
    ap.add_argument("--base-state", required=True)
    ap.add_argument("--project-state", required=True)
    ap.add_argument("--times", nargs=3, type=float, required=True)
    ap.add_argument("--mirror", required=True)
    ap.add_argument("--suite", required=True)
    a = ap.parse_args()

    t0, t1, t2 = a.times
    pkgs = packages(a.base)
    kver = open(os.path.join(a.base, "kernel-version")).read().strip()
    manifest = {
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "suite": a.suite,
        "mirror": a.mirror,
        "kernel": kver,
        "artefacts": {
            "vmlinuz": artefact(os.path.join(a.out, "vmlinuz")),
            "initramfs": artefact(os.path.join(a.out, "initramfs")),
        },
        "layers": {
            "base": dict(artefact(os.path.join(a.base, "base.cpio.zst")), state=a.base_state,
                         cold_build_seconds=base_build_seconds(a.base)),
            "project": dict(artefact(a.project), state=a.project_state),
        },
        "seconds": {"base": round(t1 - t0, 1), "project": round(t2 - t1, 1),
                    "total": round(time.time() - t0, 1)},
        "packages": pkgs,
        "extras": extras(),
    }
    with open(os.path.join(a.out, "manifest.json.tmp"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    os.replace(os.path.join(a.out, "manifest.json.tmp"), os.path.join(a.out, "manifest.json"))

    mib = 1 << 20
    init = manifest["artefacts"]["initramfs"]["bytes"] / mib
    print(f"ramdisk: kernel {kver}, {len(pkgs)} packages, initramfs {init:.1f} MiB "
          f"(base {a.base_state}, project {a.project_state}); "
          f"base {manifest['seconds']['base']}s + project {manifest['seconds']['project']}s, "
          f"total {manifest['seconds']['total']}s")
    if init > 120:    # tests/e2e/test_ramdisk.py says why 120
        print(f"ramdisk: WARNING initramfs is {init:.1f} MiB, over the 120 MiB target")


if __name__ == "__main__":
    main()
