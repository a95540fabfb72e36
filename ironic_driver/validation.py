"""validate() checks for the provision deploy interface: driver_info, options, instance data."""

import logging
import os

from ironic.common import exception
from ironic.conf import CONF

from ironic_driver import report
from ironic_driver.conversation import kernel_params, ssh
from ironic_driver.document import contract, fragments, images, inventory, layouts, oci, sent
from provision_agent.plan import urls

LOG = logging.getLogger(__name__)

REQUIRED = {}
OPTIONAL = {
    "provision_ssh_address": "Static address of the ramdisk's SSH server. Optional: without it "
                             "the ramdisk looks its node up through Ironic's API and reports "
                             "its address and host key in its heartbeats.",
    "provision_ssh_port": "SSH port of the ramdisk. Optional, default [provision_agent]ssh_port "
                          "(a heartbeat names the port itself).",
    "provision_ssh_user": "User to log in as. Optional, default [provision_agent]ssh_user.",
    "provision_host_key": "The ramdisk's SSH host public key, '<type> <base64>', pinned for this "
                          "node. Optional: a heartbeat reports the key of the booted ramdisk; "
                          "with a static provision_ssh_address it or "
                          "[provision_agent]ssh_known_hosts_file is required.",
}


def _invalid(msg):
    return exception.InvalidParameterValue(report.bounded(msg, report.MESSAGE_CHARS))


def check_options(opts):
    if not opts.ssh_private_key_file:
        raise _invalid("[provision_agent]ssh_private_key_file is not set")
    if not os.path.isfile(opts.ssh_private_key_file):
        raise _invalid(f"[provision_agent]ssh_private_key_file {opts.ssh_private_key_file} "
                       "does not exist")
    try:
        ssh.load_private_key(opts.ssh_private_key_file)
    except (OSError, ssh.paramiko.SSHException, ValueError) as exc:
        raise _invalid(f"[provision_agent]ssh_private_key_file {opts.ssh_private_key_file} "
                       f"cannot be used: {exc}")
    sent.image_keyring(opts)
    if opts.ssh_known_hosts_file and not os.path.isfile(opts.ssh_known_hosts_file):
        raise _invalid(f"[provision_agent]ssh_known_hosts_file {opts.ssh_known_hosts_file} "
                       "does not exist")
    limits = [(opts.deploy_timeout, "[provision_agent]deploy_timeout")] if opts.deploy_timeout \
        else [(CONF.conductor.deploy_callback_timeout, "[conductor]deploy_callback_timeout"),
              (CONF.conductor.clean_callback_timeout, "[conductor]clean_callback_timeout")]
    for name in ("connect_timeout", "command_timeout", "poll_interval"):
        for limit, where in limits:
            if limit and getattr(opts, name) >= limit:
                raise _invalid(f"[provision_agent]{name} ({getattr(opts, name)}) must be "
                               f"smaller than {where} ({limit})")


def check_driver_info(info, opts):
    port = info.get("provision_ssh_port", opts.ssh_port)
    try:
        port = int(port)
        if not 0 < port < 65536:
            raise ValueError
    except (TypeError, ValueError):
        raise _invalid(f"driver_info/provision_ssh_port {port!r} is not a TCP port")
    host_key = info.get("provision_host_key")
    if host_key:
        try:
            ssh.parse_public_key(host_key)
        except ValueError as exc:
            raise _invalid(f"driver_info/provision_host_key: {exc}")
    if info.get("provision_ssh_address"):
        problem = urls.address_problem(info["provision_ssh_address"])
        if problem:
            raise _invalid(f"driver_info/provision_ssh_address: {problem}")
        if not (host_key or opts.ssh_known_hosts_file or opts.accept_unknown_host_keys):
            raise exception.MissingParameterValue(
                "driver_info/provision_host_key is required with a static "
                "provision_ssh_address: the ramdisk's host key must be pinned (or set "
                "[provision_agent]ssh_known_hosts_file)")
    else:
        _check_api_url()
    return port


