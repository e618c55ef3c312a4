#!/usr/bin/env python3
"""The layering of lib/ as docs/architecture.md draws it, checked against the code.

    tests/lint/layering.py SOURCE_DIR            check the tree; exit 1 with one line per problem
    tests/lint/layering.py --self-test           show that each kind of problem is caught

docs/architecture.md holds the plan as a table between <!-- layering --> and <!-- /layering -->:
one row per subsystem, "| `name` | `a`, `b` |" meaning lib/<name>/ and
lib/include/attntrace/<name>/ may include the public headers of <name>, a and b, and nothing else.
The checks:
  - every #include "..." in lib/ names either a header of the same folder (a private header, only
    from lib/<name>/) or attntrace/<s>/<file>.hpp where s is the file's own subsystem or one it may
    use; the header must exist. An include that goes up or sideways is reported with the plan's row.
  - lib/ holds only the plan's subsystems (and include/), include/attntrace/ only their folders.
  - lib/CMakeLists.txt declares each subsystem with `attntrace_subsystem(name USES ...)` listing
    exactly the plan's row, so the build enforces what the page says.
  - app/ includes only app/ headers and the library's public headers, and no header in lib/ or app/
    is part of an include cycle.
  - no string literal in lib/ names a command-line flag ("--heads"): the library names parameters,
    and the app puts them in its flags' words (app/flag_parsing.hpp, naming_flags).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
ROW = re.compile(r'^\|\s*`(\w+)`\s*\|([^|]*)\|', re.M)
STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]+")
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
DECL = re.compile(r'attntrace_subsystem\((\w+)((?:\s+USES(?:\s+\w+)+)?)\s*\)')


def read_plan(src):
    """docs/architecture.md's table -> {subsystem: set of subsystems it may use}."""
    text = open(os.path.join(src, "docs", "architecture.md"), encoding="utf-8").read()
    m = re.search(r"<!-- layering -->(.*?)<!-- /layering -->", text, re.S)
    if not m:
        sys.exit("docs/architecture.md: no <!-- layering --> table")
    plan = {}
    for name, uses in ROW.findall(m.group(1)):
        plan[name] = set(re.findall(r"`(\w+)`", uses))
    return plan


def subsystem_of(rel):
    """lib/<s>/x.cpp or lib/include/attntrace/<s>/x.hpp -> s; app/... -> 'app'."""
    parts = rel.split("/")
    if parts[0] == "app":
        return "app"
    if parts[1] == "include":
        return parts[3] if len(parts) > 4 else None
    return parts[1]


def sources(src, top):
    for root, _, files in os.walk(os.path.join(src, top)):
        for f in sorted(files):
            if f.endswith((".cpp", ".hpp", ".h")):
                yield os.path.relpath(os.path.join(root, f), src)


def resolve(src, rel, target):
    """Where #include "TARGET" in REL lands: the same folder first, then lib/include."""
    here = os.path.normpath(os.path.join(os.path.dirname(rel), target))
    if os.path.isfile(os.path.join(src, here)):
        return here
    public = os.path.join("lib", "include", target)
    return public if os.path.isfile(os.path.join(src, public)) else None


def check_includes(src, plan, problems):
    graph = {}
    for rel in list(sources(src, "lib")) + list(sources(src, "app")):
        sub = subsystem_of(rel)
        if sub is None:
            problems.append(f"{rel}: a public header outside lib/include/attntrace/<subsystem>/")
            continue
        if sub != "app" and sub not in plan:
            problems.append(f"{rel}: lib/{sub} is not a subsystem of docs/architecture.md's plan")
            continue
        graph[rel] = []
        text = open(os.path.join(src, rel), encoding="utf-8").read()
        for target in INCLUDE.findall(text):
            landed = resolve(src, rel, target)
            if landed is None:
                problems.append(f"{rel}: includes \"{target}\", which is not in its folder or lib/include")
                continue
            graph[rel].append(landed)
            to = subsystem_of(landed)
            if sub == "app":
                if not (landed.startswith("app/") or landed.startswith("lib/include/")):
                    problems.append(f"{rel}: includes {landed}, a private header of lib/")
                continue
            if landed.startswith("app/"):
                problems.append(f"{rel}: includes {landed}: lib/ never includes app/")
            elif not landed.startswith("lib/include/") and to != sub:
                problems.append(f"{rel}: includes {landed}, a private header of lib/{to}")
            elif to != sub and to not in plan[sub]:
                may = ", ".join(sorted(plan[sub])) or "nothing else"
                problems.append(f"{rel}: includes \"{target}\", but {sub} may use {may} (docs/architecture.md)")
    return graph


