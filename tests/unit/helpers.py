import copy
import json
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"


def sample(name):
    return json.loads((SAMPLES / f"{name}.json").read_text())


def inventory(name):
    return json.loads((SAMPLES / "inventory" / f"{name}.json").read_text())


def run_cli(tmp_path, doc, inv="three-disks", extra=(), raw=None):
    """Run provision's main() on a document; return (exit code, stdout, stderr), capsys-free."""
    import contextlib
    import io

    from provision_agent.cli import main as cli

    path = tmp_path / "input.json"
    if isinstance(raw, bytes):
        path.write_bytes(raw)
    else:
        path.write_text(raw if raw is not None else json.dumps(doc))
    inv_path = tmp_path / "inventory.json"
    inv_path.write_text(json.dumps(inventory(inv) if isinstance(inv, str) else inv))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(["--input_data_file", str(path), "--inventory_file", str(inv_path),
                       "--dry_run", *extra])
    return rc, out.getvalue(), err.getvalue()


def mutate(doc, fn):
    doc = copy.deepcopy(doc)
    fn(doc)
    return doc


def _configdrive():
    """Ironic's configdrive form (gzip'd, base64'd ISO9660 labelled config-2), as small as a
    primary volume descriptor allows: what validation reads of it, and nothing else."""
    import base64
    import gzip
    pvd = bytearray(2048)
    pvd[0:6] = b"\x01CD001"
    pvd[40:72] = b"config-2".ljust(32)
    return base64.b64encode(gzip.compress(bytes(32768) + bytes(pvd), mtime=0)).decode()


CONFIGDRIVE = _configdrive()
