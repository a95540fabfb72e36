"""What provision installs from Fuel's provision.json besides the layout: images, bootloader
and configdrive."""

import json

from provision_agent.data_drivers.nailgun.network import network_data

CONTAINERS = {"gzip": "gzip", "raw": "none"}
# An OpenSSH public key or certificate line is a few KiB at most; these bounds refuse a document
# that is not a key list long before it costs time (the conductor validates the same document).
MAX_KEY_CHARS = 16 * 1024
MAX_KEYS = 256
MAX_KEYS_CHARS = 256 * 1024


def images(ks_meta, filesystems, problem, refused=(), kept=None):
    """image_data maps a mount point to a filesystem image written onto that mount's device.

    Fuel's image_data has no checksum (Fuel fetched md5s from a side file at run time), so the
    images are written unverified: allow_no_checksum is set, and docs/nailgun-mapping.md says so.
    refused: mounts whose volume was refused; kept: device id → why its data is kept.
    """
    kept = kept or {}
    data = ks_meta.get("image_data")
    if not data:
        old = " (the pre-2014 image_uri is not supported)" if ks_meta.get("image_uri") else ""
        problem("ks_meta.image_data", f"missing: without it no OS is installed{old}; Fuel's "
                                      "image_data maps \"/\" to the root filesystem image")
        return []
    if not isinstance(data, dict):
        problem("ks_meta.image_data", "must map mount points to {uri, format, container}")
        return []
    if "/" not in data:
        problem("ks_meta.image_data", "has no image for \"/\" (fuel-agent required one)")
    by_mount = {fs["mount"]: fs for fs in filesystems if fs.get("mount")}
    result = []
    for mount, im in data.items():
        where = f"ks_meta.image_data[{mount!r}]"
        if not isinstance(im, dict) or not isinstance(im.get("uri"), str):
            problem(where, "needs a uri")
            continue
        fs = by_mount.get(mount)
        if fs is None:
            if mount not in refused:        # else the volume's own problem says why
                problem(where, f"no volume in ks_spaces mounts {mount}")
            continue
        if fs["device"] in kept:
            problem(where, f"{fs['origin']} {kept[fs['device']]}, so no image can be written "
                           "to it")
            continue
        fmt = im.get("format")
        if fmt and fmt != fs["type"]:
            problem(where, f"image format {fmt!r} differs from the {fs['type']} filesystem "
                           f"that {fs['origin']} asks for at {mount}")
        container = im.get("container", "raw")
        if container not in CONTAINERS:
            problem(where, f"container {container!r} is not one of {', '.join(CONTAINERS)}")
            continue
        result.append({"uri": im["uri"], "format": "raw", "target": fs["device"],
                       "compression": CONTAINERS[container], "allow_no_checksum": True,
                       "origin": where})
    return result


def bootloader(pm_data):
    # Fuel's agent installed BIOS grub on every disk it partitioned; so do we (default targets).
    params = pm_data.get("kernel_params") or ""
    return {"type": "grub2", "boot_mode": "bios", "kernel_params": str(params).strip(),
            "origin": "ks_meta.pm_data.kernel_params"}


def wants_configdrive(data):
    ks_meta = data.get("ks_meta") or {}
    return bool(data.get("hostname") or ks_meta.get("auth_key") or ks_meta.get("user_accounts")
                or (ks_meta.get("repo_setup") or {}).get("repos") or data.get("interfaces"))


def _unquote(key):
    # Nailgun's serialiser writes every key as "\"%s\"" % key (for fuel-agent's templates).
    key = key.strip()
    if len(key) >= 2 and key[0] == key[-1] == '"':
        key = key[1:-1].strip()
    return key


def ssh_keys(value, where, problem):
    """A key list (one key given as a plain string is one key), unquoted, empty ones dropped."""
    if value is None or value == "" or value == []:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        problem(where, "must be a list of SSH public keys (or one key as a string)")
        return []
    if len(items) > MAX_KEYS:
        problem(where, f"{len(items)} keys; at most {MAX_KEYS}")
        return []
    bad = [i for i, k in enumerate(items) if not isinstance(k, str) or len(k) > MAX_KEY_CHARS]
    if bad:
        problem(f"{where}[{bad[0]}]" if not isinstance(value, str) else where,
                f"not an SSH public key (a string of at most {MAX_KEY_CHARS} characters)")
        return []
    if sum(len(k) for k in items) > MAX_KEYS_CHARS:
        problem(where, f"keys longer than {MAX_KEYS_CHARS} characters in all")
        return []
    return [k for k in (_unquote(k) for k in items) if k]


def _keys(ks_meta, problem):
    keys = ssh_keys(ks_meta.get("authorized_keys"), "ks_meta.authorized_keys", problem)
    keys += ssh_keys(ks_meta.get("auth_key"), "ks_meta.auth_key", problem)
    return list(dict.fromkeys(keys))


def _user(account, where, problem):
    user = {"name": account.get("name")}
    if account.get("password"):
        user["plain_text_passwd"] = account["password"]
        user["lock_passwd"] = False
    keys = ssh_keys(account.get("ssh_keys"), f"{where}.ssh_keys", problem)
    if keys:
        user["ssh_authorized_keys"] = keys
    if account.get("shell"):
        user["shell"] = account["shell"]
    if account.get("sudo"):
        user["sudo"] = [s for s in account["sudo"]] if isinstance(account["sudo"], list) \
            else "ALL=(ALL) NOPASSWD:ALL"
    if account.get("homedir"):
        user["homedir"] = account["homedir"]
    return user


def _repos(ks_meta):
    repos = (ks_meta.get("repo_setup") or {}).get("repos") or []
    sources = {}
    for r in repos:
        if isinstance(r, dict) and r.get("uri") and r.get("type", "deb") == "deb":
            line = " ".join(str(x) for x in ("deb", r["uri"], r.get("suite", ""),
                                             r.get("section", "")) if x)
            sources[f"{r.get('name', 'repo')}.list"] = {"source": line}
    return sources


def configdrive(data, partition, problem):
    """config-2 (OpenStack's format, what cloud-init and Ironic images already read)."""
    ks_meta = data.get("ks_meta") or {}
    hostname = data.get("hostname") or data.get("name") or "node"
    meta = {"uuid": str(data.get("uid") or data.get("name") or hostname),
            "hostname": hostname, "name": data.get("name") or hostname}
    keys = _keys(ks_meta, problem)
    if keys:
        meta["public_keys"] = {f"key-{i}": k for i, k in enumerate(keys)}
    cloud = {"hostname": hostname.split(".")[0], "fqdn": hostname}
    users = [_user(a, f"ks_meta.user_accounts[{i}]", problem)
             for i, a in enumerate(ks_meta.get("user_accounts") or [])
             if isinstance(a, dict) and a.get("name")]
    if users:
        cloud["users"] = ["default"] + users
    sources = _repos(ks_meta)
    if sources:
        cloud["apt"] = {"sources": sources}
    if ks_meta.get("timezone"):
        cloud["timezone"] = ks_meta["timezone"]
    cd = {"format": "config-2", "meta_data": meta,
          # JSON is YAML, so cloud-init reads this cloud-config as is.
          "user_data": "#cloud-config\n" + json.dumps(cloud, indent=1, sort_keys=True) + "\n",
          "origin": "hostname, ks_meta.auth_key/user_accounts/repo_setup, interfaces"}
    net = network_data(data.get("interfaces"), problem)
    if net:
        cd["network_data"] = net
    if partition:
        cd["partition"] = partition
    return cd
