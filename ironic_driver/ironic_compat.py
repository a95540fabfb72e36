"""Where Ironic's own Python API differs between the releases this interface supports, one
function per difference, each saying which releases and why. Everything else imports Ironic
directly; a difference found later gets its function here, not a version test at its use.
"""

from ironic.conductor import periodics


def periodic_spacing(read):
    """`spacing` for ironic.conductor.periodics.periodic, given `read`, a function returning
    the configured seconds.

    Ironic 39 (2025.2 and later) takes a callable and reads it once the configuration is
    loaded (periodics.refresh_periodic_attributes), also in its spawned workers. Earlier
    releases (29.x of 2025.1, 35.x) compare `spacing > 0` in the decorator itself: a callable
    there raised TypeError and the conductor refused to load the interface
    (DriverLoadError), so they get the number, read when this module is imported. Ironic
    imports deploy interfaces while loading drivers, after it parsed its configuration, so
    that is the configured value too; a change needs a conductor restart, as every other
    option of theirs does."""
    if hasattr(periodics, "refresh_periodic_attributes"):
        return read
    return read()
