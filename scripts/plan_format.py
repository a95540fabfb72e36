"""Writes schema/plan-v1.json and the step table of docs/plan-format.md from the step classes
(provision_agent/plan/plan_schema.py).

    python scripts/plan_format.py          # rewrite both
    python scripts/plan_format.py --check  # exit 1 when either is out of date

tests/unit/plan/test_plan_schema.py runs the check.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import docgen  # noqa: E402  (a sibling script, not a package)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA = os.path.join(ROOT, "provision_agent", "schema", "plan-v1.json")
DOC = os.path.join(ROOT, "docs", "plan-format.md")
BEGIN = ("<!-- BEGIN generated from provision_agent/plan/steps.py by scripts/plan_format.py; do "
         "not edit by hand -->")
END = "<!-- END generated -->"


def generated():
    sys.path.insert(0, ROOT)
    from provision_agent.plan import plan_schema
    return (json.dumps(plan_schema.schema(), indent=1) + "\n",
            plan_schema.markdown_table())


def main(argv):
    schema, table = generated()
    with open(DOC) as f:
        doc = docgen.between(f.read(), BEGIN, END, table, DOC)
    return docgen.write_or_check({SCHEMA: schema, DOC: doc}, argv, "plan_format.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
