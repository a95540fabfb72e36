"""Which data driver a document is for, from its shape alone (no imports: the demo uses it)."""

# Keys that only one format has at its top level, and how to name the format.
SHAPES = {
    "nailgun": ({"ks_meta"}, "Fuel's provision.json (it has 'ks_meta')"),
    "ironic": ({"instance_info", "driver_internal_info"},
               "Ironic node data (it has 'instance_info')"),
    "native": ({"disks", "version"}, "the native format (it has 'version' and 'disks')"),
}


def guess_driver(document):
    """The data driver whose format document has the shape of, or None."""
    if not isinstance(document, dict):
        return None
    for name, (keys, _) in SHAPES.items():
        if (keys <= document.keys()) if name == "native" else (keys & document.keys()):
            return name
    return None


def describe(name):
    return SHAPES[name][1]
