"""LVM: physical volumes, volume groups, logical volumes (lvm2 command line)."""


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
