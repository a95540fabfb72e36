"""How fast does provision write an image compared with the operator's shell pipeline and with
ironic-python-agent? (a benchmark, not a test; root; about 5 minutes)

    python3 -m benchmarks.image_write [--size-mib 1024] [--runs 5] [--compression none ...]
                                      [--ipa-python PY]

Prepares (once, cached in --work) a raw ext4 image: half of it real files copied from /usr,
the rest free space (zeros), compressed with `gzip -6` and `zstd -3`. Serves them from a
separate `python3 -m http.server` process on 127.0.0.1 and writes each, several times, onto a
loop device backed by a file in /dev/shm (so the pipeline, not this VM's virtual disk, is what
is measured) or, with --target-dir on a real disk, in that directory; the loop device does
direct I/O to its file where the file system allows it (not tmpfs), as a real target disk has
no page cache under it. Contenders, all reading the same URL and writing the same loop device:

  shell     curl -s URL | gzip -dc | dd of=DEV bs=4M iflag=fullblock oflag=direct conv=fsync
            (no checksum, no resize)
  ours      provision_agent.drivers.images.writer.write_to(..., fmt='raw', grow=False) with a
            sha256 of the compressed stream checked; target not pre-zeroed: the data written,
            the zero runs given to the device's write-zeroes (the loop device has it)
  ours+z    the same after provision's own cheap zeroing (images.formats.zero_device:
            fallocate --punch-hole, i.e. write-zeroes by unmapping); zeroing time shown
            separately and also added in the 'incl. zeroing' column
  ipa       ironic-python-agent's StandbyExtension._stream_raw_image_onto_device (its path for
            raw images); it cannot decompress, so it only runs on the uncompressed image
  limit     each stage alone (image_limits.py), in the same run: decompress, download, write,
            and sha256 for its CPU; the limit is the slowest stage's time or, when longer, all
            stages' CPU seconds (this process, curl, the HTTP server, kernel threads) over the
            cores this process may use; the old figure, the slowest stage alone, is kept beside it

Every input runs in --runs rounds: each contender once, then each stage alone once, so the
contenders and the stages they are held to share the same minutes (the host's speed drifts).
Medians over the rounds make the table; each round's own limit / ours is printed beside it.
"""

import argparse
import contextlib
import hashlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import image_limits
from provision_agent.drivers.images import formats, writer
from provision_agent.run.runner import Runner

REPO = Path(__file__).resolve().parents[1]
DEFAULT_IPA = "/tmp/venv-ipa/bin/python"


def sh(*argv, **kw):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw).stdout


def copy_real_files(dest, budget):
    """Real files (binaries, libraries, text) so that compression ratios are realistic."""
    copied = 0
    for top in ("/usr/lib", "/usr/share", "/usr/bin"):
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            for name in sorted(filenames):
                src = os.path.join(dirpath, name)
                if not os.path.isfile(src) or os.path.islink(src):
                    continue
                size = os.path.getsize(src)
                if copied + size > budget:
                    if copied > budget * 0.98:
                        return copied
                    continue        # a big file that does not fit; smaller ones still may
                dst = os.path.join(dest, src.lstrip("/"))
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                try:
                    shutil.copy2(src, dst)
                except OSError:
                    continue
                copied += size
    return copied


