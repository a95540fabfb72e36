"""Writes the option and exit-code tables of docs/cli.md from the code: the oslo.config
options (provision_agent/cli/config.py) and errors.EXIT_CODES.

    python scripts/cli_doc.py          # rewrite the tables in place
    python scripts/cli_doc.py --check  # exit 1 when docs/cli.md is out of date

tests/unit/cli/test_doc.py runs the check.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import docgen  # noqa: E402  (a sibling script, not a package)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "cli.md")
MARK = "<!-- {} generated from the code by scripts/cli_doc.py; do not edit by hand -->"


def _cell(text):
    return " ".join(str(text).split()).replace("|", "\\|")


def options_table():
    sys.path.insert(0, ROOT)
    from provision_agent.cli import config
    rows = ["| option | default | meaning |", "|---|---|---|"]
    for opt in config.cli_opts + config.logging_cli_opts:
        default = "(unset)" if opt.default in (None, "", []) else f"`{opt.default}`"
        if isinstance(opt.default, bool):
            default = f"`{str(opt.default).lower()}`"
        choices = getattr(getattr(opt, "type", None), "choices", None)
        meaning = _cell(opt.help) + (f" One of: {', '.join(f'`{c}`' for c in choices)}."
                                     if choices else "")
        rows.append(f"| `--{opt.dest}` | {default} | {meaning} |")
    return "\n".join(rows)


def exit_codes_table():
    sys.path.insert(0, ROOT)
    from provision_agent import errors
    rows = ["| code | meaning |", "|---|---|"]
    rows += [f"| {code} | {_cell(text)} |" for code, text in errors.EXIT_CODES.items()]
    return "\n".join(rows)


def main(argv):
    with open(DOC) as f:
        text = f.read()
    for name, table in (("options", options_table()), ("exit codes", exit_codes_table())):
        text = docgen.between(text, MARK.format(f"BEGIN {name}"), MARK.format(f"END {name}"),
                              table, DOC)
    return docgen.write_or_check({DOC: text}, argv, "cli_doc.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
