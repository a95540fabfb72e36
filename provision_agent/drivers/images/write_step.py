"""A write_image step carried out: the plan step's args and the run's options (credentials,
TLS, the checksum file, the signature policy, zeroing the target first) made into
writer.write_to's keywords, and its report into the step's JSON result.

Everything read here (a checksum file, a signature) is read and judged before the target is
touched, so that a refusal changes nothing on the disk.
"""

from dataclasses import asdict

from provision_agent.drivers.images import formats, signature, writer


def _headers(options):
    headers = {}
    for line in options.get("image_headers") or []:
        name, _, value = str(line).partition(":")
        headers[name.strip()] = value.strip()
    if options.get("image_auth_token"):
        headers["Authorization"] = f"Bearer {options['image_auth_token']}"
    return headers


def _checksum(args, options):
    """The step's "algo:hex": as given, or read from its checksum file (before the target
    is touched, so that a file without the image's entry changes nothing)."""
    if not args.get("checksum_url"):
        return args.get("checksum")
    from provision_agent.drivers.images import checksum_file
    return checksum_file.resolve(
        args["checksum_url"], args["uri"], args.get("checksum_algo"),
        tls_verify=not options.get("image_insecure"), ca_bundle=options.get("image_ca_bundle"),
        headers=_headers(options))


def write_image(args, *, runner, events, target_root, target_zeroed=False, options=None,
                table_follows=False):
    """The executor's entry: a write_image step's args -> a JSON-able report dict."""
    from provision_agent.drivers import mount  # only for the tar target path
    options = options or {}
    checksum = _checksum(args, options)
    # the signature is read (and the policy applied) before the target is touched
    with signature.checked(args, options, runner, _headers(options)) as verifier:
        mount_dir = None
        if args.get("format") == "tar":
            mount_dir = mount.target_path(target_root, args.get("mount_point") or "/")
        elif args.get("format", "raw") in ("raw", "disk") and not target_zeroed:
            target_zeroed = formats.zero_device(
                runner, args["device"], options.get("image_zero_target") or "auto")
        report = _write(args, options, checksum, mount_dir, target_zeroed, runner, events,
                        verifier, table_follows)
    result = asdict(report)
    result["checksum"] = result.pop("checksum_actual")
    result["target_zeroed"] = target_zeroed
    result["signature"] = "verified" if verifier else "none"
    return result


def source_options(args, options):
    """sources.open_source's keywords for this step's image under the run's options."""
    headers = _headers(options)
    if args.get("authorization"):
        # this image's own credential (an OCI registry's): its download only, never the
        # checksum file's; requests drops it when a redirect leaves the host
        headers["Authorization"] = args["authorization"]
    return {"tls_verify": not options.get("image_insecure"),
            "ca_bundle": options.get("image_ca_bundle"), "headers": headers,
            **{k: options[f"image_{k}"] for k in ("stall_seconds", "stall_bytes")
               if options.get(f"image_{k}") is not None}}


def disk_head(args, options, runner):
    """The first block of the disk a whole-disk image step writes (disk_head.read), read
    before the run's first write, or None when it cannot be within its bounds."""
    from provision_agent.drivers.images import disk_head
    return disk_head.read(args["uri"], args.get("format", "raw"),
                          compression=args.get("compression") or "auto", runner=runner,
                          **source_options(args, options or {}))


def _write(args, options, checksum, mount_dir, target_zeroed, runner, events, verifier,
           table_follows):
    opts = source_options(args, options)
    return writer.write_to(
        args["uri"], args.get("device"), fmt=args.get("format", "raw"),
        compression=args.get("compression") or "auto", checksum=checksum,
        checksum_of=args.get("checksum_of") or "compressed",
        allow_no_checksum=bool(args.get("allow_no_checksum")), fs_type=args.get("fs_type"),
        mount_dir=mount_dir, tls_verify=opts.pop("tls_verify"),
        ca_bundle=opts.pop("ca_bundle"), headers=opts.pop("headers"),
        target_zeroed=target_zeroed, runner=runner, events=events, stall=opts,
        verifier=verifier, zero_policy=options.get("image_zero_target") or "auto",
        table_follows=table_follows, whole_disk=bool(args.get("whole_disk")))
