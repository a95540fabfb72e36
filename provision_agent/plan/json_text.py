"""An input document's text to JSON, refusing what the rest could not handle: bytes that are
not UTF-8, infinite numbers, NaN, and nesting deeper than any real document.

Apart from pipeline.py so that reading the input needs no more than the standard library:
the HTTP bomb tests import it under the ramdisk's own (Debian's) Python.
"""

import json

from provision_agent.errors import InputError, Problem

MAX_DEPTH = 64     # the deepest real document (Fuel's) nests 7 levels


def _finite(text):
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:20]} is too large")
    return value


def _no_constant(name):
    raise ValueError(f"{name} is not a JSON number")


def parse_document(raw, where):
    """JSON text (bytes or str) → document, or InputError with the place of the problem."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError([Problem(f"{where}: byte {exc.start}",
                                      "not UTF-8 text (a JSON document must be UTF-8)")])
    try:
        document = json.loads(raw, parse_float=_finite, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise InputError([Problem(f"{where}:{exc.lineno}:{exc.colno}",
                                  f"not valid JSON: {exc.msg}")])
    except ValueError as exc:
        raise InputError([Problem(where, f"not valid JSON: {exc}")])
    except RecursionError:
        raise InputError([Problem(where, f"nested deeper than {MAX_DEPTH} levels")])
    if _depth_exceeds(document, MAX_DEPTH):
        raise InputError([Problem(where, f"nested deeper than {MAX_DEPTH} levels")])
    return document


def _depth_exceeds(document, limit):
    # Iterative: the point is to refuse what recursive code downstream could not walk.
    stack = [(document, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > limit:
                return True
            children = node.values() if isinstance(node, dict) else node
            stack.extend((c, depth + 1) for c in children)
    return False
