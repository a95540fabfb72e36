"""A vendor's own layout format through Ironic (issue 59 item 11): instance_info names an
installed vendor data driver and holds its document (here YAML text); the conductor checks it
with that driver before anything boots, the ramdisk gets it as the document's `vendor`, and
the ironic data driver completes what the vendor's driver makes from instance_info (the
deploy's image written where the vendor's layout mounts /), its problems located in the
vendor's own paths."""

import os
import pathlib
import tempfile

import pytest
from ironic.common import exception
from ironic.conductor import task_manager
from ironic.tests.unit.db import utils as db_utils

from ironic_driver import validation
from ironic_driver.document import sent
from provision_agent.plan import api
from tests.plugins.harness import install_plugins
from tests.unit.data_drivers.test_vendor_format import VENDOR as PLAIN
from tests.unit.ironic_driver import dbcase
from tests.unit.ironic_driver.test_raid import INVENTORY

# through Ironic the layout gets Ironic's bootloader (grub2, BIOS here): a bios_grub volume
VENDOR = PLAIN.replace("  volumes:\n",
                       "  volumes:\n    - {name: bios, size: 1MiB, type: bios_grub}\n")


class TestVendorFormat(dbcase.NodeTestCase):
    def setUp(self):
        super().setUp()
        self.patch = pytest.MonkeyPatch()
        self.addCleanup(self.patch.undo)
        where = tempfile.TemporaryDirectory()
        self.addCleanup(where.cleanup)
        install_plugins(pathlib.Path(where.name), self.patch,
                        {"vendor_yaml": "tests.plugins.example_format:VendorYaml"},
                        package="example-vendor-format",
                        namespace="provision_agent.data_drivers")
        self.node = self.make_node(driver_info={}, properties={
            "capabilities": "boot_mode:bios"}, instance_info={
            "image_source": "http://x/img", "image_checksum": "0" * 64,
            "provision_data_driver": "vendor_yaml", "provision_document": VENDOR})
        db_utils.create_test_inventory(node_id=self.node.id, inventory=INVENTORY)

    def _validate(self, data_driver="ironic"):
        with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
            validation.check_instance(task, data_driver)

    def test_the_vendor_document_is_checked_and_completed_from_instance_info(self):
        self._validate()
        doc = sent.payload(self.node, "ironic")
        self.assertEqual({"data_driver": "vendor_yaml", "document": VENDOR}, doc["vendor"])
        self.assertNotIn("layout", doc)
        layout = api.load_layout(doc, "ironic")
        self.assertEqual("http://x/img", layout.images[0].uri)
        root = next(fs for fs in layout.filesystems if fs.mount == "/")
        self.assertEqual(root.device, layout.images[0].target)

    def test_its_problems_are_located_in_the_vendors_own_paths(self):
        self.node.instance_info = dict(self.node.instance_info, provision_document=VENDOR.replace(
            "size: 1GiB", "size: lots"))
        self.node.save()
        exc = self.assertRaises(exception.InvalidParameterValue, self._validate)
        self.assertIn("vendor.document.storage.volumes[2].size: 'lots'", str(exc))

    def test_it_needs_the_ironic_data_driver_and_one_way_of_giving_the_layout(self):
        exc = self.assertRaises(exception.InvalidParameterValue, self._validate, "native")
        self.assertIn("needs [provision_agent]data_driver = ironic", str(exc))
        with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "samples",
                               "single-disk.json")) as f:
            self.node.instance_info = dict(self.node.instance_info, provision_layout=f.read())
        self.node.save()
        exc = self.assertRaises(exception.InvalidParameterValue, self._validate)
        self.assertIn("gives both provision_layout and provision_document", str(exc))

    def test_a_data_driver_that_is_not_installed_is_named(self):
        self.node.instance_info = dict(self.node.instance_info,
                                       provision_data_driver="acme_xml")
        self.node.save()
        exc = self.assertRaises(exception.InvalidParameterValue, self._validate)
        self.assertIn("vendor.data_driver: unknown data driver 'acme_xml'", str(exc))
