"""Where Ironic's own Python API differs between the releases this interface supports, one
function per difference, each saying which releases and why. Everything else imports Ironic
directly; a difference found later gets its function here, not a version test at its use.

The releases supported are those of the maintained OpenStack series from 2025.1 (Epoxy, a
SLURP release: Ironic 29.x) on; docs/ironic.md ("Ironic releases") names each series with its
Ironic version and how it is tested. An older Ironic is refused when the conductor loads the
interface (require_supported), with the version found and what to do, rather than failing
later in the middle of a deploy on a function that moved.

What every supported release has alike, checked against 29.1.0, 32.1.0, 35.1.0 and 39.0.0
(the newest release of 2025.1, 2025.2, 2026.1 and 2026.2): every name ironic_driver imports
from Ironic, the signatures of the functions it calls (manager_utils' power, boot-device,
error-handler and resume helpers, deploy_utils' agent options and instance info,
task.spawn_after, the conductor's _spawn_worker, deployments.continue_node_deploy), the
abstract methods of DeployInterface and RAIDInterface, and deploy_step/clean_step's keywords
as used here (deploy_step's `abortable`, new in 35, is not used). The differences are below.
"""

import functools
import importlib.metadata
import inspect
import logging
import re
import types

from ironic.common import image_service
from ironic.conductor import periodics
from ironic.conductor import steps as conductor_steps
from ironic.conf import CONF

LOG = logging.getLogger(__name__)

# The first release of the oldest series supported (2025.1's stable branch began at 29.0.0).
OLDEST = (29, 0)
# The newest release tested (tox.ini [ironic-series] newest; a unit test keeps them equal).
NEWEST_TESTED = "39.0.0"


class UnsupportedIronic(RuntimeError):
    """The installed Ironic is older than this interface supports. Raised while Ironic loads
    the interface, which makes it a DriverLoadError naming the interface, with this text."""


def installed_version():
    """The installed Ironic's version string, from its distribution metadata (pip, distribution
    packages and container images all install it), or None when there is none."""
    try:
        return importlib.metadata.version("ironic")
    except importlib.metadata.PackageNotFoundError:
        return None


def release(version):
    """(major, minor) of an Ironic version string such as 29.1.0 or 40.0.0.0rc2.dev3; None
    when it does not start with two numbers."""
    found = re.match(r"(\d{1,4})\.(\d{1,4})", version or "")
    return (int(found.group(1)), int(found.group(2))) if found else None


def require_supported(version=None):
    """Raises UnsupportedIronic unless `version` (default: the installed Ironic's) is one this
    interface supports; logs a warning when it is newer than the newest tested."""
    version = installed_version() if version is None else version
    found = release(version)
    oldest = "%d.%d" % OLDEST
    if found is None:
        raise UnsupportedIronic(
            f"the provision deploy interface cannot tell which Ironic release this is (version "
            f"{version!r} from the ironic distribution's metadata): it supports Ironic {oldest} "
            f"(OpenStack 2025.1) and later; install Ironic with its metadata (pip, or the "
            f"distribution's package) or remove provision from enabled_deploy_interfaces")
    if found < OLDEST:
        raise UnsupportedIronic(
            f"the provision deploy interface supports Ironic {oldest} (OpenStack 2025.1) and "
            f"later, and this conductor runs Ironic {version}: upgrade Ironic to a maintained "
            f"series (docs/ironic.md, 'Ironic releases'), or remove provision from "
            f"enabled_deploy_interfaces and enabled_raid_interfaces")
    if found > release(NEWEST_TESTED):
        LOG.warning("Ironic %s is newer than the newest release the provision deploy interface "
                    "was tested with (%s); it loads, and a difference found belongs in "
                    "ironic_driver/ironic_compat.py", version, NEWEST_TESTED)
    return found


