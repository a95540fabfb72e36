"""ironic_lib's hint matching is imported only when a hint is matched, and without eventlet and
pkg_resources (2.7 s of start-up in the VM), which stay importable for everyone else."""

import subprocess
import sys
import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st


def test_hint_matching_imports_ironic_lib_without_eventlet_or_pkg_resources(tmp_path):
    # stand-ins, ahead of any real ones on the path (recent setuptools has no pkg_resources):
    # what oslo.concurrency and ironic_lib would import if they could
    (tmp_path / "eventlet.py").write_text("IMPORTED_BY_HAND = True\n")
    (tmp_path / "pkg_resources.py").write_text(
        "IMPORTED_BY_HAND = True\n\ndef declare_namespace(name):\n    pass\n")
    code = textwrap.dedent("""
        import sys
        from provision_agent.cli import main as cli
        from provision_agent.plan import inventory
        assert "ironic_lib" not in sys.modules, "imported before any hint was matched"
        disks = [{"name": "/dev/sda", "size": 10 << 30, "serial": "S1"},
                 {"name": "/dev/sdb", "size": 20 << 30, "serial": "S2"}]
        assert [d["name"] for d in inventory.match(disks, {"serial": "S2"})] == ["/dev/sdb"]
        assert [d["name"] for d in inventory.match(disks, {"size": "<= 15"})] == ["/dev/sda"]
        assert "ironic_lib.utils" in sys.modules
        assert "eventlet" not in sys.modules and "pkg_resources" not in sys.modules
        import eventlet                     # visible again once ironic_lib is in
        assert eventlet.IMPORTED_BY_HAND
        import pkg_resources
        assert pkg_resources.IMPORTED_BY_HAND
        print("ok")
    """)
    env = {"PYTHONPATH": f"{tmp_path}:{':'.join(sys.path)}", "PATH": "/usr/bin:/bin"}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "ok"


def test_import_hiding_hides_only_while_importing(tmp_path, monkeypatch):
    from provision_agent.plan import hints as ironic_hints
    (tmp_path / "hidden_dep.py").write_text("")
    (tmp_path / "tries_dep.py").write_text(
        "try:\n    import hidden_dep\n    HAS = True\nexcept ImportError:\n    HAS = False\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("hidden_dep", "tries_dep"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert ironic_hints.import_hiding("tries_dep", ("hidden_dep",)).HAS is False
    assert "hidden_dep" not in sys.modules
    import hidden_dep  # noqa: F401  importable again
    assert "hidden_dep" in sys.modules


DISKS = [
    {"name": "/dev/sda", "size": 10 << 30, "serial": "S1", "wwn": "0x5000C500A1", "model": "QEMU"},
    {"name": "vdb", "size": 10 << 30, "serial": "disk1", "model": "QEMU HARDDISK"},
    {"name": "/dev/nvme0n1", "size": 10 << 30, "serial": " Ab:1+x ", "vendor": None},
    {"name": "/dev/sdc", "size": 10 << 30, "serial": "", "by_path": "/dev/disk/by-path/pci-0:1",
     "multipath": {"dm": "/dev/dm-0", "paths": [
         {"name": "/dev/sdc", "by_path": "/dev/disk/by-path/pci-0:1", "hctl": "0:0:0:0"},
         {"name": "/dev/sdd", "by_path": "/dev/disk/by-path/pci-1:1", "hctl": "1:0:0:0"}]}}]
VALUES = ["/dev/sda", "sda", "/dev/SDA", "vdb", "/dev/dm-0", "/dev/sdd", "s1", "S1", "disk1",
          "ab:1+x", "AB:1+X", "0x5000c500a1", "qemu", "none", "/dev/disk/by-path/pci-1:1",
          "pci-0:1", "1:0:0:0", "x", " disk1 "]


def _theirs(disks, hints):
    import ironic_lib.utils

    from provision_agent.plan import inventory
    hints = inventory.full_paths(hints)
    return [d["name"] for d in disks if any(
        True for _ in ironic_lib.utils.find_devices_by_hints(inventory._views(d, hints), hints))]


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["name", "serial", "wwn", "model", "vendor", "by_path",
                                        "hctl"]), st.sampled_from(VALUES), min_size=1))
def test_plain_string_hints_match_as_ironic_lib_matches_them(hints):
    from provision_agent.plan import inventory
    disks = [inventory.normalize(d) for d in DISKS]
    ours = inventory._plain_match(disks, inventory.full_paths(hints))
    if ours is not None:
        assert [d["name"] for d in ours] == _theirs(disks, hints), hints
    assert [d["name"] for d in inventory.match(disks, hints)] == _theirs(disks, hints), hints


def test_plain_hints_do_not_load_the_hint_library_and_the_rest_do(monkeypatch):
    from provision_agent.plan import hints as ironic_hints
    from provision_agent.plan import inventory

    def refuse(*_args):
        raise AssertionError("ironic_lib asked")

    monkeypatch.setattr(ironic_hints, "find_devices_by_hints", refuse)
    disks = [{"name": "/dev/vda", "serial": "disk0", "model": "QEMU HARDDISK"},
             {"name": "/dev/vdb", "serial": "disk1", "model": "QEMU HARDDISK"}]
    assert [d["name"] for d in inventory.match(disks, {"name": "/dev/vdb"})] == ["/dev/vdb"]
    assert [d["name"] for d in inventory.match(disks, {"serial": "DISK0"})] == ["/dev/vda"]
    for hints in ({"name": "s== /dev/vdb"}, {"name": "/dev/vdb", "size": 10},
                  {"serial": "<in> disk0"}, {"model": "QEMU HARDDISK"}, {"rotational": True},
                  {"model": "qemu"}):     # a device's value with a blank: ironic_lib decides
        try:
            inventory.match(disks, hints)
        except AssertionError as exc:
            assert "ironic_lib asked" in str(exc)
        else:
            raise AssertionError(f"{hints} did not reach ironic_lib")
