"""Planning: the document's model, its checks, resolution against the disks, the plan and its
printable forms. Pure: a dry run and an Ironic conductor import this and nothing that touches a
machine.
"""
