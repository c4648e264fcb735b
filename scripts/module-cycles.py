#!/usr/bin/env python3
"""Import cycles between the modules of a crate: prints each cycle (a
strongly connected set of modules that use each other) and exits 1 if there
is one. `scripts/test.sh` runs it on every crate.

    scripts/module-cycles.py crates/omnigraph-validate-wasm crates/omnigraph-host

A module is a file under `src/`. Module A depends on module B when A's code
(its tests left out) names an item through `crate::…` or `super::…` that
resolves to B: the longest module path the name starts with, or, for a name
the crate root re-exports (`pub use b::Item`), the module it comes from; a
parent depends on a child it names without a prefix (`child::item`). A
`mod` declaration and a re-export are not uses: a parent that only declares
and re-exports its children does not depend on them.
"""

import re
import sys
from pathlib import Path

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def modules_of(src: Path) -> dict[tuple[str, ...], Path]:
    """Module path → file, for every .rs file under src (bins are roots of their own)."""
    out = {}
    for file in sorted(src.rglob("*.rs")):
        parts = file.relative_to(src).with_suffix("").parts
        if parts in {("lib",), ("main",)}:
            parts = ()
        elif parts[-1] == "mod":
            parts = parts[:-1]
        if parts[:1] == ("bin",):
            continue
        out.setdefault(parts, file)
    return out


def without_tests(text: str) -> str:
    """The file without its `#[cfg(test)] mod …` block (tests may use anything)."""
    match = re.search(r"#\[cfg\((?:test|all\(test\b[^\]]*\))\)\]\s*(pub\s+)?mod\s+" + IDENT + r"\s*\{", text)
    if not match:
        return text
    depth = 0
    for i in range(match.end() - 1, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[: match.start()] + text[i + 1 :]
    return text[: match.start()]


def without_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def expand(path_text: str) -> list[list[str]]:
    """`a::{b::C, d}` → [[a, b, C], [a, d]] (braces nested to any depth)."""
    path_text = re.sub(r"\s+", "", path_text)
    if "{" not in path_text:
        return [[p for p in path_text.split("::") if p]]
    head, _, rest = path_text.partition("{")
    inner = rest[: rest.rfind("}")]
    prefix = [p for p in head.split("::") if p]
    out, depth, start = [], 0, 0
    for i, ch in enumerate(inner + ","):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            item = inner[start:i]
            start = i + 1
            if item:
                out.extend(prefix + sub for sub in expand(item))
    return out


def referenced_paths(code: str) -> list[tuple[str, list[str]]]:
    """(anchor, segments) for every `crate::…`/`super::…` path, `use` trees expanded."""
    out = []
    for match in re.finditer(r"\b(crate|super)((?:::(?:super|" + IDENT + r"))*)(::\*)?(::\{)?", code):
        anchor, tail, glob, brace = match.groups()
        if not tail and not glob and not brace:
            continue  # `pub(crate)`, `pub(super)`: visibility, not a path
        if brace:
            depth, i = 1, match.end()
            while i < len(code) and depth:
                depth += {"{": 1, "}": -1}.get(code[i], 0)
                i += 1
            for segments in expand(tail + "::{" + code[match.end() : i]):
                out.append((anchor, segments))
        else:
            out.append((anchor, [p for p in tail.split("::") if p]))
    return out


def root_reexports(root_code: str, modules) -> dict[str, tuple[str, ...]]:
    """Item name → the module a crate root's `pub use` takes it from."""
    out = {}
    for match in re.finditer(r"pub\s+use\s+(?:crate::)?([^;]+);", root_code):
        for segments in expand(match.group(1)):
            name = segments[-1].split(" as ")[-1]
            for n in range(len(segments) - 1, 0, -1):
                if tuple(segments[:n]) in modules:
                    out[name] = tuple(segments[:n])
                    break
    return out


def resolve(module, anchor, segments, modules, reexports):
    base = () if anchor == "crate" else module[:-1]
    while segments and segments[0] == "super":
        base, segments = base[:-1], segments[1:]
    full = base + tuple(segments)
    for n in range(len(full), 0, -1):
        if full[:n] in modules and full[:n] != ():
            return full[:n]
    if base == () and segments and segments[0] in reexports:
        return reexports[segments[0]]
    return ()


def dependencies(src: Path):
    modules = modules_of(src)
    root_code = without_comments(modules[()].read_text())
    reexports = root_reexports(root_code, modules)
    graph = {}
    for module, file in modules.items():
        code = without_comments(without_tests(file.read_text()))
        # Declarations and re-exports are not uses.
        code = re.sub(r"(pub(\([^)]*\))?\s+)?mod\s+" + IDENT + r"\s*;", "", code)
        code = re.sub(r"pub(\([^)]*\))?\s+use\s+[^;]+;", "", code)
        targets = set()
        for anchor, segments in referenced_paths(code):
            target = resolve(module, anchor, segments, modules, reexports)
            if target != module:
                targets.add(target)
        # A child named from its parent without `crate::` (`child::item`).
        for child in modules:
            if len(child) == len(module) + 1 and child[: len(module)] == module:
                if re.search(r"(?<![:\w])(self::)?" + child[-1] + r"::", code):
                    targets.add(child)
        graph[module] = targets
    return graph


def cycles(graph):
    """Tarjan's strongly connected components of more than one module."""
    index, low, stack, on_stack, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def name(module):
    return "::".join(module) or "(crate root)"


def main():
    found = False
    for crate in sys.argv[1:] or ["crates/omnigraph-validate-wasm", "crates/omnigraph-host"]:
        graph = dependencies(Path(crate) / "src")
        components = cycles(graph)
        for component in components:
            found = True
            members = set(component)
            edges = [f"{name(a)} → {name(b)}" for a in component for b in sorted(graph[a]) if b in members]
            print(f"{crate}: cycle among {', '.join(name(m) for m in component)}")
            for edge in edges:
                print(f"    {edge}")
        if not components:
            print(f"{crate}: no import cycles ({len(graph)} modules)")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
