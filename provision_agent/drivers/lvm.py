"""LVM: physical volumes, volume groups, logical volumes (lvm2 command line)."""

import json

from provision_agent.errors import CommandError


def physical_volumes(runner):
    """[{"pv_name", "vg_name"}] as lvm sees them now; [] where lvm2 is missing or fails.

    A PV of a VG with missing members is listed as "[unknown]": there is no device to act on.
    """
    try:
        res = runner.run(["pvs", "--reportformat", "json", "-o", "pv_name,vg_name"],
                         check=False)
    except CommandError:     # no lvm2 here at all: then there is no LVM either
        return []
    if res.returncode != 0 or not res.stdout.strip():
        return []
    return [pv for report in json.loads(res.stdout).get("report", [])
            for pv in report.get("pv", [])]


def pv_create(runner, device):
    runner.run(["pvcreate", "--force", "--force", "--yes", "--zero", "y", device])


def vg_create(runner, name, pvs):
    runner.run(["vgcreate", "--yes", name, *pvs])


def lv_create_argv(args):
    argv = ["lvcreate", "--yes", "--wipesignatures", "y", "--zero", "y", "--name", args["name"]]
    if args.get("size_bytes"):
        argv += ["--size", f"{args['size_bytes']}b"]
    else:
        argv += ["--extents", args["extents"]]
    if args.get("stripes"):
        argv += ["--stripes", str(args["stripes"])]
    return argv + [args["vg"]]


def lv_create(runner, args):
    runner.run(lv_create_argv(args))