def periodic_spacing(read):
    """`spacing` for ironic.conductor.periodics.periodic, given `read`, a function returning
    the configured seconds.

    Ironic 39 (2026.2) takes a callable and reads it once the configuration is loaded
    (periodics.refresh_periodic_attributes), also in its spawned workers. Earlier releases
    (29.x of 2025.1, 32.x of 2025.2, 35.x of 2026.1) compare `spacing > 0` in the decorator
    itself: a callable there raised TypeError and the conductor refused to load the interface
    (DriverLoadError), so they get the number, read when this module is imported. Ironic
    imports deploy interfaces while loading drivers, after it parsed its configuration, so
    that is the configured value too; a change needs a conductor restart, as every other
    option of theirs does."""
    if hasattr(periodics, "refresh_periodic_attributes"):
        return read
    return read()


def oci_speaks_plain_http():
    """Whether this Ironic can talk to an OCI registry without TLS.

    Ironic 35 (2026.1) added [oci]permit_fallback_to_http_transport (and [oci]verify_ca for the
    registry's CA). Before it (29.x of 2025.1, 32.x of 2025.2) its OCI client always builds
    https:// URLs and verifies them against the conductor's CA bundle ([DEFAULT]
    webserver_verify_ca only switches verification off there: a CA path in it makes their
    OciImageService raise ValueError). A registry without TLS cannot be used on those releases,
    whatever this interface does, and setting the option is an error (no such option)."""
    return "permit_fallback_to_http_transport" in CONF.oci


def oci_tls_advice():
    """What to tell an operator whose registry's TLS failed, in this Ironic's own options."""
    if oci_speaks_plain_http():
        return ("its CA: [oci]verify_ca; a registry without TLS needs "
                "[oci]permit_fallback_to_http_transport")
    return ("its CA goes in the conductor's CA bundle, e.g. REQUESTS_CA_BUNDLE; this Ironic "
            "(before 35, OpenStack 2026.1) reaches registries only over TLS")


@functools.cache
def _ironic_splits_pull_secrets():
    """Whether this Ironic reads image_pull_secret USER:PASSWORD as a user and a password
    (asked of its own function with a node that holds only such a secret)."""
    node = types.SimpleNamespace(uuid="ironic-compat-probe", driver_info={},
                                 instance_info={"image_pull_secret": "user:password"})
    auth = image_service.get_image_service_auth_override(node) or {}
    return auth.get("username") == "user"


def image_pull_auth(node, permit_user_auth=True):
    """Ironic's credentials for the node's OCI registry (get_image_service_auth_override).

    Ironic 35 (2026.1) reads an image_pull_secret of USER:PASSWORD as basic authentication's
    user and password, split at the first colon, and a secret without a colon as a token.
    29.x (2025.1) and 32.x (2025.2) pass the whole secret as the password of an empty user, so
    a registry with basic authentication refused the USER:PASSWORD docs/ironic.md documents,
    and Ironic's re-authentication then failed with TypeError. On those the secret is split
    here as 35 splits it, so a secret means the same on every supported release. (35 also
    falls back to [deploy]image_server_user for OCI; the older releases have no such
    fallback, and none is added here.)"""
    auth = image_service.get_image_service_auth_override(node,
                                                          permit_user_auth=permit_user_auth)
    if (auth and not auth.get("username") and ":" in (auth.get("password") or "")
            and not _ironic_splits_pull_secrets()):
        user, password = auth["password"].split(":", 1)
        return {"username": user, "password": password}
    return auth


def set_node_cleaning_steps(task):
    """Ironic's set_node_cleaning_steps as its own agent_base calls it once the ramdisk's steps
    are known: the steps of the cleaning that is running, checked against the driver's.

    Ironic 32 (2025.2) added runbooks' declarative automated cleaning and with it the argument
    use_existing_steps, which agent_base sets from driver_internal_info's
    declarative_cleaning; manual cleaning sets that flag too. 29.x (2025.1) has no such
    argument (passing it raised TypeError at the first listing of a cleaning) and tells a
    manual cleaning itself, by its target state MANAGEABLE; it has no declarative one."""
    takes = inspect.signature(conductor_steps.set_node_cleaning_steps).parameters
    if "use_existing_steps" in takes:
        conductor_steps.set_node_cleaning_steps(task, use_existing_steps=bool(
            task.node.driver_internal_info.get("declarative_cleaning")))
    else:
        conductor_steps.set_node_cleaning_steps(task)
