"""Command-line and config-file options (oslo.config).

CLI flags use oslo.config's spelling with underscores: --input_data_file, --dry_run, ...
The same options may be set in the [DEFAULT] section of a --config-file.
"""

from oslo_config import cfg

CONF = cfg.CONF

cli_opts = [
    cfg.StrOpt("input_data_file",
               help="Path of the JSON document that describes the provisioning."),
    cfg.StrOpt("input_data_url",
               help="HTTP(S) URL to fetch the JSON document from instead of a file. "
                    "Connection failures, timeouts and HTTP 5xx/429 are retried 4 times; "
                    "what still fails exits 6."),
    cfg.StrOpt("input_data_ca_bundle",
               help="CA bundle (PEM file) to verify an HTTPS --input_data_url with instead of "
                    "the system's."),
    cfg.BoolOpt("input_data_insecure", default=False,
                help="Do not verify the TLS certificate of an HTTPS --input_data_url."),
    cfg.StrOpt("data_driver", default="native",
               help="Data driver that translates the input document: 'native' (our schema), "
                    "'nailgun' (Fuel provision.json) or 'ironic' (Ironic node data)."),
    cfg.BoolOpt("dry_run", default=False,
                help="Validate and plan, print the plan and the layout, and touch nothing."),
    cfg.StrOpt("plan_format", default="text", choices=["text", "json"],
               help="How --dry_run prints the plan: a readable text tree, or one JSON "
                    "document {\"layout\": ..., \"steps\": [...]} for programs."),
    cfg.StrOpt("inventory_file",
               help="Plan against a recorded machine inventory (ironic-python-agent format) "
                    "instead of discovering this machine's disks."),
    cfg.BoolOpt("allow_loop_devices", default=False,
                help="Accept as disks the loop devices the document names by match.name "
                     "(/dev/loopN), for trying a layout or a plug-in on a developer's machine "
                     "(docs/extending.md). Without it loop devices are never disks. Never on "
                     "'erase'."),
    cfg.StrOpt("target_root", default="/tmp/provision-target",
               help="Directory under which the new system's filesystems are mounted."),
    cfg.StrOpt("events_file",
               help="Append structured JSON progress events, one per line, to this file."),
    cfg.StrOpt("recovery_key_file",
               help="Where the recovery keys of the layout's encrypted volumes are written, "
                    "as JSON ({name, device, luks_uuid, age} per volume; 'age' is the key "
                    "encrypted to the layout's recovery.age_recipients). Required for a layout "
                    "with encrypted volumes; nothing else shows the keys."),
    cfg.IntOpt("events_fd",
               help="Write structured JSON progress events, one per line, to this open file "
                    "descriptor."),
    cfg.StrOpt("image_ca_bundle",
               help="CA bundle (PEM file) to verify HTTPS image servers with instead of the "
                    "system's."),
    cfg.BoolOpt("image_insecure", default=False,
                help="Do not verify the TLS certificate of HTTPS image servers."),
    cfg.StrOpt("image_auth_token", secret=True,
               help="Send 'Authorization: Bearer TOKEN' with image downloads."),
    cfg.ListOpt("image_headers", default=[],
                help="Extra HTTP headers for image downloads, as 'Name: value' items."),
    cfg.IntOpt("image_stall_seconds", default=120, min=0,
               help="A download that brings fewer than --image_stall_bytes in this many seconds "
                    "has stalled and fails with exit 5 (the per-read timeout never fires for a "
                    "server that drips a byte at a time). The same seconds bound an outage: "
                    "once the download has begun, a server or network that stops answering is "
                    "retried (resuming with Range) until this long after the last byte, then "
                    "fails with exit 5. 0: never judged; an outage gets 5 attempts."),
    cfg.IntOpt("image_stall_bytes", default=1 << 20, min=1,
               help="See --image_stall_seconds."),
    cfg.IntOpt("disk_stall_seconds", default=120, min=0,
               help="A disk the plan writes that has requests in flight and finishes none of "
                    "them for this many seconds has stalled: the step running fails with exit "
                    "4 naming it and the disk, and the clean-up after it gets as long per "
                    "command. Judged on the kernel's counters (/sys/block/DISK/stat), so a "
                    "long step that makes progress (an image of terabytes) is never cut. "
                    "0: never."),
    cfg.StrOpt("image_keyring",
               help="OpenPGP keyring (a file of certificates, binary or armoured, as gpg "
                    "--export writes it) that image signatures are verified against, with "
                    "sqv, while the image streams. Set: an image without a signature is "
                    "refused (exit 2 at planning, 5 if a plan made elsewhere carries one) "
                    "unless it sets allow_unsigned; unset: an image with a signature is "
                    "refused (exit 2)."),
    cfg.StrOpt("image_zero_target", default="auto", choices=["auto", "always", "never"],
               help="Before a raw or whole-disk image is written, zero its target by unmapping "
                    "(fallocate --punch-hole: write-zeroes without the kernel's slow fallback) "
                    "so that the image's zero blocks are seeked over instead of written. auto: "
                    "only on non-rotational devices with write-zeroes support; always: any "
                    "device with write-zeroes support. A target not zeroed first still gets "
                    "the image's zero runs through the device's write-zeroes (BLKZEROOUT, as "
                    "qemu-img convert does) where it has it. never: write every block, zeros "
                    "included, from memory."),
]

# debug and log_file are oslo.log's names in most OpenStack tools; we keep them with plain
# logging so that the ramdisk does not need oslo.log.
logging_cli_opts = [
    cfg.BoolOpt("debug", short="d", default=False,
                help="Log debug messages and show tracebacks for every error."),
    cfg.StrOpt("log_file",
               help="Also write the log to this file (the console keeps getting it)."),
]


def register(conf=CONF):
    conf.register_cli_opts(cli_opts)
    conf.register_cli_opts(logging_cli_opts)


def list_opts():
    """Entry point for oslo-config-generator."""
    return [("DEFAULT", cli_opts + logging_cli_opts)]
