"""What a layout the tenant gives with the deploy (instance_info/provision_layout, inline) may
not do to the operator's checks (ironic_driver/document/tenant_rules.py), on Ironic's DB fixtures,
through the interface's own validate and the document the ramdisk would get."""

import copy
import json
import os

from ironic.common import exception
from ironic.conductor import task_manager

from ironic_driver.document import sent
from tests.unit.ironic_driver.document.test_layouts import SINGLE, LayoutCase

KEYRING = b"\x98\x33\x04keyring bytes as gpg --export writes them"


def _with_image(**image):
    layout = copy.deepcopy(SINGLE)
    layout["images"] = [dict({"uri": "http://images.example/root.img", "format": "raw",
                              "target": "root"}, **image)]
    return layout


UNSIGNED = _with_image(checksum="sha256:" + "1" * 64, allow_unsigned=True)
NO_CHECKSUM = _with_image(allow_no_checksum=True)


class TenantCase(LayoutCase):
    def setUp(self):
        super().setUp()
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
        key = os.path.join(self.dir, "key")
        with open(key, "wb") as f:
            f.write(ed25519.Ed25519PrivateKey.generate().private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                serialization.NoEncryption()))
        self.config(ssh_private_key_file=key, group="provision_agent")
        self.config(default_boot_mode="bios", group="deploy")    # the sample's bootloader

    def _validate(self, data_driver="ironic"):
        self.config(data_driver=data_driver, group="provision_agent")
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.deploy.validate(task)

    def _named(self, name, layout):
        with open(os.path.join(self.dir, name + ".json"), "w") as f:
            json.dump(layout, f)


class TestTenantsCannotRelaxChecks(TenantCase):
    def _keyring(self):
        path = os.path.join(self.dir, "keyring.pgp")
        with open(path, "wb") as f:
            f.write(KEYRING)
        self.config(image_keyring=path, group="provision_agent")

    def test_a_tenants_allow_unsigned_is_refused_at_validate_and_for_the_ramdisk(self):
        self._keyring()
        self._set(instance=UNSIGNED)
        for data_driver in ("ironic", "native"):
            exc = self.assertRaises(exception.InvalidParameterValue, self._validate,
                                    data_driver)
            self.assertIn("instance_info/provision_layout: images[0].allow_unsigned", str(exc))
            self.assertIn("may not switch off signature verification", str(exc))
            exc = self.assertRaises(exception.InvalidParameterValue, sent.payload,
                                    self.node, data_driver)
            self.assertIn("images[0].allow_unsigned", str(exc))

    def test_a_tenants_allow_no_checksum_is_refused(self):
        self._set(instance=NO_CHECKSUM)
        exc = self.assertRaises(exception.InvalidParameterValue, self._validate)
        self.assertIn("images[0].allow_no_checksum", str(exc))
        self.assertIn("may not switch off the image's checksum", str(exc))

    def test_the_tenants_layout_as_json_text_is_the_tenants_too(self):
        self._keyring()
        self._set(instance=json.dumps(UNSIGNED))
        exc = self.assertRaises(exception.InvalidParameterValue, self._validate)
        self.assertIn("images[0].allow_unsigned", str(exc))

    def test_the_operators_layouts_may_allow_unsigned_images(self):
        self._keyring()
        self.config(layout_images=True, group="provision_agent")
        self._named("unsigned", UNSIGNED)
        self._set(instance="unsigned")      # the tenant picks the operator's file
        self._validate()
        self._set(instance="", driver=UNSIGNED)
        self._validate()
        self.assertTrue(sent.payload(self.node, "ironic")["layout"]["images"][0][
            "allow_unsigned"])

    def test_a_tenants_signed_image_passes(self):
        self._keyring()
        self._set(instance=_with_image(checksum="sha256:" + "1" * 64,
                                       signature="http://images.example/root.img.sig"))
        self._validate()


class TestNoRamdiskPaths(TenantCase):
    """A layout naming a file of the ramdisk (file:// or a path) is refused at validate and
    when the document is built, whatever the data driver and whoever wrote the layout."""

    JOB = "file:///run/provision-ironic/input.json"

    def test_a_tenants_file_image_is_refused(self):
        self._set(instance=_with_image(uri=self.JOB, checksum="sha256:" + "1" * 64))
        for data_driver in ("ironic", "native"):
            exc = self.assertRaises(exception.InvalidParameterValue, self._validate,
                                    data_driver)
            self.assertIn("instance_info/provision_layout: images[0].uri: a path in the "
                          "ramdisk", str(exc))
            self.assertNotIn("input.json", str(exc))
            self.assertRaises(exception.InvalidParameterValue, sent.payload,
                              self.node, data_driver)

    def test_an_operators_key_file_path_is_refused_too(self):
        layout = copy.deepcopy(SINGLE)
        layout["encrypted"] = [{"id": "crypt-swap", "device": "swap", "unlock": {"key_file": {
            "uri": "/run/provision-ironic/input.json", "checksum": "sha256:" + "2" * 64}}}]
        self._set(driver=layout)
        exc = self.assertRaises(exception.InvalidParameterValue, self._validate, "native")
        self.assertIn("driver_info/provision_layout: encrypted[0].unlock.key_file.uri: a path "
                      "in the ramdisk", str(exc))

    def test_a_passphrase_is_refused_whoever_gives_it_and_never_shown(self):
        """Ironic keeps instance_info and deploy templates in clear and shows them through
        its API: a console passphrase is not taken through it (plan/passphrases.py)."""
        layout = copy.deepcopy(SINGLE)
        layout["encrypted"] = [{"id": "crypt-swap", "device": "swap",
                                "unlock": {"passphrase": "s3cret typed at boot"}}]
        layout["recovery"] = {"age_recipients": [AGE_OPERATOR]}
        for data_driver in ("ironic", "native"):
            self._set(driver=layout)
            exc = self.assertRaises(exception.InvalidParameterValue, self._validate,
                                    data_driver)
            self.assertIn("driver_info/provision_layout: encrypted[0].unlock.passphrase: a "
                          "passphrase is not taken through Ironic", str(exc))
            self.assertNotIn("s3cret", str(exc))
            self.assertRaises(exception.InvalidParameterValue, sent.payload,
                              self.node, data_driver)

    def test_instance_info_image_source_as_a_path_is_refused(self):
        self.node.instance_info = dict(self.node.instance_info, image_source=self.JOB)
        self.node.save()
        exc = self.assertRaises(exception.InvalidParameterValue, self._validate)
        self.assertIn("instance_info.image_source: a path in the ramdisk", str(exc))