def _check_api_url():
    """The ramdisk finds its node through the API URL Ironic puts on its command line: a
    conductor that cannot name that URL would boot a ramdisk that never heartbeats."""
    from ironic.drivers.modules import deploy_utils
    try:
        deploy_utils.get_ironic_api_url()
    except Exception as exc:    # Ironic's own error, or keystoneauth's when nothing is set
        raise _invalid("no driver_info/provision_ssh_address, and the ramdisk cannot be told "
                       "where Ironic's API is (set [service_catalog]endpoint_override or the "
                       f"Keystone catalog): {exc}")


def check_checksum_urls(info):
    """Ironic's [conductor]disable_support_for_checksum_files refuses checksum files; the
    ramdisk reads them (provision_agent/drivers/images/checksum_file.py), so the conductor
    enforces Ironic's setting here."""
    from ironic.common import checksum_utils
    for key in ("image_checksum", "image_os_hash_value"):
        value = info.get(key)
        try:
            if isinstance(value, str):
                checksum_utils.is_checksum_url(value)
        except exception.ImageChecksumURLNotSupported:
            raise _invalid(f"instance_info/{key} is the URL of a checksum file, which this "
                           "conductor refuses ([conductor]disable_support_for_checksum_files)")


def check_instance(task, data_driver):
    """The same checks as `provision --dry_run`, run on the conductor before anything boots.

    Without a stored inventory, every check that needs no machine runs (the disks are
    matched in the ramdisk).
    """
    node = task.node
    info = node.instance_info or {}
    # Ironic's own boot mode for the instance; it refuses one the node's capabilities forbid.
    contract.boot_mode_of(node)
    # Ironic empties instance_info on undeploy; a redeploy that forgot to set it again used to
    # pass here and fail a minute later in the ramdisk. Refuse it before anything boots
    # (data_driver native needs a layout instead: sent.payload() says so).
    if data_driver != "native" and not info.get("image_source"):
        raise exception.MissingParameterValue(
            "instance_info/image_source is required (Ironic clears instance_info on undeploy: "
            "set it again before every deploy)")
    check_checksum_urls(info)
    kernel_params.check_instance_info(info)
    from provision_agent import errors
    from provision_agent.plan import api
    record = images.check_exists(task) if images.from_glance(node) else None
    # Ironic's own OCI resolution, as prepare will run it: a reference that does not resolve
    # (registry, tag, pull secret, no disk artifact) is refused before anything boots.
    found = oci.identify(node) if oci.from_oci(node) else None
    if data_driver not in api.data_driver_names():
        # Not installed (or not importable) next to the conductor: the ramdisk will judge.
        LOG.warning("Cannot pre-validate node %s: provision data driver %s is not available "
                    "on this conductor", node.uuid, data_driver)
        return
    step = layouts.template_step(task)
    vendor = sent.vendor_document(node)
    source = (f"instance_info/provision_document (data driver {vendor['data_driver']!r})"
              if vendor else layouts.choose(node, step).describe())
    try:
        doc = sent.payload(node, data_driver, step, fragments.from_templates(task))
        if data_driver != "native":
            doc["instance_info"] = images.for_validation(doc["instance_info"], node, record)
            if found:
                doc["instance_info"] = oci.for_validation(doc["instance_info"], found)
        layout = api.load_layout(doc, data_driver)
        for warning in layout.warnings:
            LOG.info("Node %s (layout from %s): %s", node.uuid, source, warning)
        disks = inventory.stored_disks(task)
        # the signature policy follows the conductor's keyring, which the ramdisk will get
        keyring = bool(CONF.provision_agent.image_keyring)
        if disks is None:
            api.check_layout(layout, keyring=keyring)
        else:
            api.build_plan(layout, disks, keyring=keyring)
    except errors.MachineMismatch as exc:
        raise _invalid(f"the layout from {source} does not fit this node's "
                       f"inspected inventory: {exc}")
    except errors.InputError as exc:
        raise _invalid(f"provision rejects this node's instance data (layout from "
                       f"{source}): {exc}")
    except errors.ProvisionError as exc:
        raise _invalid(f"provision cannot plan this node (layout from {source}): "
                       f"{exc}")
