"""Conductor-side options of the `provision` deploy interface, group [provision_agent].

They live in Ironic's own CONF so that one ironic.conf configures the conductor and us.
"""

from oslo_config import cfg

GROUP = "provision_agent"

opts = [
    cfg.StrOpt("ssh_user", default="root",
               help="User the conductor logs into the ramdisk as (key authentication only). "
                    "driver_info/provision_ssh_user overrides it per node."),
    cfg.StrOpt("ssh_private_key_file",
               help="Private key the conductor authenticates with. Required."),
    cfg.StrOpt("ssh_known_hosts_file",
               help="known_hosts file that pins ramdisk host keys, for nodes without "
                    "driver_info/provision_host_key."),
    cfg.BoolOpt("accept_unknown_host_keys", default=False,
                help="Trust a ramdisk host key that is neither in driver_info nor in "
                     "ssh_known_hosts_file. Insecure: anyone answering on the node's address "
                     "receives the instance data. Only for labs."),
    cfg.IntOpt("ssh_port", default=22, min=1, max=65535,
               help="Default SSH port of the ramdisk (driver_info/provision_ssh_port overrides)."),
    cfg.IntOpt("connect_timeout", default=10, min=1,
               help="Seconds to wait for the ramdisk's SSH server to answer one attempt."),
    cfg.IntOpt("command_timeout", default=60, min=1,
               help="Seconds the work of one look at a ramdisk may take once connected "
                    "(commands, the upload, reading progress). A look ends, connection "
                    "closed, after connect_timeout + command_timeout seconds whatever the "
                    "ramdisk does."),
    cfg.IntOpt("poll_interval", default=10, min=1,
               help="Seconds between checks of deploying nodes (ramdisk up? provision done?), "
                    "and the least time between two looks at one node."),
    cfg.IntOpt("running_poll_interval", default=30, min=1,
               help="Seconds between looks at a job that is running in a ramdisk which "
                    "heartbeats (provision-ironic-agent): such a ramdisk heartbeats the moment "
                    "the job exits, and that heartbeat brings the look forward, so this only "
                    "sets how often progress is read (and how late an exit is noticed when "
                    "that heartbeat is lost). Nodes reached through driver_info/"
                    "provision_ssh_address send no heartbeats and are looked at every "
                    "poll_interval. Looks per node then depend on the job's length, not on "
                    "how many conductors share the nodes or how busy they are."),
    cfg.IntOpt("deploy_timeout", min=1,
               help="Seconds a deploy or a cleaning may go without progress (from the power "
                    "on into the ramdisk until provision starts, then between two looks that "
                    "see new progress events); the node then fails with 'deploy failed' (or "
                    "'clean failed'). Unset: Ironic's own limit for the same wait, "
                    "[conductor]deploy_callback_timeout or clean_callback_timeout, which "
                    "count from the same moment (progress touches the node's provisioning "
                    "time). Set it only to fail sooner than those."),
    cfg.StrOpt("data_driver", default="ironic",
               help="--data_driver given to provision; 'ironic' reads the document this "
                    "interface uploads. 'native' sends only the chosen layout (one is then "
                    "required; see layouts.py)."),
    cfg.StrOpt("layouts_dir",
               help="Directory of named layouts on the conductor: NAME.json holds a native "
                    "layout that instance_info/provision_layout, driver_info/provision_layout "
                    "or the set_layout deploy step (deploy templates) can name instead of "
                    "spelling it out. Unset: only inline layouts."),
    cfg.BoolOpt("layout_images", default=False,
                help="Let a layout chosen by a deploy template, the node's driver_info or by "
                     "name carry its own images, written instead of the image the deploy "
                     "asked for (instance_info/image_source). Off: such a layout is refused "
                     "at validate, so that a tenant's image is never silently replaced; a "
                     "layout given with the deploy itself (instance_info/provision_layout) "
                     "may always carry images."),
    cfg.BoolOpt("root_device_hints_required", default=False,
                help="Refuse a node with several disks and no root device hints "
                     "(instance_info/root_device or properties/root_device), as this "
                     "interface did before. Off (Ironic's rule): the root disk is the "
                     "smallest disk of at least 4 GiB, the first by name among equal sizes, "
                     "never a read-only or removable one nor one of "
                     "properties/skip_block_devices; the plan names it and why."),
    cfg.StrOpt("image_keyring",
               help="OpenPGP keyring file on the conductor (certificates, binary or "
                    "armoured, as gpg --export writes them). Set: its content is uploaded "
                    "to the ramdisk with the input document, provision verifies every "
                    "image's detached signature (instance_info/image_signature) against it "
                    "while the image streams, and an image without one is refused at "
                    "validate unless a layout's image sets allow_unsigned, which only the "
                    "operator's layouts may (a named layout, a deploy template, driver_info; "
                    "not one given inline in instance_info). Unset: an image with a "
                    "signature is refused."),
    cfg.ListOpt("oci_secret_registries", default=[],
                help="Hosts (host, host:port, or .domain for every host under it) that the "
                     "operator's registry credentials may be sent to: driver_info/"
                     "image_pull_secret, [deploy]image_server_user/_password and the tokens "
                     "of [oci]authentication_config. List each registry and its token realm "
                     "(the host of the realm in its WWW-Authenticate answer). An oci:// "
                     "image_source on a registry not listed is resolved with the deploy's "
                     "own instance_info/image_pull_secret, or else without credentials, and "
                     "validate says so when the registry wants some; no Authorization "
                     "header made with the operator's credentials goes to a host not listed. "
                     "Empty: they go to no host."),
    cfg.ListOpt("recovery_age_recipients", default=[],
                help="age public keys (age1...) or SSH public keys the recovery keys of "
                     "encrypted volumes are always sealed to: added to the `recovery` "
                     "recipients of every layout with `encrypted` volumes (a layout's own, "
                     "the tenant's too, cannot leave them out). The sealed keys land in the "
                     "node's driver_internal_info/provision_recovery_keys."),
    cfg.MultiStrOpt("tang_server", default=[],
                    help="A Tang server, as `URL THUMBPRINT` (the thumbprint of its signing "
                         "key, `tang-show-keys` on the server); repeat the option for "
                         "several. A layout's encrypted volume with `\"tang\": "
                         "\"conductor\"` in its unlock is bound to these."),
    cfg.BoolOpt("ramdisk_commands", default=False,
                help="The ramdisks' conductor key is forced into provision-dispatch "
                     "(ramdisk/build.sh --conductor-key): the conductor sends registered "
                     "commands only (no shell, no SFTP), checks the ramdisk's version first "
                     "and fails the step at once when it cannot speak to it. provision_command "
                     "is then the dispatcher's business; provision_extra_args may hold only "
                     "--dry_run. Off: the shell and SFTP of a --authorized-key ramdisk."),
    cfg.BoolOpt("ramdisk_steps", default=False,
                help="Each cleaning first lists the Ironic steps the ramdisk's hardware "
                     "plug-ins offer on the node (`provision steps`, as ironic-python-agent's "
                     "get_clean_steps) and keeps them in the node: the deploy interface's "
                     "clean and deploy steps then include them, and Ironic runs them in the "
                     "ramdisk (`provision step`). Costs one short job in the ramdisk per "
                     "cleaning. Off: only this interface's own steps (a servicing lists the "
                     "ramdisk's steps either way)."),
    cfg.StrOpt("agent_update_wheel",
               help="With ramdisk_commands: a wheel of provision-agent (normally this "
                    "conductor's own release) that a ramdisk running an older provision, or "
                    "an older dispatcher protocol, is updated to in place before its job "
                    "starts (the `update` registered command). The ramdisk checks its "
                    "signature against the keys built into it (ramdisk/build.sh "
                    "--update-key) and refuses, failing the step with its reason, a bad "
                    "signature, an unknown key, a version not newer than its own, or any "
                    "update while a job runs. A ramdisk built without --update-key, or booted "
                    "with provision.update=off, takes none: the version check alone applies. "
                    "Unset: no update is sent."),
    cfg.StrOpt("agent_update_signature",
               help="The signature of agent_update_wheel: `ssh-keygen -Y sign -f KEY -n "
                    "provision-agent-update WHEEL` writes it as WHEEL.sig, the default."),
    cfg.StrOpt("provision_command", default="/usr/bin/provision",
               help="Path of provision inside the ramdisk."),
    cfg.ListOpt("provision_extra_args", default=[],
                help="Extra arguments for provision, e.g. --debug. Tests use --dry_run."),
    cfg.StrOpt("remote_dir", default="/run/provision-ironic",
               help="Directory in the ramdisk that receives the input document, the log, "
                    "the events file and the exit code."),
    cfg.StrOpt("binding_dir", default="/run/provision-ironic-agent",
               help="Directory in the ramdisk where provision-ironic-agent writes the file "
                    "that binds that ramdisk to the node it looked up (named by the node's "
                    "UUID). A ramdisk found through a heartbeat must show this node's binding, "
                    "made with the node's current agent token, before it is sent anything. "
                    "Keep it equal to the agent's --binding_dir."),
    cfg.IntOpt("log_tail_lines", default=15, min=1,
               help="How many last lines of provision's output go into last_error on failure."),
    cfg.IntOpt("events_kept", default=20, min=1,
               help="How many of the latest provision events driver_internal_info keeps."),
]


def register(conf):
    conf.register_opts(opts, group=GROUP)


def list_opts():
    """Entry point for oslo-config-generator (namespace ironic_driver)."""
    return [(GROUP, opts)]
