"""An input document's YAML text to the same JSON-like document json_text.py gives: for a
data driver whose format is YAML (`input_format = "yaml"`), or a file named *.yaml / *.yml.

PyYAML's safe loader (no Python objects), refusing what a JSON document could not hold or what
would blow up: aliases (`*a`: a few lines expanding to gigabytes), keys that are not strings,
dates, binary, infinite numbers, NaN, and nesting deeper than json_text.MAX_DEPTH. Problems are
located as line:column of the input.
"""

import datetime
import math

from provision_agent.errors import InputError, Problem
from provision_agent.plan import json_text

SUFFIXES = (".yaml", ".yml")


def _loader():
    import yaml  # only a YAML input needs it (Debian python3-yaml, oslo.config's too)

    class Loader(yaml.SafeLoader):
        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark
                raise yaml.MarkedYAMLError("", None, "aliases (*name) are not accepted in an "
                                           "input document", mark)
            return super().compose_node(parent, index)
    return yaml, Loader


def parse_document(raw, where):
    """YAML text (bytes or str) → document, or InputError with the place of the problem."""
    yaml, loader = _loader()
    try:
        document = yaml.load(raw, Loader=loader)    # noqa: S506  (a SafeLoader subclass)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"{where}:{mark.line + 1}:{mark.column + 1}" if mark else where
        raise InputError([Problem(at, f"not valid YAML: {exc.problem or exc.context}")])
    except yaml.YAMLError as exc:
        raise InputError([Problem(where, f"not valid YAML: {exc}")])
    except RecursionError:
        raise InputError([Problem(where, f"nested deeper than {json_text.MAX_DEPTH} levels")])
    if json_text._depth_exceeds(document, json_text.MAX_DEPTH):
        raise InputError([Problem(where, f"nested deeper than {json_text.MAX_DEPTH} levels")])
    problem = _not_json(document)
    if problem:
        raise InputError([Problem(where, problem)])
    return document


def _not_json(document):
    """What in document a JSON document could not hold, or None."""
    stack = [(document, "$")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if not isinstance(key, str):
                    return f"{path}: key {str(key)[:40]!r} is not a string (quote it)"
                stack.append((value, f"{path}.{key}"))
        elif isinstance(node, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(node))
        elif isinstance(node, float) and not math.isfinite(node):
            return f"{path}: {node} is not a JSON number"
        elif isinstance(node, (datetime.date, bytes, set)):
            return f"{path}: a {type(node).__name__} is not a JSON value (quote it)"
    return None
