"""Glance image UUIDs in instance_info/image_source, on Ironic's DB fixtures (Glance and
Ironic's image caching mocked here; tests/ironic/integration/test_glance.py runs them for real)."""

import hashlib
import os
from unittest import mock

from ironic.common import exception, image_service, states
from ironic.conductor import task_manager
from ironic.drivers.modules import deploy_utils
from ironic.tests.unit.db import base as db_base
from ironic.tests.unit.objects import utils as obj_utils

from ironic_driver.document import images
from tests.unit.ironic_driver import test_deploy as test_unit

UUID = "5d7a2a3c-8d0f-4a52-9a1c-2f0e0c7f1b11"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFQ1pfAkHvNm0b3cOMDHmumCqAqb0cA1WYBMXuCCEYGo"


class TestGlanceValidate(db_base.DbTestCase):
    """validate: the image must exist; the dry plan sees the URL prepare will set."""

    _clear_attrs = test_unit.TestWithNode._clear_attrs
    _validate = test_unit.TestWithNode._validate
    _key = test_unit.TestWithNode._key

    def setUp(self):
        super().setUp()
        self.config(enabled_deploy_interfaces=["provision", "fake"])
        self.node = obj_utils.create_test_node(
            self.context, driver="fake-hardware", deploy_interface="provision",
            driver_info={"provision_ssh_address": "192.0.2.10", "provision_host_key": KEY},
            instance_info={}, properties={})

    def test_a_glance_uuid_is_planned_with_a_stand_in_url(self):
        with mock.patch.object(image_service.GlanceImageService, "show",
                               return_value={"id": UUID, "os_hash_algo": "sha512",
                                             "os_hash_value": "0" * 128}) as show:
            self._validate(image_source=UUID)
        show.assert_called_once_with(UUID)

    def test_an_unknown_glance_image_is_refused_before_power_on(self):
        with mock.patch.object(image_service.GlanceImageService, "show",
                               side_effect=exception.ImageNotFound(image_id=UUID)):
            exc = self.assertRaises(exception.InvalidParameterValue, self._validate,
                                    image_source=UUID)
        self.assertIn(f"image_source {UUID} is not a Glance image", str(exc))

    def test_for_validation_leaves_urls_alone(self):
        self.node.instance_info = {"image_source": "http://x/img"}
        self.assertNotIn("image_url", images.for_validation(self.node.instance_info, self.node))


class TestGlancePrepare(db_base.DbTestCase):
    _clear_attrs = test_unit.TestWithNode._clear_attrs

    def setUp(self):
        super().setUp()
        self.config(enabled_deploy_interfaces=["provision", "fake"])
        self.config(endpoint_override="http://192.0.2.1:6385", group="service_catalog")
        self.node = obj_utils.create_test_node(
            self.context, driver="fake-hardware", deploy_interface="provision",
            network_interface="noop", provision_state=states.DEPLOYING,
            driver_info={"provision_host_key": KEY}, instance_info={"image_source": UUID})

    def _prepare(self, resolved=None, record=None):
        resolved = resolved or {"image_source": UUID, "image_url": "http://conductor/img",
                                "image_os_hash_algo": "sha512", "image_os_hash_value": "ab" * 64}
        record = record or {"id": UUID, "disk_format": "raw", "size": 10}
        with mock.patch.object(deploy_utils, "build_instance_info_for_deploy",
                               return_value=resolved) as build, \
                mock.patch.object(image_service.GlanceImageService, "show",
                                  return_value=record):
            with task_manager.acquire(self.context, self.node.uuid) as task:
                task.driver.deploy.prepare(task)
        self.node.refresh()
        return build

    def test_an_image_ironic_decompressed_is_checksummed_as_served(self):
        """Ironic 39 inflates a zstd image in its cache and keeps Glance's checksums of the
        compressed bytes (seen in the power cycle: sha512 mismatch, exit 5)."""
        root = self.useFixture(__import__("fixtures").TempDir()).path
        self.config(http_root=root, http_url="http://192.0.2.1:8080", group="deploy")
        os.makedirs(os.path.join(root, "agent_images"))
        with open(os.path.join(root, "agent_images", self.node.uuid), "wb") as f:
            f.write(b"inflated image bytes")
        self._prepare(
            {"image_source": UUID, "image_disk_format": "raw", "image_checksum": "ab" * 16,
             "image_url": f"http://192.0.2.1:8080/agent_images/{self.node.uuid}"},
            {"id": UUID, "disk_format": "raw", "size": 7, "checksum": "ab" * 16,
             "properties": {"hash_algo": "sha512", "hash_value": "cd" * 64}})
        info = self.node.instance_info
        self.assertEqual(("sha256", hashlib.sha256(b"inflated image bytes").hexdigest()),
                         (info["image_os_hash_algo"], info["image_os_hash_value"]))
        self.assertIsNone(info["image_checksum"])

    def test_an_image_served_as_glance_holds_it_keeps_glances_hash(self):
        self._prepare({"image_source": UUID, "image_disk_format": "raw",
                       "image_url": "http://conductor/img"},
                      {"id": UUID, "disk_format": "raw", "size": 7,
                       "properties": {"hash_algo": "sha512", "hash_value": "cd" * 64}})
        self.assertEqual("cd" * 64, self.node.instance_info["image_os_hash_value"])

    def test_prepare_resolves_a_glance_uuid_through_ironic(self):
        build = self._prepare()
        self.assertEqual(1, build.call_count)
        self.assertEqual("http://conductor/img", self.node.instance_info["image_url"])
        self.assertEqual("sha512", self.node.instance_info["image_os_hash_algo"])

    def test_prepare_leaves_a_url_image_to_the_ramdisk(self):
        self.node.instance_info = {"image_source": "http://x/img"}
        self.node.save()
        build = self._prepare()
        self.assertEqual(0, build.call_count)
        self.assertNotIn("image_url", self.node.instance_info)


def test_glance_hash_found_where_ironic_39_files_it():
    # openstacksdk's names, filed under properties by Ironic's translation
    record = {"os_hash_algo": None, "os_hash_value": None, "checksum": "ab" * 16,
              "properties": {"hash_algo": "sha512", "hash_value": "cd" * 64}}
    assert images.glance_hash(record) == ("sha512", "cd" * 64)
    assert images.glance_hash({"os_hash_algo": "sha256", "os_hash_value": "ef" * 32}) == \
        ("sha256", "ef" * 32)
    assert images.glance_hash({"checksum": "ab" * 16}) == (None, None)
