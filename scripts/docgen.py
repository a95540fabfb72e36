"""What the scripts that write generated tables into docs share: the text between a BEGIN and
an END marker replaced, and a --check mode that only says whether a file is up to date."""

import sys


def between(text, begin, end, table, path):
    head, sep, rest = text.partition(begin)
    _, sep2, tail = rest.partition(end)
    if not sep or not sep2:
        raise SystemExit(f"{path}: the generated-table markers are missing")
    return f"{head}{begin}\n{table}\n{end}{tail}"


def write_or_check(files, argv, script):
    """files: {path: wanted text}. With --check: 1 when any differs from what is on disk."""
    stale = []
    for path, wanted in files.items():
        try:
            with open(path) as f:
                current = f.read()
        except FileNotFoundError:
            current = None
        if current == wanted:
            continue
        if "--check" in argv:
            stale.append(path)
            print(f"{path} is out of date: run python scripts/{script}")
        else:
            with open(path, "w") as f:
                f.write(wanted)
    return 1 if stale else 0


def run(main):
    sys.exit(main(sys.argv[1:]))
