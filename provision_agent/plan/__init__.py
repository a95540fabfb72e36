"""Planning: the document's model, its checks, resolution against the disks, the plan and its
printable forms. Pure: a dry run and an Ironic conductor import this and nothing that touches a
machine.

The families stay name prefixes, not subpackages (validate, validate_text, validate_crypt,
validate_boot; planner, planner_crypt, planner_boot; steps, steps_crypt, step_base): each is one
main module and two or three small ones, which a listing already shows together; as subpackages
the main modules would need new names, and their parts would be three crypt.py and two boot.py,
ambiguous in a traceback or a grep where planner_crypt.py is not.
"""