def prepare(work, size_mib):
    raw = work / f"ext4-{size_mib}m.img"
    if not raw.exists():
        print(f"preparing {raw} ...", flush=True)
        tmp = raw.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.truncate(size_mib << 20)
        sh("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", str(tmp))
        mnt = work / "mnt"
        mnt.mkdir(exist_ok=True)
        sh("mount", "-o", "loop", str(tmp), str(mnt))
        try:
            copied = copy_real_files(str(mnt), (size_mib << 20) // 2)
        finally:
            sh("umount", str(mnt))
        sh("e2fsck", "-fn", str(tmp))
        tmp.rename(raw)
        print(f"  {copied >> 20} MiB of files from /usr", flush=True)
    made = {"none": raw}
    for comp, argv in (("gzip", ["gzip", "-6", "-c"]), ("zstd", ["zstd", "-3", "-T2", "-q", "-c"])):
        out = raw.with_name(raw.name + (".gz" if comp == "gzip" else ".zst"))
        if not out.exists():
            print(f"compressing with {' '.join(argv)} ...", flush=True)
            with open(out.with_suffix(".tmp"), "wb") as f:
                subprocess.run(argv + [str(raw)], stdout=f, check=True)
            out.with_suffix(".tmp").rename(out)
        made[comp] = out
    return made


def sha256_of(path, limit=None, drop_cache=False):
    """drop_cache: leave none of path's pages cached (a device read back between runs), or the
    next O_DIRECT write to it pays for invalidating them and the run after a check is slower."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        left = limit
        while left is None or left > 0:
            data = f.read(8 << 20 if left is None else min(8 << 20, left))
            if not data:
                break
            h.update(data)
            if left is not None:
                left -= len(data)
        if drop_cache:
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return h.hexdigest()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def served_onto_loop(work, size, backing, direct=True):
    """The images in work served by a separate `python3 -m http.server` on 127.0.0.1, and a
    loop device over a file of size bytes at backing; yields (port, server, device), and
    stops the server and detaches and removes the loop device's file afterwards."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1",
                               str(port), "--directory", str(work)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    dev = None
    try:
        with open(backing, "wb") as f:
            f.truncate(size)
        dev = sh("losetup", "-f", "--show", "--direct-io=" + ("on" if direct else "off"),
                 str(backing)).strip()
        time.sleep(0.5)
        yield port, server, dev
    finally:
        server.terminate()
        server.wait()
        if dev:
            subprocess.run(["losetup", "-d", dev])
        backing.unlink(missing_ok=True)


def timed(fn, row, name, server_pid):
    """One run: its wall seconds go to row[name], the other readings of image_limits.meter()
    to row[what][name]."""
    got = image_limits.meter(fn, server_pid)
    row.setdefault(name, []).append(got.pop("time"))
    for what, value in got.items():
        row.setdefault(what, {}).setdefault(name, []).append(value)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--work", default="/var/tmp/provision-image-bench")
    ap.add_argument("--target-dir", default="/dev/shm",
                    help="where the loop device's backing file lives: /dev/shm measures the "
                         "pipeline; a directory on a real disk shows what zero-skipping saves")
    ap.add_argument("--buffered-loop", action="store_true",
                    help="loop device without direct I/O (before 2026-11-25): its writes land in "
                         "the backing file's page cache and the final fsync flushes all of it at "
                         "once, a cost a real disk spreads over the write")
    ap.add_argument("--compression", nargs="+", choices=("gzip", "zstd", "none"),
                    default=["gzip", "zstd", "none"],
                    help="the inputs to run (all three by default); 'none' is the raw image")
    ap.add_argument("--ipa-python", default=DEFAULT_IPA,
                    help="python of a venv with `pip install ironic-python-agent`")
    opts = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (loop devices, mount)")
    t0 = time.monotonic()
    load = [sh("uptime").strip()]
    work = Path(opts.work)
    work.mkdir(parents=True, exist_ok=True)
    images = prepare(work, opts.size_mib)
    raw = images["none"]
    raw_size = raw.stat().st_size
    raw_sha = sha256_of(raw)
    for comp, path in images.items():
        print(f"image {comp:5s} {path.stat().st_size >> 20:5d} MiB  {path.name}")

    backing = Path(opts.target_dir) / "provision-image-bench-target"
    runner = Runner()
    results = {}
    with served_onto_loop(work, raw_size, backing, not opts.buffered_loop) as (port, server, dev):
        # tmpfs has no O_DIRECT: losetup then leaves direct I/O off without a word; read it back
        opts.loop_dio = Path(f"/sys/block/{Path(dev).name}/loop/dio").read_text().strip() == "1"
        for comp in opts.compression:
            path = images[comp]
            url = f"http://127.0.0.1:{port}/{path.name}"
            comp_sha = "sha256:" + sha256_of(path)
            tool = {"gzip": "gzip -dc | ", "zstd": "zstd -dc | ", "none": ""}[comp]
            pipeline = (f"curl -s {url} | {tool}dd of={dev} bs=4M iflag=fullblock "
                        f"oflag=direct conv=fsync status=none")

            def shell():
                subprocess.run(["bash", "-o", "pipefail", "-c", pipeline], check=True)

            def ours(zeroed=False):
                writer.write_to(url, dev, fmt="raw", checksum=comp_sha,
                                target_zeroed=zeroed, runner=runner, grow=False)

            zero_times = []

            def ours_zeroed():
                start = time.monotonic()
                # what provision does before a raw write (the loop device says rotational,
                # hence 'always'); fails loudly rather than timing a write that skips nothing
                if not formats.zero_device(runner, dev, "always"):
                    raise SystemExit(f"{dev} could be zeroed by unmapping, now cannot")
                zero_times.append(time.monotonic() - start)
                start = time.monotonic()
                ours(True)
                return time.monotonic() - start

            def check(name):
                got = sha256_of(dev, raw_size, drop_cache=True)
                if got != raw_sha:
                    raise SystemExit(f"{name} ({comp}) wrote a wrong image: {got}")

            row = {}
            contenders = [("shell", shell), ("ours", ours)]
            if formats.zero_device(runner, dev, "always"):
                contenders.append(("ours+z", ours_zeroed))
            else:
                print(f"{comp}: {dev} cannot be zeroed by unmapping here; no ours+z row")
            stages = image_limits.stages(comp, path, raw, url, dev)
            ipa = comp == "none" and ipa_ready(opts)
            # Rounds: every contender once, then every stage alone once. The host's speed
            # drifts by a fifth from one minute to the next (2026-11-28: the zstd decoder
            # alone 0.71-1.54 s in ten minutes), so runs of one kind kept together measure
            # the drift as much as the pipeline.
            for _ in range(opts.runs):
                for name, fn in contenders:
                    if name != "ours+z":
                        reset(runner, dev)      # same starting state; ignored by these two
                    timed(fn, row, name, server.pid)
                    check(name)
                if ipa:
                    row.setdefault("ipa", []).append(run_ipa(opts, url, dev, raw_sha))
                    check("ipa")
                reset(runner, dev)
                image_limits.measure_round(stages, server.pid, row.setdefault("limit", {}))
                check("write alone")
            row["zeroing"] = zero_times
            results[comp] = row
    load.append(sh("uptime").strip())
    report(results, raw_size, opts, time.monotonic() - t0, load)


def reset(runner, dev):
    """Zeros on dev. Punching holes first: on Linux 6.18 with the loop file on tmpfs, one
    `blkdiscard -z` (write-zeroes, which tmpfs cannot do) turns write-zeroes off on the loop
    device for good, and ours+z could not run after it."""
    if not formats.zero_device(runner, dev, "always"):
        sh("blkdiscard", "-z", dev)


def ipa_ready(opts):
    if os.path.exists(opts.ipa_python):
        return True
    print(f"ipa: not run: {opts.ipa_python} missing (python3 -m venv /tmp/venv-ipa && "
          f"/tmp/venv-ipa/bin/pip install ironic-python-agent)")
    return False


def run_ipa(opts, url, dev, raw_sha):
    """One run of IPA's stream write; its own seconds, timed inside its process."""
    script = str(REPO / "benchmarks" / "ipa_stream_write.py")
    out = sh(opts.ipa_python, script, url, dev, raw_sha)
    return float(out.strip().splitlines()[-1])


def fmt(times):
    if not times:
        return "      -        -"
    return f"{min(times):7.2f} {statistics.median(times):7.2f}"


MEASURES = ("cpu", "server", "kernel", "idle")


def report(results, raw_size, opts, total, load):
    mib = raw_size / (1 << 20)
    cores = image_limits.usable_cores()
    print(f"\nload at start: {load[0]}\nload at end:   {load[1]}")
    print(f"\n{mib:.0f} MiB ext4 image (half files, half zeros) onto a loop device backed by "
          f"{opts.target_dir} (direct I/O {'on' if opts.loop_dio else 'off'}), "
          f"{opts.runs} runs each; "
          f"seconds min / median; MB/s of image bytes on the median")
    print(f"CPU s: this process's and its children's, median; all CPU s: that + the HTTP "
          f"server's + kernel threads' (the loop device's workers), sum of the medians; idle: "
          f"the machine's idle share while it ran, median, of {os.cpu_count()} cores "
          f"({cores} usable here)")
    print(f"{'input':6s} {'who':8s} {'min':>7s} {'median':>7s} {'MB/s':>7s} {'CPU s':>7s} "
          f"{'all CPU':>7s} {'idle':>5s}")
    for comp, row in results.items():
        for who in ("shell", "ours", "ours+z", "zeroing", "ipa"):
            times = row.get(who)
            if not times:
                continue
            rate = raw_size / 1e6 / statistics.median(times)
            med = {m: statistics.median(row[m][who]) for m in MEASURES if who in row.get(m, {})}
            cpu = (f"{med['cpu']:7.2f} {med['cpu'] + med['server'] + med['kernel']:7.2f} "
                   f"{med['idle']:5.0%}" if med else "")
            print(f"{comp:6s} {who:8s} {fmt(times)} {rate if who != 'zeroing' else 0:7.0f} {cpu}")
        med = {k: statistics.median(v) for k, v in row.items()
               if v and k not in ("limit", *MEASURES)}
        zeroed = "ours+z" in med
        print(f"{comp:6s} speed-up vs shell: ours {med['shell'] / med['ours']:.2f}x"
              + (f", ours+z {med['shell'] / med['ours+z']:.2f}x, ours+z incl. zeroing "
                 f"{med['shell'] / (med['ours+z'] + med['zeroing']):.2f}x" if zeroed else "")
              + (f"; vs ipa: ours {med['ipa'] / med['ours']:.2f}x"
                 + (f", ours+z {med['ipa'] / med['ours+z']:.2f}x" if zeroed else "")
                 if "ipa" in med else ""))
    print(f"\nlimit: each stage alone, medians; CPU s as above (proc = this process and curl); "
          f"the limit is the larger of the slowest stage (decompress, download, write) and all "
          f"four stages' CPU s over {cores} cores; ours / limit = the limit over ours' time "
          f"(1.00x: ours is as fast as the limit; target 0.90x); old = the slowest stage alone "
          f"over ours; sum = the stages' wall times added up over ours")
    print(f"{'input':6s} {'stage':10s} {'wall s':>7s} {'CPU s':>7s} {'proc':>6s} {'server':>6s} "
          f"{'kernel':>6s} {'idle':>5s}")
    for comp, row in results.items():
        print(stage_lines(comp, row))
    for comp, row in results.items():
        print(limit_line(comp, row, cores))
    print(f"whole benchmark: {total:.0f} s")


def stage_medians(row):
    """({stage: wall median}, {stage: CPU s}, {what: {stage: median}}) of one input's limit run;
    a stage's CPU s is the sum of its measures' medians, so that its parts add up."""
    got = row["limit"]
    med = {what: {stage: statistics.median(v) for stage, v in by_stage.items()}
           for what, by_stage in got.items()}
    cpu = {stage: med["cpu"][stage] + med["server"][stage] + med["kernel"][stage]
           for stage in med["time"]}
    return med["time"], cpu, med


def stage_lines(comp, row):
    wall, cpu, med = stage_medians(row)
    return "\n".join(
        f"{comp:6s} {s:10s} {wall[s]:7.2f} {cpu[s]:7.2f} {med['cpu'][s]:6.2f} "
        f"{med['server'][s]:6.2f} {med['kernel'][s]:6.2f} {med['idle'][s]:5.0%}"
        for s in (*image_limits.STAGES, "sha256") if s in wall)


def limit_line(comp, row, cores):
    wall, cpu, _ = stage_medians(row)
    lim = image_limits.limit(wall, cpu, cores)
    ours = statistics.median(row["ours"])
    lib = f" (gzip library {image_limits.gzip_library()})" if comp == "gzip" else ""
    shell = statistics.median(row["shell"])
    return (f"{comp:6s} slowest stage {lim.slowest} {lim.slowest_seconds:.2f} s{lib}; CPU "
            f"{lim.cpu_seconds:.2f} s / {cores} = {lim.cpu_seconds / cores:.2f} s; limit "
            f"{lim.seconds:.2f} s ({lim.bound}); ours {ours:.2f} s = {lim.seconds / ours:.2f}x "
            f"the limit (old: {lim.slowest_seconds / ours:.2f}x the slowest stage), "
            f"{sum(wall.values()) / ours:.2f}x the sum; shell / ours {shell / ours:.2f}x; "
            f"per round: {round_ratios(row, cores)}")


def round_ratios(row, cores):
    """Each round's limit over that round's ours, and their median: a round's runs are
    seconds apart, so the host's drift between rounds cancels in them."""
    got, ratios = row["limit"], []
    for r, ours in enumerate(row["ours"]):
        wall = {stage: runs[r] for stage, runs in got["time"].items()}
        cpu = {stage: got["cpu"][stage][r] + got["server"][stage][r] + got["kernel"][stage][r]
               for stage in wall}
        ratios.append(image_limits.limit(wall, cpu, cores).seconds / ours)
    return (" ".join(f"{x:.2f}" for x in ratios)
            + f", median {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
