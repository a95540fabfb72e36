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
