"""The conductor's encryption defaults (ironic_driver/document/crypt_defaults.py): a layout from
a deploy template that encrypts with `"tang": "conductor"` gets the conductor's Tang servers and its
recovery recipients (added to the layout's own), validate checks the filled layout, and
without servers configured validate refuses it, located."""

from ironic.common import exception
from ironic.conductor import task_manager

from ironic_driver.document import layouts, sent
from tests.unit.ironic_driver.document import test_layouts
from tests.unit.ironic_driver.document.test_layouts import TRAIT, LayoutCase, _sample

AGE = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"
THP = "x1AIFDuUJP6Nkk8-m3NvC8EZwE4"


def _encrypted_template_layout():
    layout = _sample("encrypted-raid1-lvm.json")
    del layout["recovery"], layout["images"], layout["bootloader"]
    layout["encrypted"][0]["unlock"] = {"tpm2": {}, "tang": "conductor", "threshold": 2}
    return layout


class TestConductorDefaults(LayoutCase):
    _validate = test_layouts.TestValidateAgainstInventory._validate

    def _payload(self):
        with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
            return sent.payload(task.node, "native", layouts.template_step(task))

    def test_the_conductor_fills_in_its_tang_servers_and_recovery_recipients(self):
        self.config(recovery_age_recipients=[AGE], group="provision_agent")
        self.config(tang_server=[f"http://tang1.example:7500 {THP}",
                                 f"http://tang2.example:7500  {THP}"], group="provision_agent")
        self._set(traits=[TRAIT])
        self._template(_encrypted_template_layout())
        doc = self._payload()
        self.assertEqual({"age_recipients": [AGE]}, doc["recovery"])
        self.assertEqual([{"url": "http://tang1.example:7500", "thumbprint": THP},
                          {"url": "http://tang2.example:7500", "thumbprint": THP}],
                         doc["encrypted"][0]["unlock"]["tang"])
        self._validate()

    def test_a_layout_naming_the_conductors_tang_servers_where_none_are_configured(self):
        self.config(recovery_age_recipients=[AGE], group="provision_agent")
        self._set(traits=[TRAIT])
        self._template(_encrypted_template_layout())
        exc = self.assertRaises(exception.InvalidParameterValue, self._validate)
        self.assertIn("$.encrypted[0].unlock.tang", str(exc))
        self.assertIn("[provision_agent]tang_server", str(exc))

    def test_a_layout_with_its_own_recovery_gets_the_conductors_recipients_too(self):
        # a layout's own recipients cannot keep the operator from the recovery keys
        self.config(recovery_age_recipients=["age1other"], group="provision_agent")
        layout = _sample("encrypted-raid1-lvm.json")
        del layout["images"], layout["bootloader"]
        self._set(instance=layout)
        doc = self._payload()
        self.assertEqual(layout["recovery"]["age_recipients"] + ["age1other"],
                         doc["recovery"]["age_recipients"])