AGE_OPERATOR = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"
AGE_TEMPLATE = "age1lggyhqrw2nlhcxprm67z43rta597azn8gknawjehu9d9dl0jq3yqqvfafg"
AGE_TENANT = "age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwj"


def _encrypted(recipient=None):
    """The sample's encrypted RAID1 under LVM (/, swap and /srv/data on the encrypted volume
    group), without its image and bootloader, sealed to recipient."""
    from tests.unit.ironic_driver.document.test_layouts import _sample
    layout = _sample("encrypted-raid1-lvm.json")
    del layout["images"], layout["bootloader"]
    if recipient:
        layout["recovery"] = {"age_recipients": [recipient]}
    else:
        del layout["recovery"]
    return layout


def _plain_raid1():
    """The same disks and arrays, nothing encrypted: what a tenant swaps in."""
    layout = _encrypted()
    del layout["encrypted"]
    layout["volume_groups"][0]["pvs"] = ["md-os"]
    return layout


class TestRecoveryAndTemplateEncryption(TenantCase):
    def _payload_at_validate(self):
        from ironic_driver.document import layouts
        with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
            return sent.payload(task.node, "native", layouts.template_step(task))

    def test_the_operators_recipients_are_added_to_a_tenants_own(self):
        self.config(recovery_age_recipients=[AGE_OPERATOR], group="provision_agent")
        self._set(instance=_encrypted(AGE_TENANT))
        doc = sent.payload(self.node, "native")
        self.assertEqual([AGE_TENANT, AGE_OPERATOR], doc["recovery"]["age_recipients"])
        self._set(instance=_encrypted(AGE_OPERATOR))      # no duplicate
        doc = sent.payload(self.node, "native")
        self.assertEqual([AGE_OPERATOR], doc["recovery"]["age_recipients"])

    def test_a_tenants_plain_layout_cannot_replace_an_encrypting_template(self):
        self._set(instance=_plain_raid1(), traits=["CUSTOM_RAID1_LVM"])
        self._template(_encrypted(AGE_TEMPLATE))
        exc = self.assertRaises(exception.InvalidParameterValue, self._payload_at_validate)
        self.assertIn("instance_info/provision_layout: deploy template CUSTOM_RAID1_LVM "
                      "(step deploy.set_layout) encrypts /, /srv/data, swap, which this layout "
                      "leaves in the clear", str(exc))
        exc = self.assertRaises(exception.InvalidParameterValue, self._validate, "native")
        self.assertIn("may not drop the encryption a deploy template requires", str(exc))

    def test_a_tenants_plain_layout_fails_at_deploy_too(self):
        from ironic_driver.document import layouts
        self._set(instance=_plain_raid1())
        layouts.record_step(self.node, _encrypted(AGE_TEMPLATE))
        self.node.set_driver_internal_info("deploy_steps", [
            {"interface": "deploy", "step": layouts.STEP, "priority": 150,
             "args": {"layout": _encrypted(AGE_TEMPLATE)}}])
        self.node.save()
        exc = self.assertRaises(exception.InvalidParameterValue, sent.payload,
                                self.node, "native")
        self.assertIn("may not drop the encryption", str(exc))

    def test_a_tenants_encrypting_layout_keeps_the_templates_recipients(self):
        self._set(instance=_encrypted(AGE_TENANT), traits=["CUSTOM_RAID1_LVM"])
        self._template(_encrypted(AGE_TEMPLATE))
        doc = self._payload_at_validate()
        self.assertEqual([AGE_TENANT, AGE_TEMPLATE], doc["recovery"]["age_recipients"])
        self.assertEqual("crypt-os", doc["encrypted"][0]["id"])

    def test_without_a_tenants_layout_the_template_applies_as_before(self):
        self._set(traits=["CUSTOM_RAID1_LVM"])
        self._template(_encrypted(AGE_TEMPLATE))
        doc = self._payload_at_validate()
        self.assertEqual([AGE_TEMPLATE], doc["recovery"]["age_recipients"])
