"""CPU time and threads of a process tree, read from /proc: what the Ironic benchmarks charge to
a conductor (the all-in-one ironic forks its services) and to sshd (one child per connection)."""

import os


def threads_of_tree(pid):
    """Threads of pid and its descendants (the all-in-one ironic forks its services).
    /proc/P/task/T/children lists only the children that thread T forked, so every
    thread's list is read (ironic's master forks its service from a second thread)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        total += len(tids)
        for tid in tids:
            try:
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
            except OSError:
                pass
    return total


def cpu_seconds(pid):
    """CPU time of pid plus its reaped children (sshd reaps one child per connection)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid):
    """CPU time of pid and its living descendants (with what each reaped)."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            total += cpu_seconds(p)
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return total
