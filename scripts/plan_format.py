"""Writes schema/plan-v1.json and the step table of docs/plan-format.md from the step classes
(provision_agent/plan_schema.py).

    python scripts/plan_format.py          # rewrite both
    python scripts/plan_format.py --check  # exit 1 when either is out of date

tests/unit/test_plan_format.py runs the check.
"""

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA = os.path.join(ROOT, "provision_agent", "schema", "plan-v1.json")
DOC = os.path.join(ROOT, "docs", "plan-format.md")
BEGIN = ("<!-- BEGIN generated from provision_agent/steps.py by scripts/plan_format.py; do "
         "not edit by hand -->")
END = "<!-- END generated -->"


def generated():
    sys.path.insert(0, ROOT)
    from provision_agent import plan_schema
    return (json.dumps(plan_schema.schema(), indent=1) + "\n",
            plan_schema.markdown_table())


def _doc_with(table):
    with open(DOC) as f:
        text = f.read()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{table}\n{END}{tail}"


def main(argv):
    schema, table = generated()
    with open(SCHEMA) if os.path.exists(SCHEMA) else open(os.devnull) as f:
        current_schema = f.read()
    with open(DOC) as f:
        current_doc = f.read()
    doc = _doc_with(table)
    if "--check" in argv:
        stale = [p for p, a, b in ((SCHEMA, current_schema, schema), (DOC, current_doc, doc))
                 if a != b]
        for path in stale:
            print(f"{path} is out of date: run python scripts/plan_format.py")
        return 1 if stale else 0
    with open(SCHEMA, "w") as f:
        f.write(schema)
    with open(DOC, "w") as f:
        f.write(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
