"""Glance images: turned into a URL the ramdisk can fetch, by Ironic's own image handling.

Nova sets instance_info/image_source to a Glance image UUID. The ramdisk never talks to
Glance (no credentials there): at `prepare`, Ironic's `build_instance_info_for_deploy` asks
Glance for the image and, per `[agent]image_download_source`, either makes a Swift temporary
URL (`swift`) or caches the image on the conductor, converted to raw unless
`[DEFAULT]force_raw_images` is off, and serves it from `[deploy]http_root` at
`[deploy]http_url` (`http`, the default). Either way instance_info gains `image_url` and
Glance's `image_os_hash_algo`/`image_os_hash_value` (recomputed by Ironic after a
conversion), which the ironic data driver already prefers over image_source. For a
partition image it also sets `kernel`/`ramdisk` from the image's kernel_id/ramdisk_id.
"""

import logging
import os

from ironic.common import checksum_utils, exception, image_service
from ironic.common.glance_service import service_utils
from ironic.conf import CONF
from ironic.drivers.modules import deploy_utils

from ironic_driver import report

LOG = logging.getLogger(__name__)

# Stands in for the URL prepare() will set, while validate plans the deploy before it.
VALIDATION_URL = "https://image-from-glance.invalid/{}"


def from_glance(node):
    return service_utils.is_glance_image((node.instance_info or {}).get("image_source"))


def check_exists(task):
    """Glance's record of the image; an early, clear failure for a wrong UUID (validate
    runs before anything powers on)."""
    source = task.node.instance_info["image_source"]
    try:
        return image_service.GlanceImageService(context=task.context).show(source)
    except (exception.ImageNotFound, exception.ImageNotAuthorized) as exc:
        raise exception.InvalidParameterValue(
            f"instance_info/image_source {source} is not a Glance image this conductor may "
            f"read: {report.bounded(exc)}")
    except exception.GlanceConnectionFailed as exc:
        raise exception.InvalidParameterValue(
            f"cannot reach Glance for image {source} (check [glance] in ironic.conf): "
            f"{report.bounded(exc)}")


def glance_hash(record):
    """(algo, value) Glance recorded. Ironic 39 reads images through openstacksdk, whose
    record names them hash_algo/hash_value; Ironic looks for os_hash_algo/os_hash_value, finds
    None and files the pair under properties, so only the md5 `checksum` reaches
    instance_info. Both spellings are read here."""
    props = record.get("properties") or {}
    algo = record.get("os_hash_algo") or props.get("os_hash_algo") or props.get("hash_algo")
    value = record.get("os_hash_value") or props.get("os_hash_value") or props.get("hash_value")
    return (algo, value) if algo and value else (None, None)


def resolve(task):
    """In prepare: instance_info with image_url and a checksum, saved on the node."""
    info = deploy_utils.build_instance_info_for_deploy(task)
    record = image_service.GlanceImageService(context=task.context).show(info["image_source"])
    same_format = info.get("image_disk_format") == record.get("disk_format")
    served = _served_file(info.get("image_url"))
    changed = served and record.get("size") and os.path.getsize(served) != record["size"]
    if changed and same_format:
        # Ironic 39 decompresses a zstd image in its cache ([conductor]
        # disable_zstandard_decompression) without calling it a conversion, and keeps
        # Glance's checksums, which are of the compressed bytes: provision refused the image
        # it was served. Hash what is served, as Ironic does after a conversion.
        LOG.info("Node %s: Ironic serves image %s as %s bytes where Glance holds %s (decompressed "
                 "in its cache); checksumming the served file", task.node.uuid,
                 info["image_source"], os.path.getsize(served), record["size"])
        info["image_checksum"] = None
        info["image_os_hash_algo"] = "sha256"
        info["image_os_hash_value"] = checksum_utils.compute_image_checksum(served, "sha256")
    elif not info.get("image_os_hash_value"):
        algo, value = glance_hash(record)
        # Glance's hash is of Glance's bytes: only valid when Ironic served them unconverted
        # (a converted image gets Ironic's own sha256 above).
        if algo and same_format:
            info["image_os_hash_algo"], info["image_os_hash_value"] = algo, value
    task.node.instance_info = info
    task.node.save()


def _served_file(url):
    """The file under [deploy]http_root that url (under [deploy]http_url) serves, or None
    (a Swift temporary URL)."""
    base = (CONF.deploy.http_url or "").rstrip("/") + "/"
    if not url or not CONF.deploy.http_root or base == "/" or not url.startswith(base):
        return None
    path = os.path.join(CONF.deploy.http_root, url[len(base):])
    return path if os.path.isfile(path) else None


def for_validation(instance_info, node, record=None):
    """A copy of instance_info as provision will see it after prepare (URL and Glance's
    checksum), for the dry plan. record: Glance's, from check_exists."""
    info = dict(instance_info)
    if from_glance(node) and not info.get("image_url"):
        info["image_url"] = VALIDATION_URL.format(node.instance_info["image_source"])
        algo, value = glance_hash(record or {})
        if algo and not info.get("image_os_hash_value"):
            info["image_os_hash_algo"], info["image_os_hash_value"] = algo, value
        elif (record or {}).get("checksum") and not info.get("image_checksum"):
            info["image_checksum"] = record["checksum"]
    return info


def clean_up(node):
    """The conductor's cached copy and its link under http_root (a no-op for URL images)."""
    deploy_utils.destroy_http_instance_images(node)
