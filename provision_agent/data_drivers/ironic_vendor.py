"""A vendor's own layout format through Ironic: the Ironic document's `vendor`
({"data_driver": NAME, "document": the vendor's document, an object or its JSON or YAML
text}) stands where `layout` would, translated by that installed data driver (one built on
ForeignDriver, which makes a native document) and then completed from instance_info as a
`layout` is (ironic.py). Problems are located at `vendor.document` in the vendor's own paths.
"""

from provision_agent.data_drivers.foreign import ForeignDriver
from provision_agent.errors import InputError, Problem

MAX_TEXT = 4 << 20


def native(vendor, add):
    """The native document the vendor's driver makes of its document; None after add()ing
    what is wrong."""
    from provision_agent.plan import pipeline
    name = vendor.get("data_driver") if isinstance(vendor, dict) else None
    if not isinstance(name, str) or name in pipeline.BUILTIN_DATA_DRIVERS:
        add("vendor.data_driver", "must name an installed vendor data driver (provision's own "
                                  "formats go as `layout`)")
        return None
    try:
        cls = pipeline.data_driver_class(name)
    except InputError as exc:
        add("vendor.data_driver", exc.problems[0].message)
        return None
    if not (isinstance(cls, type) and issubclass(cls, ForeignDriver)):
        add("vendor.data_driver", f"{name!r} is not built on ForeignDriver (data_drivers/"
                                  "foreign.py), so it makes no native document to complete")
        return None
    try:
        driver = cls(_parsed(vendor.get("document"), getattr(cls, "input_format", "json")))
        driver.layout()
    except InputError as exc:
        for problem in exc.problems:
            where = problem.location
            add("vendor.document" + (where[1:] if where.startswith("$") else f": {where}"),
                problem.message)
        return None
    return driver.native


def _parsed(document, input_format):
    if not isinstance(document, str):
        return document
    if len(document) > MAX_TEXT:
        raise InputError([Problem("$", f"larger than {MAX_TEXT} characters")])
    from provision_agent.plan import json_text, yaml_text
    parse = yaml_text if input_format == "yaml" else json_text
    return parse.parse_document(document, "$")
