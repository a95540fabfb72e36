"""What of a ramdisk's, a registry's or a BMC's text goes into the node's record or a log
line, and how much.

Events and the output tail come from the ramdisk, where a broken provision or an image's hook
may write anything; an SSH or SFTP error carries whatever the ramdisk's server sent (a banner
line, a status message: megabytes, if it likes); a registry's or Glance's refusal likewise.
They land in driver_internal_info, which every heartbeat and poll rewrites (a Text column:
64 KiB on MariaDB), in last_error, which operators read in a terminal, and in the conductor's
log. So each event is cut to a size, the kept ones together to a budget, and every other such
text goes through bounded(): cut to a number of characters and stripped of the control
characters that would drive the reader's terminal (escape sequences included).
"""

import json
import re

EVENT_BYTES = 1024          # one event as JSON; provision's own are 100-300 bytes
EVENTS_BYTES = 16 * 1024    # all kept events together
STRING_CHARS = 200          # any one string inside a cut-down event
TAIL_CHARS = 4000           # the output tail in last_error
LINE_CHARS = 500            # one line of that tail
ERROR_CHARS = 1000          # one error from a ramdisk, registry or BMC (provision_last_ssh_error)
LOG_CHARS = 500             # one log line of paramiko's, which may quote what the server sent
WHY_CHARS = 1500            # provision's reason, the first line of last_error
MESSAGE_CHARS = TAIL_CHARS + 2000   # a whole last_error: the output tail and what says why

# CSI and OSC sequences whole (so no stray "[31m" is left), then any other control character
# but newline and tab. Each alternative is linear: no nested repetition.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|"
                      r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# What identifies an event, kept when the rest is cut.
_KEYS = ("event", "time", "index", "count", "kind", "status", "step", "exit_code")


def clean_text(text):
    return _ESCAPES.sub("", text)


def bounded(text, limit=ERROR_CHARS):
    """text (or any object's str(), an exception's) as it may be stored in the node or logged:
    without terminal control characters, at most limit characters and a note of the cut. The
    one way such text is kept: every last_error of ours (record.fail), every SSH error, every
    registry's, Glance's or paramiko's message."""
    text = str(text)
    # Clean no more than could be kept (an 8 MB SFTP status message costs a slice, not a
    # scan): a cut inside an escape sequence leaves its tail, which has no control character.
    kept = clean_text(text[:2 * limit])
    if len(kept) <= limit and len(text) <= 2 * limit:
        return kept
    return f"{kept[:limit]} [... cut: {len(text)} characters in all]"


def tail_for_error(text):
    """The output tail as it goes into last_error: clean, each line and the whole bounded."""
    lines = []
    for line in clean_text(text).splitlines():
        if len(line) > LINE_CHARS:
            line = line[:LINE_CHARS] + f" [... {len(line) - LINE_CHARS} more characters]"
        lines.append(line)
    joined = "\n".join(lines)
    if len(joined) > TAIL_CHARS:
        joined = "[...]\n" + joined[-TAIL_CHARS:]
    return joined


def failed_text(code, events, tail, what="provision"):
    """last_error for a provision that exited `code`: why, in one line, first (a disk's fault
    names the disk, the step and the kernel's line in one line of provision's), then the
    output's tail. Why is provision's own word: its `result` event, else its last
    "provision: error:" line. `what` names the job (a vendor step names itself)."""
    why = _why(events, tail)
    head = f"{what} exited with {code}" + (f": {why}" if why else "")
    return f"{head}\nlast output:\n{tail_for_error(tail)}"


def _why(events, tail):
    for event in reversed(list(events or [])):
        if (isinstance(event, dict) and event.get("event") == "result"
                and event.get("status") == "failed" and isinstance(event.get("message"), str)
                and event["message"].strip()):
            return _one_line(event["message"])
    for line in reversed(clean_text(tail or "").splitlines()):
        for prefix in ("provision: error: ", "provision: "):
            if line.startswith(prefix) and "error" in line[:40]:
                return _one_line(line[len(prefix):])
    return ""


def _one_line(text):
    return bounded(" ".join(clean_text(text[:2 * WHY_CHARS]).split()), WHY_CHARS)


def _size(value):
    return len(json.dumps(value, separators=(",", ":"), default=str))


def _clean(value):
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {str(k)[:STRING_CHARS]: _clean(v) for k, v in value.items()}
    return value


def bound_event(event):
    """The event as kept: itself when small, else its identifying keys (strings cut) and how
    large it was."""
    if not isinstance(event, dict):
        event = {"event": "unparsed", "line": str(event)[:STRING_CHARS]}
    event = _clean(event)
    size = _size(event)
    if size <= EVENT_BYTES:
        return event
    kept = {}
    for key in _KEYS:
        value = event.get(key)
        if isinstance(value, str):
            kept[key] = value[:STRING_CHARS]
        elif isinstance(value, (int, float, bool)) or value is None:
            if key in event:
                kept[key] = value
    kept["truncated_bytes"] = size
    return kept


def keep(previous, new, count):
    """The latest events to keep: at most count of them and EVENTS_BYTES together."""
    events = [bound_event(e) for e in list(previous or []) + list(new)][-count:]
    total = sum(_size(e) for e in events)
    while events and total > EVENTS_BYTES:
        total -= _size(events.pop(0))
    return events