def check_cycles(graph, problems):
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in graph.get(node, []):
            if state.get(nxt) == "open":
                cycle = path[path.index(nxt):] + [nxt] if nxt in path else [node, nxt]
                problems.append("include cycle: " + " -> ".join(cycle))
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])


def check_folders(src, plan, problems):
    for entry in sorted(os.listdir(os.path.join(src, "lib"))):
        path = os.path.join(src, "lib", entry)
        if os.path.isdir(path) and entry != "include" and entry not in plan:
            problems.append(f"lib/{entry}: not a subsystem of docs/architecture.md's plan")
    public = os.path.join(src, "lib", "include", "attntrace")
    for entry in sorted(os.listdir(public)):
        if not os.path.isdir(os.path.join(public, entry)) or entry not in plan:
            problems.append(f"lib/include/attntrace/{entry}: not a subsystem folder of the plan")


def check_cmake(src, plan, problems):
    text = open(os.path.join(src, "lib", "CMakeLists.txt"), encoding="utf-8").read()
    declared = {}
    for name, uses in DECL.findall(text):
        declared[name] = set(uses.split()[1:]) if uses.strip() else set()
    for name, uses in plan.items():
        if name not in declared:
            problems.append(f"lib/CMakeLists.txt: no attntrace_subsystem({name} ...)")
        elif declared[name] != uses:
            problems.append(f"lib/CMakeLists.txt: {name} USES {', '.join(sorted(declared[name])) or 'nothing'}, "
                            f"the plan says {', '.join(sorted(uses)) or 'nothing'}")
    for name in declared:
        if name not in plan:
            problems.append(f"lib/CMakeLists.txt: subsystem {name} is not in docs/architecture.md's plan")


def check_flag_words(src, problems):
    for rel in sources(src, "lib"):
        text = COMMENT.sub("", open(os.path.join(src, rel), encoding="utf-8").read())
        for literal in STRING.findall(text):
            for flag in FLAG.findall(literal):
                problems.append(f"{rel}: the string {literal} names the flag {flag}: name the parameter, "
                                f"and let the app say the flag")


def check(src):
    plan = read_plan(src)
    problems = []
    check_flag_words(src, problems)
    graph = check_includes(src, plan, problems)
    check_cycles(graph, problems)
    check_folders(src, plan, problems)
    check_cmake(src, plan, problems)
    return plan, graph, problems


def self_test(src):
    """Copies the tree's lib/, app/ and docs/ and breaks it in each way once: each must be caught."""
    breakages = {
        "upward include": ("lib/tensor/tensor.cpp", '#include "attntrace/model/checkpoint.hpp"\n'),
        "sideways include": ("lib/pictures/plot.cpp", '#include "attntrace/check/compare.hpp"\n'),
        "private header of another subsystem": ("lib/model/checkpoint.cpp", '#include "../io/half.hpp"\n'),
        "lib including app": ("lib/check/compare.cpp", '#include "../../app/commands.hpp"\n'),
        "a flag named in lib": ("lib/check/compare.cpp", 'static const char* kWord = "give --rtol";\n'),
    }
    failures = 0
    for what, (file, line) in breakages.items():
        with tempfile.TemporaryDirectory() as tmp:
            for top in ("lib", "app", "docs"):
                shutil.copytree(os.path.join(src, top), os.path.join(tmp, top))
            with open(os.path.join(tmp, file), "r+", encoding="utf-8") as f:
                text = f.read()
                f.seek(0)
                f.write(line + text)
            caught = bool(check(tmp)[2])
            print(f"{what}: {'caught' if caught else 'NOT CAUGHT'}")
            failures += not caught
    with tempfile.TemporaryDirectory() as tmp:  # a cycle between two headers of one subsystem
        for top in ("lib", "app", "docs"):
            shutil.copytree(os.path.join(src, top), os.path.join(tmp, top))
        a = os.path.join(tmp, "lib/include/attntrace/tensor/tensor.hpp")
        with open(a, "a", encoding="utf-8") as f:
            f.write('#include "attntrace/tensor/stats.hpp"\n')
        caught = any("cycle" in p for p in check(tmp)[2])
        print(f"include cycle: {'caught' if caught else 'NOT CAUGHT'}")
        failures += not caught
    return failures


def main():
    if sys.argv[1:2] == ["--self-test"]:
        src = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "..")
        sys.exit(1 if self_test(os.path.abspath(src)) else 0)
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    plan, graph, problems = check(os.path.abspath(src))
    for p in problems:
        print(p)
    edges = sum(len(v) for v in graph.values())
    print(f"{len(graph)} files, {edges} include arrows, {len(plan)} subsystems: "
          f"{len(problems)} problem{'s' if len(problems) != 1 else ''}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
