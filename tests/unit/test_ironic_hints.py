"""ironic_lib's hint matching is imported only when a hint is matched, and without eventlet and
pkg_resources (2.7 s of start-up in the VM), which stay importable for everyone else."""

import subprocess
import sys
import textwrap


def test_hint_matching_imports_ironic_lib_without_eventlet_or_pkg_resources(tmp_path):
    # stand-ins, ahead of any real ones on the path (recent setuptools has no pkg_resources):
    # what oslo.concurrency and ironic_lib would import if they could
    (tmp_path / "eventlet.py").write_text("IMPORTED_BY_HAND = True\n")
    (tmp_path / "pkg_resources.py").write_text(
        "IMPORTED_BY_HAND = True\n\ndef declare_namespace(name):\n    pass\n")
    code = textwrap.dedent("""
        import sys
        from provision_agent import cli, inventory
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
    from provision_agent import ironic_hints
    (tmp_path / "hidden_dep.py").write_text("")
    (tmp_path / "tries_dep.py").write_text(
        "try:\n    import hidden_dep\n    HAS = True\nexcept ImportError:\n    HAS = False\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("hidden_dep", "tries_dep"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert ironic_hints.import_hiding("tries_dep", ("hidden_dep",)).HAS is False
    assert "hidden_dep" not in sys.modules
    import hidden_dep                       # noqa: F401  importable again
    assert "hidden_dep" in sys.modules


def test_an_exact_device_path_matches_as_ironic_lib_does_without_importing_it():
    import ironic_lib.utils
    from provision_agent import inventory
    disks = [inventory.normalize(d) for d in (
        {"name": "/dev/sda", "size": 10 << 30},
        {"name": "vdb", "size": 10 << 30},
        {"name": "/dev/nvme0n1", "size": 10 << 30},
        {"name": "/dev/sdc", "size": 10 << 30,
         "multipath": {"dm": "/dev/dm-0", "paths": [{"name": "/dev/sdc"}, {"name": "/dev/sdd"}]}},
        {"name": "/dev/disk:1+x", "size": 10 << 30})]
    for name in ("/dev/sda", "sda", "vdb", "/dev/vdb", "/dev/nvme0n1", "/dev/dm-0", "/dev/sdd",
                 "/dev/disk:1+x", "/dev/none"):
        ours = [d["name"] for d in inventory.match(disks, {"name": name})]
        hints = {"name": inventory.normalize_name(name)}
        theirs = [d["name"] for d in disks if any(
            True for _ in ironic_lib.utils.find_devices_by_hints(inventory._views(d, hints), hints))]
        assert ours == theirs, name


def test_an_exact_device_path_does_not_load_the_hint_library(monkeypatch):
    from provision_agent import inventory, ironic_hints

    def refuse(*_args):
        raise AssertionError("ironic_lib asked for an exact device path")

    monkeypatch.setattr(ironic_hints, "find_devices_by_hints", refuse)
    disks = [{"name": "/dev/vda"}, {"name": "/dev/vdb"}]
    assert [d["name"] for d in inventory.match(disks, {"name": "/dev/vdb"})] == ["/dev/vdb"]
    # anything else still goes to ironic_lib
    for hints in ({"name": "s== /dev/vdb"}, {"name": "/dev/vdb", "size": 10}, {"serial": "x"}):
        try:
            inventory.match(disks, hints)
        except AssertionError as exc:
            assert "ironic_lib asked" in str(exc)
        else:
            raise AssertionError(f"{hints} did not reach ironic_lib")
