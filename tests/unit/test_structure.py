"""The shape the code keeps (docs/testing.md, "Structure"): no import cycle between modules,
counting the imports inside functions too; no module over about 300 lines and no function over
about 60. The import contracts between the packages are import-linter's (tox -e lint)."""

import ast
import os

from tests import REPO_ROOT

ROOT = REPO_ROOT
PACKAGES = ("provision_agent", "ironic_driver")
MAX_MODULE_LINES = 320
MAX_FUNCTION_LINES = 65


def _modules():
    found = {}
    for package in PACKAGES:
        for base, _dirs, files in os.walk(os.path.join(ROOT, package)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(base, name)
                    dotted = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                    found[dotted.removesuffix(".__init__")] = path
    return found


def _imports(path, module, known):
    tree = ast.parse(open(path, encoding="utf-8").read())
    out = set()
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                out.add(name)
    return out


def _cycles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, result, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return result


def test_no_import_cycle_between_modules():
    modules = _modules()
    # a package's __init__ importing its own modules is how a package exposes them
    graph = {m: {d for d in _imports(p, m, modules) if not m.startswith(d + ".")}
             for m, p in modules.items()}
    assert _cycles(graph) == []


def test_modules_and_functions_stay_small():
    too_long = []
    for module, path in _modules().items():
        text = open(path, encoding="utf-8").read()
        if text.count("\n") > MAX_MODULE_LINES:
            too_long.append(f"{module}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{module}.{node.name}: {length} lines")
    assert too_long == []
