"""`"keep": "on_rebuild"` in a native document used through Ironic: kept on a rebuild of the
same instance, made anew on its first deploy.

Ironic's deploy interface (ironic_driver/document/rebuild.py) says which: a rebuild is a deploy
of the node while the instance an earlier deploy of ours made is still there (not undeployed,
the same instance_uuid). Undeploy and cleaning come between two tenants, so a first deploy never
keeps what a previous tenant left. Partitions, md arrays and volume groups can be kept so (a
volume group with its logical volumes, an array assembled from its members; what they stand on
must then be kept on rebuild too).
"""

ON_REBUILD = "on_rebuild"


def _items(obj, key):
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, list) else []


def places(doc):
    """(path, item) of every partition, md array and volume group saying keep on_rebuild."""
    for i, disk in enumerate(_items(doc, "disks")):
        for j, part in enumerate(_items(disk, "partitions")):
            if isinstance(part, dict) and part.get("keep") == ON_REBUILD:
                yield f"disks[{i}].partitions[{j}]", part
    for i, vg in enumerate(_items(doc, "volume_groups")):
        if isinstance(vg, dict) and vg.get("keep") == ON_REBUILD:
            yield f"volume_groups[{i}]", vg
    for i, raid in enumerate(_items(doc, "raids")):
        if isinstance(raid, dict) and raid.get("keep") == ON_REBUILD:
            yield f"raids[{i}]", raid
        for j, part in enumerate(_items(raid, "partitions")):
            if isinstance(part, dict) and part.get("keep") == ON_REBUILD:
                yield f"raids[{i}].partitions[{j}]", part


def apply(doc, rebuild, add, where="layout"):
    """Turn every keep on_rebuild of doc into true (a rebuild) or false (a first deploy), in
    place (add(location, message) is kept for callers: everything can be kept now). Returns how
    many were turned."""
    turned = 0
    for _path, item in places(doc):
        item["keep"] = bool(rebuild)
        turned += 1
    return turned


def refuse_outside_ironic(doc, add):
    """Given to provision directly, nothing says whether this is a rebuild."""
    for path, item in places(doc):
        if item.get("keep") == ON_REBUILD:
            add(f"$.{path}.keep", "\"on_rebuild\" is decided by Ironic's deploy interface (a "
                                  "rebuild keeps it, a first deploy makes it anew); given to "
                                  "provision directly, say true or false")
