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
    """Run provision's main() on a document; return (exit code, stdout, stderr) via capsys-free IO."""
    import contextlib
    import io

    from provision_agent import cli

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
