"""A checksum file's URL in instance_info at validate, on Ironic's DB fixtures: planned for
the ramdisk to read, unless Ironic's [conductor]disable_support_for_checksum_files says no
(the file itself is read in the ramdisk: tests/unit/drivers/images/test_checksum_file.py)."""

from ironic.common import exception

from tests.unit.ironic_driver import dbcase
from tests.unit.ironic_driver import test_deploy as test_unit

SUMS = "http://images.example.com/disk.raw.sha256sum"


class StaticNodeCase(dbcase.NodeTestCase):
    """A node at a static ramdisk address with a root device hint, validated as
    test_deploy's are (also for test_image_keyring)."""
    _validate = test_unit.TestWithNode._validate
    _key = test_unit.TestWithNode._key

    def setUp(self):
        super().setUp()
        self.node = self.make_node(
            driver_info={"provision_ssh_address": "192.0.2.10",
                         "provision_host_key": test_unit.HOST_KEY},
            properties={"root_device": {"serial": "disk0"}})


class TestChecksumUrlValidate(StaticNodeCase):

    def test_a_checksum_file_url_passes_validate(self):
        self._validate(image_source="http://images.example.com/disk.raw", image_checksum=SUMS)
        self._validate(image_source="http://images.example.com/disk.raw",
                       image_os_hash_algo="sha256", image_os_hash_value=SUMS)

    def test_ironics_switch_against_checksum_files_is_obeyed(self):
        self.config(disable_support_for_checksum_files=True, group="conductor")
        for key in ("image_checksum", "image_os_hash_value"):
            exc = self.assertRaises(exception.InvalidParameterValue, self._validate,
                                    image_source="http://images.example.com/disk.raw",
                                    image_os_hash_algo="sha256", **{key: SUMS})
            self.assertIn(f"instance_info/{key} is the URL of a checksum file, which this "
                          "conductor refuses ([conductor]disable_support_for_checksum_files)",
                          str(exc))
