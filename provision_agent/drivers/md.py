"""MD RAID with mdadm: create arrays and describe them for the target's mdadm.conf."""

import logging

LOG = logging.getLogger(__name__)


def create_argv(args):
    members, spares = args["members"], args.get("spares") or []
    argv = ["mdadm", "--create", args["device"], "--run", "--verbose",
            f"--level={args['level']}", f"--raid-devices={len(members)}",
            f"--metadata={args['metadata']}", f"--name={args['name']}",
            # no host prefix in the array name, so the target sees the same /dev/md/NAME
            "--homehost=<none>"]
    if spares:
        argv.append(f"--spare-devices={len(spares)}")
    if args.get("chunk_kib") and args["level"] in (0, 4, 5, 6, 10):
        argv.append(f"--chunk={args['chunk_kib']}K")
    return argv + members + spares


def create(runner, args):
    runner.run(create_argv(args))


def conf_lines(runner, arrays):
    """ARRAY lines for mdadm.conf, one per array device."""
    lines = []
    for dev in arrays:
        res = runner.run(["mdadm", "--detail", "--brief", dev])
        lines += [line for line in res.stdout.splitlines() if line.startswith("ARRAY")]
    return lines
