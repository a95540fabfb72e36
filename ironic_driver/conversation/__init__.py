"""Talking to the ramdisk and following its job, from the heartbeat to the exit code.

heartbeat.py records what the ramdisk's heartbeat says (where its SSH is, its host key);
follow.py is one look at a node: start the job over SSH (starting.py, ssh.py, remote.py), read
its progress and exit code, move the node on. fast_track.py decides whether a ramdisk left
running (Ironic's fast track) takes the next job, and starts it there from the step. job.py is
the job's state in the node, record.py and turns.py its database writes, timeouts.py how long
silence may last, recovery.py the recovery keys the ramdisk leaves, fanout.py and pace.py which
looks run in the conductor's workers and when.
kernel_params.py is placed here: it refuses the tenant's kernel parameters that would reach
our ramdisk's command line, for every boot into the ramdisk (validate calls it too).

Nothing here builds a document: the interface passes follow() the function that does
(document.sent.for_ramdisk), and import-linter keeps document/ out.
"""
