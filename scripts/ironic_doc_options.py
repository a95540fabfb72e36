"""Writes the [provision_agent] option table in docs/ironic.md from ironic_driver/config.py.

    python scripts/ironic_doc_options.py          # rewrite the table in place
    python scripts/ironic_doc_options.py --check  # exit 1 when the guide is out of date

tests/unit/ironic_driver/test_config_doc.py runs the check, so an option added without regenerating
the guide fails the unit suite.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import docgen  # noqa: E402  (a sibling script, not a package)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "ironic.md")
BEGIN = ("<!-- BEGIN generated from ironic_driver/config.py by scripts/ironic_doc_options.py; "
         "do not edit by hand -->")
END = "<!-- END generated -->"
TYPES = {"StrOpt": "string", "IntOpt": "integer", "BoolOpt": "boolean", "ListOpt": "list",
         "MultiStrOpt": "string, repeatable",
         "FloatOpt": "float", "PortOpt": "port"}


def _cell(text):
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(opt):
    if opt.default is None:
        return "(unset)"
    if isinstance(opt.default, bool):
        return f"`{str(opt.default).lower()}`"
    if isinstance(opt.default, list):
        return f"`{','.join(opt.default)}`" if opt.default else "(empty)"
    return f"`{opt.default}`"


def render():
    sys.path.insert(0, ROOT)
    from ironic_driver import config
    lines = ["| option | type | default | meaning |", "|---|---|---|---|"]
    for opt in config.opts:
        kind = TYPES.get(type(opt).__name__, type(opt).__name__)
        lines.append(f"| `{opt.dest}` | {kind} | {_default(opt)} | {_cell(opt.help)} |")
    return "\n".join(lines)


def update(text):
    return docgen.between(text, BEGIN, END, render(), DOC)


def main(argv):
    with open(DOC) as f:
        text = f.read()
    return docgen.write_or_check({DOC: update(text)}, argv, "ironic_doc_options.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
