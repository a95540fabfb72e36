"""hdparm: the ATA security feature set of a disk, and SECURITY ERASE UNIT.

The erase needs a user password set first; it is a fixed, published one (PASSWORD): it
protects nothing, the erase clears it, and a disk left with it set after a failure is
unlocked again with it. A frozen disk (the firmware froze security at boot, as most do) or
a locked one cannot be erased this way: the caller falls back to another method.
"""

import re

PASSWORD = "provision-erase"
_MINUTES = re.compile(r"(\d+)min for (ENHANCED )?SECURITY ERASE UNIT")


def security(runner, disk):
    """The Security section of `hdparm -I`: {"supported", "enabled", "locked", "frozen",
    "enhanced": bool, "minutes": estimated minutes or None}; None without one."""
    res = runner.run(["hdparm", "-I", disk], check=False, timeout=60)
    if res.returncode != 0:
        return None
    return parse_security(res.stdout)


def parse_security(text):
    lines = text.splitlines()
    try:
        start = next(i for i, ln in enumerate(lines) if ln.strip() == "Security:")
    except StopIteration:
        return None
    state = {"supported": False, "enabled": False, "locked": False, "frozen": False,
             "enhanced": False, "minutes": None}
    for line in lines[start + 1:]:
        if line and not line[0].isspace():
            break                       # the next section
        words = line.split()
        if not words:
            continue
        negated = words[0] == "not"
        word = " ".join(words[1:] if negated else words)
        if word in ("supported", "enabled", "locked", "frozen"):
            state[word] = not negated
        elif word == "supported: enhanced erase":
            state["enhanced"] = True
        for minutes, enhanced in _MINUTES.findall(line):
            if bool(enhanced) == state["enhanced"] or state["minutes"] is None:
                state["minutes"] = int(minutes)
    return state


def usable(state):
    """Why SECURITY ERASE UNIT cannot run on a disk in this state, or None when it can."""
    if not state or not state["supported"]:
        return "no ATA security feature set"
    for word in ("frozen", "locked", "enabled"):
        if state[word]:
            return f"ATA security is {word}"
    return None


def security_erase(runner, disk, state):
    """Set the published password, then SECURITY ERASE UNIT (enhanced when supported).
    The timeout follows the disk's own estimate (twice it, at least an hour)."""
    timeout = max(3600, 2 * 60 * (state.get("minutes") or 0))
    runner.run(["hdparm", "--user-master", "u", "--security-set-pass", PASSWORD, disk],
               timeout=120)
    erase = "--security-erase-enhanced" if state["enhanced"] else "--security-erase"
    try:
        runner.run(["hdparm", "--user-master", "u", erase, PASSWORD, disk], timeout=timeout)
    except Exception:
        # never leave the disk locked behind our password
        runner.run(["hdparm", "--user-master", "u", "--security-disable", PASSWORD, disk],
                   check=False, timeout=120)
        raise
