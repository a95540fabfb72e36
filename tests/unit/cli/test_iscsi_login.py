"""The layout's iSCSI LUNs are logged in to before discovery on the live machine, never when
planning against a recorded inventory (issue 56)."""

import types

from provision_agent.cli import main
from provision_agent.drivers import iscsi
from provision_agent.plan.model import Disk, IscsiTarget

IQN = "iqn.2026-11.example.provision:root"


def layout(with_iscsi):
    lun = IscsiTarget(portal="10.0.2.2", target=IQN, lun=0) if with_iscsi else None
    return types.SimpleNamespace(disks=[Disk(id="a", hints={"name": "vda"}),
                                        Disk(id="b", hints={}, iscsi=lun)])


def test_login_comes_before_discovery_on_the_live_machine(monkeypatch):
    order = []
    monkeypatch.setattr(iscsi, "log_in_all",
                        lambda runner, lay: order.append("login") or {"b": "/dev/x"})
    monkeypatch.setattr(main, "_live_disks", lambda loops=(): order.append("discover") or [])
    conf = types.SimpleNamespace(inventory_file=None)
    main.machine_disks(conf, layout(True))
    assert order == ["login", "discover"]
    order.clear()
    main.machine_disks(conf, layout(False))
    assert order == ["discover"]


def test_no_login_against_a_recorded_inventory(monkeypatch, tmp_path):
    monkeypatch.setattr(iscsi, "log_in_all", lambda *a: (_ for _ in ()).throw(AssertionError))
    inv = tmp_path / "inv.json"
    inv.write_text('{"inventory": {"disks": []}}')
    assert main.machine_disks(types.SimpleNamespace(inventory_file=str(inv)),
                              layout(True)) == []
