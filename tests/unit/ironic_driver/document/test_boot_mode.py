"""The boot mode the document tells provision is Ironic's own answer for the node, under both
values of [deploy]default_boot_mode; a secure boot request reaches the layout's bootloader (the
signed chain), and a layout that says otherwise is refused at validate rather than ignored."""

import itertools

from ironic.common import exception
from ironic.conductor import task_manager
from ironic.drivers.modules import (
    boot_mode_utils,
    deploy_utils,  # noqa: F401  (boot_mode_utils needs it first)
)
from oslo_utils import uuidutils

from ironic_driver import validation
from ironic_driver.document import sent
from tests import REPO_ROOT
from tests.unit.ironic_driver import dbcase

# Every place Ironic keeps a boot mode, each unset or set to either mode.
CAPS = [None, "boot_mode:bios", "boot_mode:uefi"]
INSTANCE = [None, {"boot_mode": "bios"}, {"boot_mode": "uefi"}]
DEPRECATED = [None, "bios", "uefi"]
REPORTED = [None, "bios", "uefi"]       # what the management interface saw (node.boot_mode)


class TestBootMode(dbcase.NodeTestCase):
    def _node(self, caps, inst, deprecated, reported):
        info = {"image_source": "http://x/img", "provision_layout": {"version": 1}}
        if inst:
            info["capabilities"] = dict(inst)
        if deprecated:
            info["deploy_boot_mode"] = deprecated
        return self.make_node(
            uuid=uuidutils.generate_uuid(), name=None,
            driver_info={"provision_ssh_address": "192.0.2.1"},
            instance_info=info, properties={"capabilities": caps} if caps else {},
            boot_mode=reported)

    def test_the_document_says_what_ironic_boots(self):
        for default in ("uefi", "bios"):
            self.config(default_boot_mode=default, group="deploy")
            checked = refused = 0
            for n, combo in enumerate(itertools.product(CAPS, INSTANCE, DEPRECATED, REPORTED)):
                node = self._node(*combo)
                try:
                    expected = boot_mode_utils.get_boot_mode(node)
                except exception.InvalidParameterValue:
                    self.assertRaises(exception.InvalidParameterValue,
                                      sent.payload, node, "ironic")
                    refused += 1
                    continue
                self.assertEqual(expected, sent.payload(node, "ironic")["boot_mode"],
                                 (default, combo))
                checked += 1
            self.assertGreater(refused, 0)
            self.assertEqual(81, checked + refused)

    def test_nothing_set_is_uefi_as_ironic_39_boots_it(self):
        node = self._node(None, None, None, "bios")   # what the BMC reported does not decide
        self.assertEqual("uefi", sent.payload(node, "ironic")["boot_mode"])
        self.config(default_boot_mode="bios", group="deploy")
        self.assertEqual("bios", sent.payload(node, "ironic")["boot_mode"])

    def test_a_secure_boot_request_asks_for_the_signed_chain_in_uefi(self):
        node = self._node(None, {"secure_boot": "true"}, None, None)
        doc = sent.payload(node, "ironic")
        self.assertEqual((True, "uefi"), (doc["secure_boot"], doc["boot_mode"]))
        node.instance_info = dict(node.instance_info, provision_layout={
            "version": 1, "bootloader": {"kernel_params": "console=ttyS0"}})
        self.assertEqual({"kernel_params": "console=ttyS0", "boot_mode": "uefi",
                          "secure_boot": True, "origin": "boot_mode"},
                         sent.payload(node, "native")["bootloader"])
        self.assertFalse(sent.payload(self._node(None, None, None, None),
                                            "ironic")["secure_boot"])

    def test_a_layout_saying_no_secure_boot_is_refused_when_ironic_turns_it_on(self):
        layout = {"version": 1, "disks": [{"id": "d", "match": {"name": "/dev/vda"}}],
                  "bootloader": {"secure_boot": False}}
        node = self._node(None, {"secure_boot": "true"}, None, None)
        node.instance_info = dict(node.instance_info, provision_layout=layout)
        node.save()
        with task_manager.acquire(self.context, node.uuid, shared=True) as task:
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    validation.check_instance, task, "native")
        self.assertIn("bootloader.secure_boot: false, but Ironic turns Secure Boot on",
                      str(exc))

    def test_a_bios_layout_for_a_node_ironic_boots_in_uefi_is_refused_before_it_boots(self):
        import json
        import os
        root = REPO_ROOT
        with open(os.path.join(root, "samples", "single-disk.json")) as f:
            bios_layout = json.load(f)
        node = self._node(None, None, None, None)
        node.instance_info = dict(node.instance_info, provision_layout=bios_layout,
                                  image_checksum="0" * 64)
        node.save()
        with task_manager.acquire(self.context, node.uuid, shared=True) as task:
            # no inspected inventory: the checks that need no machine still run
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    validation.check_instance, task, "ironic")
        self.assertIn("UEFI boot needs a vfat filesystem mounted at /boot/efi", str(exc))

    def test_a_layout_that_names_the_other_boot_mode_is_refused(self):
        layout = {"version": 1, "disks": [{"id": "d", "match": {"name": "/dev/vda"}}],
                  "bootloader": {"boot_mode": "bios"}}
        node = self._node("boot_mode:uefi", None, None, None)
        node.instance_info = dict(node.instance_info, provision_layout=layout)
        node.save()
        for driver in ("native", "ironic"):
            with task_manager.acquire(self.context, node.uuid, shared=True) as task:
                exc = self.assertRaises(exception.InvalidParameterValue,
                                        validation.check_instance, task, driver)
            self.assertIn("'bios', but Ironic boots this node in 'uefi'", str(exc))

    def test_a_layout_that_leaves_the_boot_mode_open_gets_ironics(self):
        layout = {"version": 1, "disks": [{"id": "d", "match": {"name": "/dev/vda"}}],
                  "bootloader": {"kernel_params": "console=ttyS0"}}
        node = self._node("boot_mode:uefi", None, None, None)
        node.instance_info = dict(node.instance_info, provision_layout=layout)
        self.assertEqual("uefi", sent.payload(node, "native")["bootloader"]["boot_mode"])
