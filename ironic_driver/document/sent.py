"""What provision gets from the conductor: the document (our contract, contract.py) or the
bare layout for --data_driver native, and the image keyring sent beside it.

Built by validate, to plan the deploy on the conductor, and by the look that starts provision
in the ramdisk (follow.py), which the deploy interface hands this module's for_ramdisk: the
conversation with the ramdisk never builds a document itself.
"""

from ironic.common import exception
from ironic.conf import CONF

from ironic_driver import report
from ironic_driver.document import contract, fragments, layouts, tenant_rules


def _invalid(msg):
    return exception.InvalidParameterValue(report.bounded(msg, report.MESSAGE_CHARS))


# A keyring of a few certificates is KiBs (Debian's archive keyring ~100 KiB).
KEYRING_MAX_BYTES = 4 << 20


def image_keyring(opts):
    """The bytes of [provision_agent]image_keyring, sent to the ramdisk with the document;
    None when it is not set."""
    if not opts.image_keyring:
        return None
    try:
        with open(opts.image_keyring, "rb") as f:
            data = f.read(KEYRING_MAX_BYTES + 1)
    except OSError as exc:
        raise _invalid(f"[provision_agent]image_keyring {opts.image_keyring} cannot be read: "
                       f"{exc.strerror}") from None
    if not data or len(data) > KEYRING_MAX_BYTES:
        raise _invalid(f"[provision_agent]image_keyring {opts.image_keyring} is "
                       f"{'empty' if not data else 'larger than 4 MiB'}: not a keyring")
    return data


def payload(node, data_driver, step=layouts.RECORDED, added=None):
    """What provision gets: our contract document, or the bare layout for --data_driver native.

    step: see layouts.choose (validate passes what the deploy templates say). added: the
    add_extensions fragments (fragments.py; validate passes the templates'), by default this
    deploy's own steps'.
    """
    added = fragments.from_steps(node) if added is None else added
    vendor = vendor_document(node)
    if vendor is not None:
        if data_driver == "native":
            raise _invalid("instance_info/provision_document (a vendor's format) needs "
                           "[provision_agent]data_driver = ironic, which hands it to its "
                           "data driver in the ramdisk")
        doc = contract.build(node)
        doc["vendor"] = vendor
        extensions = fragments.merge(added)
        if extensions:
            doc["extensions"] = extensions
        return doc
    choice = layouts.choose(node, step)
    layouts.check_images(choice, CONF.provision_agent.layout_images)
    tenant_rules.check_relaxations(choice)
    from provision_agent.plan import api
    for where, what in api.local_paths_of(choice.layout):
        # whatever the data driver: the ironic one refuses them too, the native one cannot
        raise _invalid(f"{choice.describe()}: {where}: {api.local_path_refusal(what)}")
    for where in api.passphrases_of(choice.layout):
        raise _invalid(f"{choice.describe()}: {where}: {api.passphrase_refusal}")
    template = layouts.step_choice(node, step) if tenant_rules.from_instance_info(choice) \
        else None
    layout = tenant_rules.keep_template_encryption(choice, template)
    doc = contract.build(node, layout=layout)
    own = (doc.get("layout") or {}).get("extensions")
    try:
        extensions = fragments.merge(added, own, f"{choice.describe()} (its extensions)")
    except exception.InvalidParameterValue as exc:
        raise _invalid(str(exc)) from None
    if extensions and data_driver != "native":
        doc["extensions"] = extensions      # the ironic data driver adds them to any layout
    if data_driver == "native":
        if "layout" not in doc:
            raise _invalid("data_driver native needs instance_info/provision_layout, a deploy "
                           "template's set_layout step or driver_info/provision_layout")
        if extensions:
            doc["layout"].setdefault("extensions", {}).update(extensions)
        # What the ironic data driver does with the document's boot mode, done here since
        # only the layout goes to the ramdisk.
        problems = []
        api.apply_boot_mode(doc["layout"], doc["boot_mode"],
                                    lambda where, msg: problems.append(f"{where}: {msg}"),
                                    where=f"{choice.describe()}: bootloader",
                                    create=False, secure_boot=doc["secure_boot"])
        # and with "keep": "on_rebuild": kept on a rebuild of the same instance only
        api.apply_keep_on_rebuild(doc["layout"], doc["rebuild"],
                                  lambda where, msg: problems.append(f"{where}: {msg}"),
                                  where=choice.describe())
        if problems:
            raise _invalid(problems[0])
        return doc["layout"]
    return doc


def vendor_document(node):
    """{"data_driver", "document"}: this deploy's layout in a vendor's own format
    (instance_info/provision_data_driver and provision_document), which comes first as
    instance_info/provision_layout would; None without one."""
    info = node.instance_info or {}
    name, document = info.get("provision_data_driver"), info.get("provision_document")
    if not name and document in (None, "", {}):
        return None
    if not name or document in (None, "", {}):
        raise _invalid("instance_info/provision_data_driver (an installed vendor data driver) "
                       "and instance_info/provision_document (its document) go together")
    if info.get("provision_layout") not in (None, "", {}):
        raise _invalid("instance_info gives both provision_layout and provision_document: "
                       "give this deploy's layout one way")
    return {"data_driver": name, "document": document}


def for_ramdisk(node, opts):
    """(what provision gets, the keyring sent beside it or None) for the node's deploy."""
    return payload(node, opts.data_driver), image_keyring(opts)
