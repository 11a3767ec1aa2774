#!/usr/bin/env python3
"""The import graph of a Rust crate's source files, and its circles.

Reads every `.rs` file under a crate's `src/`, finds the paths it names
(`crate::a::b`, `super::c`, `self::d`, a child module's `e::f`, in `use`
lines and in expressions),
and resolves each to the file of the deepest module that exists. A file that
names another module's item depends on that module's file. Module
declarations (`mod x;`) and `#[cfg(test)]` blocks are not dependencies:
a parent that declares a child is not above or below it, and tests may
reach anywhere.

Prints the strongly connected components (circles) of more than one file,
largest first. With `--max N`, exits 1 when a circle has more than N files:
CI keeps the floors one way with it.

    python3 tools/import_graph.py apiserver/src --max 31 \
        --never registry=handlers,server,admission,controllers,aggregator

`--never FROM=TO,...` states a floor's invariant: no module under FROM
(only FROM itself, written `FROM!`) imports a module under any TO.
"""

import argparse
import os
import re
import sys

PATH_RE = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_GROUP_RE = re.compile(r"\buse\s+(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{", re.S)


def strip_comments_and_strings(text):
    """Blank out comments and string literals (keeping line structure)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth += 1
                    j += 2
                elif text.startswith("*/", j):
                    depth -= 1
                    j += 2
                else:
                    j += 1
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 20]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'" and i + 2 < n and (text[i + 1] == "\\" or text[i + 2] == "'"):
            # a char literal ('x', '\n', '\u{..}'); lifetimes pass through
            j = text.find("'", i + 2)
            i = (j + 1) if j > 0 else n
            out.append("' '")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def after_block(text, j):
    """The index just past the `}` closing a block whose body starts at j."""
    depth = 1
    while j < len(text) and depth:
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
        j += 1
    return j


def strip_test_modules(text):
    """Drop `#[cfg(test)] mod x { ... }` blocks (tests may reach anywhere)."""
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", text)
        if not m:
            return text
        j = after_block(text, m.end())
        text = text[: m.start()] + "\n" * text.count("\n", m.start(), j) + text[j:]


def module_of(root, path):
    """`src/a/b.rs` -> ('a','b'); `src/a/mod.rs` -> ('a',); lib.rs/main.rs -> ()."""
    rel = os.path.relpath(path, root)[:-3].split(os.sep)
    if rel[-1] == "mod":
        rel = rel[:-1]
    if rel in (["lib"], ["main"]):
        return ()
    return tuple(rel)


def collect(root):
    files = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            if name.endswith(".rs"):
                p = os.path.join(dirpath, name)
                files[module_of(root, p)] = p
    return files


def child_modules(text):
    """Names of `mod x;` declarations: child modules in files of their own."""
    return set(re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", text, re.M))


def inline_modules(text):
    """Names of `mod x { ... }` blocks declared inline (their own scope)."""
    return set(re.findall(r"\bmod\s+(\w+)\s*\{", text))


def expand_groups(text):
    """`use crate::a::{b, c::d}` -> the paths crate::a::b, crate::a::c::d."""
    paths = []
    for m in USE_GROUP_RE.finditer(text):
        base = m.group(1) + m.group(2)
        start = m.end()
        j = after_block(text, start)
        inner = text[start: j - 1]
        stack, cur = [base], ""
        for ch in inner + ",":
            if ch == "{":
                stack.append(stack[-1] + "::" + cur.strip().rstrip(":").rstrip(":"))
                cur = ""
            elif ch in ",}":
                item = cur.strip()
                if item and item not in ("self", "*"):
                    item = item.split(" as ")[0].strip()
                    paths.append(stack[-1] + "::" + item)
                elif item == "self":
                    paths.append(stack[-1])
                cur = ""
                if ch == "}":
                    stack.pop()
            else:
                cur += ch
    return paths


def resolve(files, here, head, rest):
    """The module a path names, deepest first, from module `here`."""
    if head == "crate":
        base = ()
    elif head == "super":
        base = here[:-1]
        while rest and rest[0] == "super":
            base, rest = base[:-1], rest[1:]
    else:
        base = here
    full = base + tuple(rest)
    for k in range(len(full), -1, -1):
        if full[:k] in files:
            return full[:k]
    return None


def graph(root):
    files = collect(root)
    edges = {m: set() for m in files}
    for mod, path in files.items():
        with open(path, encoding="utf-8") as f:
            text = strip_test_modules(strip_comments_and_strings(f.read()))
        inline = inline_modules(text)
        paths = [m.group(1) + m.group(2) for m in PATH_RE.finditer(text)]
        paths += expand_groups(text)
        # a child module named without `self::` (`create::handle(..)`,
        # `use create::Answer;`) is a path from this module too
        children = child_modules(text)
        if children:
            bare = re.compile(r"(?<![:\w])(" + "|".join(sorted(children)) + r")((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
            for m in bare.finditer(text):
                if not re.search(r"\bmod\s+$", text[max(0, m.start() - 12): m.start()]):
                    paths.append("self::" + m.group(1) + m.group(2))
        for p in paths:
            parts = p.split("::")
            head, rest = parts[0], [x for x in parts[1:] if x]
            if head == "self" and rest and rest[0] in inline:
                continue
            target = resolve(files, mod, head, rest)
            if target is not None and target != mod:
                # a parent naming its own child, or a child its parent's
                # re-export, is one module; still an edge, like any other
                edges[mod].add(target)
    return files, edges


def sccs(edges):
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        work = [(v, iter(sorted(edges[v])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    advanced = True
                    break
                elif w in on:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                out.append(comp)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def name(mod):
    return "::".join(mod) or "(crate root)"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", help="a crate's src directory")
    ap.add_argument("--max", type=int, default=None, help="fail when a circle has more files than this")
    ap.add_argument("--edges", action="store_true", help="print every edge")
    ap.add_argument("--never", action="append", default=[], metavar="FROM=TO,TO",
                    help="modules under FROM must not import modules under any TO (a floor's invariant)")
    args = ap.parse_args()
    files, edges = graph(args.src)
    broken = []
    for rule in args.never:
        src, _, targets = rule.partition("=")
        exact = src.endswith("!")
        below = tuple(src.rstrip("!").split("::"))
        above = [tuple(t.split("::")) for t in targets.split(",") if t]
        for m in sorted(edges):
            if m[: len(below)] != below or (exact and m != below):
                continue
            for t in sorted(edges[m]):
                if any(t[: len(a)] == a for a in above):
                    broken.append(f"{name(m)} -> {name(t)} (rule {rule})")
    if args.edges:
        for m in sorted(edges):
            for t in sorted(edges[m]):
                print(f"{name(m)} -> {name(t)}")
    comps = sorted((c for c in sccs(edges) if len(c) > 1), key=len, reverse=True)
    print(f"{len(files)} files, {sum(len(e) for e in edges.values())} imports, "
          f"{len(comps)} circles; largest: {len(comps[0]) if comps else 1} files")
    for c in comps:
        print(f"  circle of {len(c)}: " + ", ".join(sorted(name(m) for m in c)))
    failed = False
    for b in broken:
        print(f"error: floor invariant broken: {b}", file=sys.stderr)
        failed = True
    if args.max is not None and comps and len(comps[0]) > args.max:
        print(f"error: a circle of {len(comps[0])} files (allowed: {args.max})", file=sys.stderr)
        failed = True
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
