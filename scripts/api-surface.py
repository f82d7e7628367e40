#!/usr/bin/env python3
"""RangeGet's public surface, read from its symbol graph (swift-symbolgraph-extract).

    api-surface.py SYMBOLS.json SURFACE.txt [--update]

Fails when a public symbol written in the source has no doc comment (those
the compiler makes, such as `hashValue` of an enum, have no place in the
source and are left out), or when the surface differs from SURFACE.txt, the
committed one: a change to the public API is then made on purpose, with
`make api`, which writes SURFACE.txt anew (--update).
"""
import difflib
import json
import sys


def declaration(symbol):
    text = "".join(fragment["spelling"] for fragment in symbol.get("declarationFragments", []))
    return " ".join(text.split())


def main():
    graph_path, surface_path = sys.argv[1], sys.argv[2]
    update = "--update" in sys.argv[3:]
    with open(graph_path) as file:
        symbols = json.load(file)["symbols"]
    undocumented = []
    lines = []
    for symbol in symbols:
        path = ".".join(symbol["pathComponents"])
        if "location" in symbol and not symbol.get("docComment"):
            location = symbol["location"]
            undocumented.append(f"{location['uri'].split('/Sources/')[-1]}:{location['position']['line'] + 1}: {path}")
        lines.append(f"{path} | {declaration(symbol)}")
    lines = sorted(set(lines))
    types = sorted({s["pathComponents"][0] for s in symbols
                    if len(s["pathComponents"]) == 1 and s["kind"]["identifier"] in
                    ("swift.struct", "swift.class", "swift.enum", "swift.protocol", "swift.actor", "swift.typealias")})
    surface = [f"# RangeGet's public API: {len(types)} top-level types, {len(lines)} declarations.",
               "# Written by `make api`; `make test` fails when the source differs from it."] + lines
    failed = False
    if undocumented:
        failed = True
        print(f"api-surface: {len(undocumented)} public symbols have no doc comment:", file=sys.stderr)
        for line in undocumented:
            print("  " + line, file=sys.stderr)
    if update:
        with open(surface_path, "w") as file:
            file.write("\n".join(surface) + "\n")
        print(f"api-surface: wrote {surface_path}: {len(types)} types, {len(lines)} declarations")
    else:
        try:
            with open(surface_path) as file:
                committed = file.read().splitlines()
        except FileNotFoundError:
            committed = []
        if committed != surface:
            failed = True
            print(f"api-surface: the public API differs from {surface_path}; if the change is meant, run `make api` "
                  "and commit it:", file=sys.stderr)
            for line in difflib.unified_diff(committed, surface, surface_path, "the source", lineterm="", n=0):
                print("  " + line, file=sys.stderr)
        else:
            print(f"api-surface: the public API is as committed ({len(types)} types, {len(lines)} declarations), "
                  "every public symbol documented")
    sys.exit(1 if failed else 0)


main()
