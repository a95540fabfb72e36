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


def device_lines(runner, members):
    """DEVICE lines for mdadm.conf that let md see each member by one stable name only.

    Written when a member sits on a multipath disk: the installed system's kernel also shows
    that partition on every path (sda2, sdb2), and udev's incremental assembly in the
    initramfs would take a path's partition before multipath runs, which then cannot claim
    the path (EBUSY) and the disk stays unassembled. mdadm --incremental checks the device
    and its udev links against DEVICE lines; a multipath member is allowed by its map's
    dm-uuid link, any other member by its by-id (else by-path) link, read here.
    """
    names = []
    for member in members:
        if member.startswith("/dev/disk/by-id/dm-uuid-"):
            names.append(member)
            continue
        res = runner.run(["udevadm", "info", "--query=symlink", f"--name={member}"], check=False)
        links = ["/dev/" + link for link in res.stdout.split()]
        stable = [ln for ln in links if ln.startswith("/dev/disk/by-id/")] or \
            [ln for ln in links if ln.startswith("/dev/disk/by-path/")]
        if not stable:
            LOG.warning("mdadm.conf: %s has no by-id or by-path link; named by its kernel name",
                        member)
        names.append(sorted(stable)[0] if stable else member)
    return [f"DEVICE {name}" for name in names]
