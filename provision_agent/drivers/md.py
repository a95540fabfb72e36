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


def examine(runner, member):
    """mdadm --examine --export of member as a dict (MD_UUID, MD_NAME, MD_LEVEL, MD_DEVICES,
    ...); {} when it holds no md superblock."""
    res = runner.run(["mdadm", "--examine", "--export", member], check=False)
    if res.returncode != 0:
        return {}
    return dict(line.split("=", 1) for line in res.stdout.splitlines() if "=" in line)


def kept_array_problems(runner, args):
    """Why the array a plan keeps (an md_assemble step's args) is not on its members as
    planned: [] when every member and spare carries a superblock of one array, of the planned
    name and level, that counts exactly the listed members. Anything else would assemble
    another array, or one with members on disks the plan does not keep."""
    name, level, listed = args["name"], f"raid{args['level']}", args["members"]
    found = {m: examine(runner, m) for m in listed + list(args.get("spares") or [])}
    bare = [m for m, sb in found.items() if not sb.get("MD_UUID")]
    if bare:
        return [f"{', '.join(bare)}: no md superblock, so there is no array {name} on it to "
                f"keep; remove keep to create the array"]
    problems = []
    uuids = {sb["MD_UUID"] for sb in found.values()}
    if len(uuids) > 1:
        problems.append(f"the members of {name} to keep belong to {len(uuids)} different "
                        f"arrays ({', '.join(sorted(uuids))})")
    for member, sb in found.items():
        have = sb.get("MD_NAME", "").rpartition(":")[2]      # "host:name" or "name"
        if have != name:
            problems.append(f"{member} is a member of array {have or '(unnamed)'}, the layout "
                            f"keeps {name}")
        if sb.get("MD_LEVEL") != level:
            problems.append(f"{member}: the array is {sb.get('MD_LEVEL')}, the layout says "
                            f"{level}")
        if sb.get("MD_DEVICES") != str(len(listed)):
            problems.append(f"{member}: the array has {sb.get('MD_DEVICES')} devices, the layout "
                            f"lists {len(listed)} members: list every one (kept), or one on a "
                            f"disk the plan does not keep would be kept only in part")
    return list(dict.fromkeys(problems))


def assemble(runner, args, active):
    """Bring the kept array up as /dev/md/NAME from its listed members and spares, stopping
    first `active`: the arrays udev assembled from them already (under whatever name)."""
    for device in active:
        runner.run(["mdadm", "--stop", device])
    runner.run(["mdadm", "--assemble", args["device"], "--run",
                *args["members"], *(args.get("spares") or [])])
