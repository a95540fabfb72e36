"""The VM bench's guest CPU model under TCG: the same work in the ramdisk VM (1 vCPU) with
each model, rounds interleaved, ratios against the first model from the same run.

    PYTHONPATH=$PWD .tox/e2e/bin/python benchmarks/vmbench_cpu_model.py max,qemu64 2

What runs in the guest: boot to SSH; 400 execs of /bin/true (what mkinitramfs does most);
a shell arithmetic loop; provision's CLI import; zstd -3 compress + decompress of 128 MiB of
random bytes; zlib level 6 both ways on 16 MiB (half random). The bench's default is `-cpu
max`; VMBENCH_CPU picks another for the suites.
"""

import os
import statistics
import sys

from tests.vmbench import VM, ensure_ramdisk

WORK = {
    "execs": "python3 -c \"import subprocess,time;t=time.monotonic();"
             "[subprocess.run(['/bin/true']) for _ in range(400)];print(time.monotonic()-t)\"",
    "sh-loop": "python3 -c \"import subprocess,time;t=time.monotonic();subprocess.run(['sh','-c',"
               "'i=0; while [ \\$i -lt 20000 ]; do i=\\$((i+1)); done']);"
               "print(time.monotonic()-t)\"",
    "py-import": "python3 -c 'import time;t=time.monotonic();import provision_agent.cli.main;"
                 "print(time.monotonic()-t)'",
    "zstd": "head -c 64M /dev/urandom > /tmp/r && cat /tmp/r /tmp/r > /tmp/rr && "
            "s=$(date +%s%N) && zstd -q -3 -f /tmp/rr -o /tmp/rr.zst && "
            "zstd -q -d -f /tmp/rr.zst -o /dev/null && "
            "echo $(( ($(date +%s%N) - s) / 1000000 ))e-3",
    "zlib": "python3 -c \"import time,zlib;d=open('/tmp/r','rb').read(8<<20)+bytes(8<<20);"
            "t=time.monotonic();zlib.decompress(zlib.compress(d,6));print(time.monotonic()-t)\"",
}


def one(model, ramdisk, res):
    os.environ["VMBENCH_CPU"] = model
    with VM(disks=1, disk_size="1G", name=f"cpu-{model}", ramdisk=ramdisk, cpus=1) as vm:
        res.setdefault((model, "boot"), []).append(vm.boot_seconds)
        for name, cmd in WORK.items():
            res.setdefault((model, name), []).append(
                float(vm.ssh(cmd, timeout=900).stdout.split()[-1]))


def main(argv):
    models, rounds = argv[1].split(","), int(argv[2]) if len(argv) > 2 else 2
    ramdisk, res = ensure_ramdisk(), {}
    for r in range(rounds):
        for model in models:
            one(model, ramdisk, res)
            print(f"round {r} {model}: " + ", ".join(
                f"{k} {v[-1]:.2f} s" for (m, k), v in res.items() if m == model), flush=True)
    print(f"medians of {rounds} round(s), ratio to {models[0]}:")
    for name in ["boot", *WORK]:
        med = {m: statistics.median(res[(m, name)]) for m in models}
        print(f"  {name}: " + ", ".join(f"{m} {med[m]:.2f} s ({med[m] / med[models[0]]:.2f}x)"
                                        for m in models))


if __name__ == "__main__":
    main(sys.argv)
