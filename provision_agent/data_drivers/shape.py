"""Type checks of the parts of a foreign document (Fuel's, Ironic's) that a data driver reads.

Checked before the translation, so that a value of the wrong type is reported at its place
instead of surfacing as a TypeError deep inside it. Only types and string lengths are checked
(foreign documents carry many keys we do not read and older releases omit many we do), and no
message echoes a value: these documents carry passwords and signed URLs.
"""

import copy

from provision_agent.errors import Problem

NAMES = {"string": "a string", "number": "a number", "integer": "an integer",
          "object": "an object", "array": "a list", "boolean": "true or false", "null": "null"}


def kind(value):
    for name, types in (("null", type(None)), ("boolean", bool), ("integer", int),
                        ("number", float), ("string", str), ("array", list),
                        ("object", dict)):
        if isinstance(value, types):
            return NAMES[name]
    return type(value).__name__


def dotted(parts):
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out or "$"


def check(document, validator, where=lambda document, parts: dotted(parts), what="document"):
    """(problems, a copy of document without the values of the wrong type; None when document
    is no object at all).

    The translation runs on the copy, so that a wrong type here does not hide the problems of
    the parts that are right (a value it needs and does not find, it reports in its own words).
    validator: a jsonschema validator of types; where(document, path parts) names a place.
    """
    if not isinstance(document, dict):
        return [Problem("$", f"the {what} is an object, not {kind(document)}")], None
    found, bad_paths = [], []
    for err in validator.iter_errors(document):
        if err.validator == "type":
            wanted = err.validator_value
            wanted = [wanted] if isinstance(wanted, str) else wanted
            message = (f"must be {' or '.join(NAMES[w] for w in wanted)}, "
                       f"not {kind(err.instance)}")
        elif err.validator == "maxLength":
            message = f"longer than {err.validator_value} characters"
        else:
            continue
        found.append(Problem(where(document, list(err.absolute_path)), message))
        bad_paths.append(list(err.absolute_path))
    if not bad_paths:
        return [], document
    clean = copy.deepcopy(document)
    # Deepest and last first: removing a list item would shift its later siblings' indexes.
    for path in sorted(bad_paths, key=lambda p: (len(p), p), reverse=True):
        parent = clean
        for part in path[:-1]:
            parent = parent[part]
        if isinstance(parent, dict):
            parent.pop(path[-1], None)
        else:
            parent[path[-1]] = None
    return sorted(found, key=lambda p: p.location), clean
