"""An example data driver (docs/extending.md "An input format: a data driver"): a vendor's YAML
format translated into a native document, its problems named in the vendor's own paths.

    storage:
      drive: /dev/vda
      volumes:
        - {name: root, size: 4GiB, fs: ext4, at: /}

Installed by tests as the entry point
    [provision_agent.data_drivers]
    vendor_yaml = tests.plugins.example_format:VendorYaml
"""

from provision_agent.data_drivers.foreign import ForeignDriver
from provision_agent.errors import InputError, Problem


class VendorYaml(ForeignDriver):
    input_format = "yaml"

    def layout(self):
        storage = (self.data or {}).get("storage") if isinstance(self.data, dict) else None
        if not isinstance(storage, dict):
            raise InputError([Problem("$.storage", "missing: the drive and its volumes")])
        parts, filesystems, origin = [], [], {"$.disks[0]": "$.storage.drive"}
        for i, vol in enumerate(storage.get("volumes") or []):
            parts.append({"id": vol.get("name"), "size": vol.get("size")}
                         | ({"type": vol["type"]} if vol.get("type") else {}))
            origin[f"$.disks[0].partitions[{i}]"] = f"$.storage.volumes[{i}]"
            if vol.get("fs"):
                filesystems.append({"device": vol.get("name"), "type": vol["fs"],
                                    "mount": vol.get("at")})
                origin[f"$.filesystems[{len(filesystems) - 1}]"] = f"$.storage.volumes[{i}]"
        native = {"version": 1,
                  "disks": [{"id": "drive", "match": {"name": storage.get("drive")},
                             "table": "gpt", "partitions": parts}],
                  "filesystems": filesystems}
        return self.native_layout(native, origin)
