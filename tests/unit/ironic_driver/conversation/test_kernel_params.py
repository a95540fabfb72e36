"""A tenant's instance_info/kernel_append_params and the deploy ramdisk (issue 52 item 6), on
Ironic's DB fixtures: Ironic's own PXE code puts the tenant's words on the ramdisk's command
line, so validate and every boot into the ramdisk refuse the words our ramdisk obeys (init
ignores sshkey= on an Ironic boot too: tests/unit/ramdisk/test_ssh_keys.py)."""

from unittest import mock

from ironic.common import exception, pxe_utils, states
from ironic.conductor import task_manager
from ironic.conductor import utils as manager_utils

from ironic_driver import deploy
from ironic_driver.conversation import kernel_params
from tests.unit.ironic_driver import dbcase
from tests.unit.ironic_driver.test_checksum_url import StaticNodeCase

IMAGE = {"image_source": "http://images.example.com/disk.raw",
         "image_checksum": "0" * 64}
SSHKEY = "sshkey=c3NoLWVkMjU1MTkgQUFBQUMzTnphQzFsWkRJMU5URTVBQUFBSVRFTkFOVA=="


class TestIronicPutsTheTenantsWordsThere(dbcase.NodeTestCase):

    def test_the_tenants_sshkey_reaches_the_ramdisks_pxe_command_line(self):
        """What the refusal is for: Ironic 39's own PXE options, with ours beside them."""
        node = self.make_node(driver_info={}, instance_info={
            **IMAGE, "kernel_append_params": f"console=ttyS0 {SSHKEY}"})
        with task_manager.acquire(self.context, node.uuid) as task:
            line = pxe_utils.build_extra_pxe_options(
                task, {"ipa-api-url": dbcase.API_URL})["pxe_append_params"]
        self.assertIn(SSHKEY, line.split())
        self.assertIn(f"ipa-api-url={dbcase.API_URL}", line.split())


class TestValidate(StaticNodeCase):

    def _refused(self, params):
        exc = self.assertRaises(exception.InvalidParameterValue, self._validate,
                                kernel_append_params=params, **IMAGE)
        return str(exc)

    def test_words_the_ramdisk_obeys_are_refused_naming_the_word_and_why(self):
        for params, key, why in [
                (f"console=ttyS0 {SSHKEY}", "sshkey", "authorize it as an SSH key for root"),
                ("rdinit=/bin/sh", "rdinit", "instead of the ramdisk's /init"),
                ('quiet "init=/bin/sh"', "init", "instead of the ramdisk's /init"),
                ("provision.hostkey=baked", "provision.hostkey", "build's SSH host key"),
                ("provision.debug", "provision.debug", "setting of the provision ramdisk"),
                ("ipa-insecure=1", "ipa-insecure", "TLS verification"),
                ("ipa_api_url=http://evil.example", "ipa_api_url", "the API it reports to"),
                ("boot_method=vmedia", "boot_method", "booted from virtual media"),
                ("BOOTIF=01-52-54-00-12-34-56", "BOOTIF", "reports to inspection"),
                ("loglevel=7", "loglevel", "with the agent token of a virtual-media boot"),
                ("ignore_loglevel", "ignore_loglevel", "agent token"),
                ("debug", "debug", "agent token"),
                # inside a quoted value: init's and the agent's word splitting find it there
                (f'acpi_osi="!Windows {SSHKEY}"', "sshkey", "SSH key for root"),
                (f"console=ttyS0\t{SSHKEY}", "sshkey", "SSH key for root")]:
            msg = self._refused(params)
            self.assertIn(f"instance_info/kernel_append_params names {key!r}", msg)
            self.assertIn(why, msg)
            self.assertIn("driver_info/kernel_append_params", msg)

    def test_every_word_refused_is_named(self):
        msg = self._refused(f"rdinit=/x {SSHKEY} ipa-insecure=1")
        self.assertIn("names 'rdinit' (and 'sshkey', 'ipa-insecure')", msg)

    def test_a_long_word_is_cut_in_the_message(self):
        msg = self._refused("provision." + "x" * 5000)
        self.assertNotIn("x" * 100, msg)

    def test_other_words_pass(self):
        self._validate(kernel_append_params="console=ttyS0,115200n8 nomodeset %default% "
                                            "sshkeys=1 myprovision.x=1 ipa=1 initcall_debug "
                                            'acpi_osi="!Windows 2015"', **IMAGE)
        self._validate(**IMAGE)

    def test_the_operators_driver_info_is_not_looked_at(self):
        self.node.driver_info = {**self.node.driver_info,
                                 "kernel_append_params": f"console=ttyS0 {SSHKEY}"}
        self.node.save()
        self._validate(**IMAGE)


class TestEveryRamdiskBoot(dbcase.NodeTestCase):
    """prepare and prepare_cleaning ask for the ramdisk's options: refused there too (a
    cleaning runs without our validate)."""

    def test_prepare_cleaning_refuses_before_booting(self):
        node = self.make_node(driver_info={}, provision_state=states.CLEANING,
                              instance_info={"kernel_append_params": SSHKEY})
        with task_manager.acquire(self.context, node.uuid) as task, \
                mock.patch.object(task.driver.boot, "prepare_ramdisk") as prepare, \
                mock.patch.object(manager_utils, "node_power_action") as power:
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    task.driver.deploy.prepare_cleaning, task)
        self.assertIn("names 'sshkey'", str(exc))
        prepare.assert_not_called()
        power.assert_not_called()

    def test_ramdisk_options_without_the_field(self):
        node = self.make_node(driver_info={}, instance_info={"kernel_append_params": "quiet"})
        self.assertEqual({"ipa-api-url": dbcase.API_URL, "loglevel": "4"},
                         deploy.ramdisk_options(node))


def test_words_are_split_as_the_shell_and_the_kernel_split_them():
    assert kernel_params.refused("") == []
    assert [k for k, _ in kernel_params.refused('a "b sshkey=x" "rdinit=/y"\x0bipa-x')] == [
        "sshkey", "rdinit", "ipa-x"]
