"""LVM: physical volumes, volume groups, logical volumes (lvm2 command line)."""

import json
import os

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


def logical_volume_names(runner, vg):
    """Names of the LVs lvm sees in vg now; None when there is no such VG."""
    res = runner.run(["lvs", "--reportformat", "json", "-o", "lv_name", vg], check=False)
    if res.returncode != 0 or not res.stdout.strip():
        return None
    return [lv["lv_name"] for report in json.loads(res.stdout).get("report", [])
            for lv in report.get("lv", [])]


def kept_vg_problems(runner, args):
    """Why the VG a plan keeps (a vg_activate step's args) is not there as planned: [] when it
    consists of exactly the planned physical volumes and has every listed LV. Anything else
    would mean keeping part of a VG, or one living on a disk the plan does not name."""
    name = args["name"]
    mine = [pv["pv_name"] for pv in physical_volumes(runner) if pv.get("vg_name") == name]
    if not mine:
        return [f"volume group {name} to keep is not on this machine (no physical volume "
                f"of it was found); remove keep to create it"]
    planned = {os.path.realpath(pv) for pv in args["pvs"]}
    found = {os.path.realpath(pv) for pv in mine}
    problems = []
    if "[unknown]" in mine:
        problems.append(f"volume group {name} to keep is missing a physical volume (lvm "
                        f"lists it as [unknown]); its data is incomplete")
    extra = sorted(pv for pv in mine if pv != "[unknown]"
                   and os.path.realpath(pv) not in planned)
    if extra:
        problems.append(f"volume group {name} to keep also has physical volume(s) "
                        f"{', '.join(extra)}, which the plan does not keep; list every one of "
                        f"its partitions, kept, in pvs")
    absent = sorted(pv for pv in args["pvs"] if os.path.realpath(pv) not in found)
    if absent:
        problems.append(f"{', '.join(absent)}: not a physical volume of {name} now, so "
                        f"keeping {name} cannot keep it")
    lvs = logical_volume_names(runner, name) or []
    missing = [lv for lv in args["lvs"] if lv not in lvs]
    if missing:
        problems.append(f"volume group {name} to keep has no logical volume "
                        f"{', '.join(missing)} (it has: {', '.join(lvs) or 'none'})")
    return problems


def activate(runner, name):
    runner.run(["vgchange", "--activate", "y", name])
