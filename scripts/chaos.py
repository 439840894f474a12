"""Chaos suite driver (issue 23): run the chaos cases and print one JSON document.

    python scripts/chaos.py [--case NAME ...] [--quick] [--list]

Cases come from ``scripts/chaos_apiserver.py`` (API server: kill -9 under writes, forced watch
disconnects, fuzzed requests) and ``scripts/chaos_roles.py`` (manager/scheduler/koordlet), each
exposing ``CASES: dict[str, Callable[..., dict]]``; a case takes ``quick`` (smaller sizes, as the
tests use) and returns its figures including ``ok``. A case that raises is reported as
``{"ok": false, "error": ...}``. Output: ``{"cases": {name: {...}}, "ok": all ok}``; the exit status
is 0 iff ``ok``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
for entry in (str(ROOT), str(ROOT / "scripts")):
    if entry not in sys.path:
        sys.path.insert(0, entry)

MODULES = ("chaos_apiserver", "chaos_roles")


def collect() -> dict[str, Callable[..., dict]]:
    """Every case of the chaos modules present, in module order (a missing module contributes none)."""
    cases: dict[str, Callable[..., dict]] = {}
    for name in MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name != name:
                raise  # the module exists but one of its imports is missing: a real error
            continue
        for case, fn in module.CASES.items():
            if case in cases:
                raise SystemExit(f"chaos case {case!r} is defined twice")
            cases[case] = fn
    return cases


def run(names: list[str], *, quick: bool) -> dict:
    """Run the named cases (all when empty) and return the JSON document."""
    cases = collect()
    results: dict[str, dict] = {}
    for name in names or list(cases):
        began = time.monotonic()
        try:
            figures = dict(cases[name](quick=quick))
        except Exception as err:  # one broken case must not hide the others' figures
            figures = {"ok": False, "error": f"{type(err).__name__}: {err}",
                       "traceback": traceback.format_exc().splitlines()[-8:]}
        figures["seconds"] = round(time.monotonic() - began, 2)
        figures["ok"] = bool(figures.get("ok"))
        results[name] = figures
    return {"cases": results, "ok": all(r["ok"] for r in results.values())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", default=[], metavar="NAME", help="run only this case (repeatable)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (what the tests run)")
    parser.add_argument("--list", action="store_true", help="print the case names and exit")
    args = parser.parse_args(argv)
    cases = collect()
    if args.list:
        print("\n".join(cases))
        return 0
    unknown = [n for n in args.case if n not in cases]
    if unknown:
        parser.error(f"--case: Unsupported value: {unknown[0]!r}: supported values: {', '.join(cases)}")
    doc = run(args.case, quick=args.quick)
    print(json.dumps(doc, indent=2, sort_keys=False))
    return 0 if doc["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
