"""A scripted stand-in for provision_agent.run.runner.Runner: records argv, answers by prefix."""

import os

from provision_agent.drivers import chroot
from provision_agent.errors import CommandError
from provision_agent.run.runner import Result

WRITING = ("sgdisk", "parted", "sfdisk --part-type", "sfdisk --quiet", "wipefs", "mdadm --create",
           "mdadm --assemble", "mdadm --zero-superblock", "mdadm --stop", "pvcreate", "pvremove",
           "vgcreate", "vgchange", "lvcreate", "mkfs", "mkswap", "mount", "umount", "dd",
           "grub-install", "fallocate", "blkdiscard", "cryptsetup")


def act_like_grub_mkconfig(argv):
    """What the image's grub-mkconfig leaves when run in a target (chroot.Chroot.argv): its
    -o file, inside the target root."""
    if "grub-mkconfig" not in argv or chroot.ENTER not in argv or "-o" not in argv:
        return
    root, output = argv[argv.index(chroot.ENTER) + 1], argv[argv.index("-o") + 1]
    path = os.path.join(root, output.lstrip("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("# by the fake grub-mkconfig\n")


class FakeRunner:
    def __init__(self, answers=None, fail=None):
        # answers: {"lsblk --json": stdout or Result-like tuple (rc, stdout)}
        self.answers = answers or {}
        self.fail = fail or ()
        self.calls = []
        self.inputs = {}            # index in calls -> the stdin that call was given

    def run(self, argv, check=True, timeout=None, input=None, ok_codes=(0,), log_input=False):
        argv = [str(a) for a in argv]
        if input is not None:
            self.inputs[len(self.calls)] = input
        self.calls.append(argv)
        line = " ".join(argv)
        for prefix in self.fail:
            if line.startswith(prefix):
                if check:
                    raise CommandError(argv, 1, "", f"{argv[0]}: simulated failure")
                return Result(tuple(argv), 1, "", "simulated failure", 0.0)
        rc, out = 0, ""
        for prefix, answer in self.answers.items():
            if line.startswith(prefix):
                rc, out = answer if isinstance(answer, tuple) else (0, answer)
                break
        if check and rc not in ok_codes:
            raise CommandError(argv, rc, out, "")
        act_like_grub_mkconfig(argv)
        return Result(tuple(argv), rc, out, "", 0.0)

    def lines(self):
        return [" ".join(c) for c in self.calls]

    def writes(self):
        return [line for line in self.lines() if line.startswith(WRITING)]
