"""A plug-in author's test kit (docs/extending.md, "Testing a plug-in"): install a plug-in's
entry points as pip would, without installing anything, and forget them afterwards.

    from tests.plugins.harness import install_plugins

    def test_mine(tmp_path, monkeypatch):
        install_plugins(tmp_path, monkeypatch, {"vendor_raid": "mypkg.raid:VendorRaid"})
        ...

`plugins` (a pytest fixture) does the same with the example vendor package. `loop_run` (a
pytest fixture; root, losetup) runs a document for real on loop devices through `provision
--allow_loop_devices`, as an operator would on a machine:

    def test_on_loops(plugins, loop_run):
        disk = loop_run.disk(512 << 20)             # /dev/loopN over a sparse file
        result = loop_run(document_naming(disk))    # provision's exit code, output, events
        assert result.rc == 0, result.err
        text = loop_run.read(disk, "/etc/vendor/agent.conf")   # read back from the device
"""

import contextlib
import io
import json
import subprocess
import types

import pytest

from provision_agent.plan import extensions, steps


def install_plugins(tmp_path, monkeypatch, entry_points, package="example-vendor-steps",
                    namespace="provision_agent.step_kinds"):
    """Distribution metadata declaring `entry_points` ({name: "module:Class"}) in `namespace`
    (step kinds, or provision_agent.data_drivers), on sys.path for this test; loaded plug-ins
    forgotten after it (monkeypatch undoes sys.path, `forget` the registrations)."""
    dist = tmp_path / "site" / f"{package.replace('-', '_')}-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        f"[{namespace}]\n"
        + "".join(f"{name} = {target}\n" for name, target in entry_points.items()))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    forget(entry_points)
    monkeypatch.setattr(extensions, "_LOADED", {})
    return dist


def forget(names):
    for name in names:
        extensions._LOADED.pop(name, None)
        steps.KINDS.pop(name, None)


EXAMPLE = {"vendor_raid": "tests.plugins.example_vendor:VendorRaid",
           "vendor_agent": "tests.plugins.example_vendor:VendorAgent"}


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    """The example vendor package (tests/plugins/example_vendor.py) installed."""
    install_plugins(tmp_path, monkeypatch, EXAMPLE)
    yield EXAMPLE
    forget(EXAMPLE)


class LoopRun:
    """Loop devices over sparse files, `provision --allow_loop_devices` run on a document
    naming them, files read back from them; every device unmounted and detached afterwards."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.made = []

    def disk(self, size):
        backing = self.tmp / f"loop{len(self.made)}.img"
        with open(backing, "wb") as f:
            f.truncate(size)
        dev = subprocess.run(["losetup", "-f", "--show", str(backing)], check=True,
                             capture_output=True, text=True).stdout.strip()
        self.made.append(dev)
        return dev

    def __call__(self, document, *extra):
        from provision_agent.cli import main as cli
        path, events = self.tmp / "input.json", self.tmp / "events.jsonl"
        path.write_text(json.dumps(document))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli.main(["--input_data_file", str(path), "--allow_loop_devices",
                           "--target_root", str(self.tmp / "target"), "--events_file",
                           str(events), "--plan_format", "json", *extra])
        lines = events.read_text().splitlines() if events.exists() else []
        return types.SimpleNamespace(rc=rc, out=out.getvalue(), err=err.getvalue(),
                                     events=[json.loads(line) for line in lines])

    def read(self, device, path):
        """The text of `path` in the filesystem on `device` (None when absent)."""
        where = self.tmp / "check"
        where.mkdir(exist_ok=True)
        subprocess.run(["mount", "-o", "ro", device, str(where)], check=True)
        try:
            file = where / path.lstrip("/")
            return file.read_text() if file.is_file() else None
        finally:
            subprocess.run(["umount", str(where)], check=True)

    def close(self):
        for dev in self.made:
            subprocess.run(["umount", "-R", dev], capture_output=True)
            subprocess.run(["losetup", "-d", dev], capture_output=True)


@pytest.fixture
def loop_run(tmp_path):
    run = LoopRun(tmp_path)
    yield run
    run.close()
