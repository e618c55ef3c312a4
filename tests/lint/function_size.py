#!/usr/bin/python3
"""No function in lib/ or app/ longer than 80 lines (CONVENTIONS.md; issue 10).

Usage: tests/lint/function_size.py [--max 80] [--list N] [ROOT]
Reads every .cpp/.hpp under ROOT/lib and ROOT/app, strips comments, strings and character
literals, and follows the braces: a brace block opened at namespace or class scope after a closing
parenthesis (and optional qualifiers: const, noexcept, override, final, a trailing return type, an
initializer list) is a function body. A function's length is the count of lines from its opening
brace to its closing brace, both included, which is what clang-tidy's
readability-function-size LineThreshold counts. Lambdas and local classes count toward the
function that holds them. Exits 1 listing each function over the limit, 0 otherwise; --list N
prints the N longest.
"""
import argparse
import pathlib
import re
import sys

SCOPE = re.compile(r"\b(namespace|class|struct|union|enum)\b[^()]*$|extern\s+\"C\"\s*$")
FUNCTION = re.compile(r"\)\s*(const|noexcept(\([^)]*\))?|override|final|mutable|&|&&|->[^;{}]*|"
                      r":\s*[^;{}]*|\s)*$", re.S)
CONTROL = re.compile(r"\b(if|for|while|switch|catch)\s*\(")


def strip(text):
    """TEXT with comments, string and char literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """(name, first line, length) of every function body in PATH."""
    text = strip(path.read_text(encoding="utf-8"))
    stack = []  # per open brace: ("scope" | "function" | "other", start line, name)
    header_start = 0
    line = 1
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c == "{":
            header = text[header_start:i]
            in_function = any(kind == "function" for kind, _, _ in stack)
            if not in_function and SCOPE.search(header.strip()):
                stack.append(("scope", line, ""))
            elif not in_function and FUNCTION.search(header) and not CONTROL.search(header):
                name = re.findall(r"([~\w:<>]+)\s*\(", header)
                stack.append(("function", line, name[0] if name else "?"))
            else:
                stack.append(("other", line, ""))
            header_start = i + 1
        elif c == "}":
            if stack:
                kind, start, name = stack.pop()
                if kind == "function":
                    yield name, start, line - start + 1
            header_start = i + 1
        elif c == ";":
            header_start = i + 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root", nargs="?", default=pathlib.Path(__file__).resolve().parents[2])
    ap.add_argument("--max", type=int, default=80)
    ap.add_argument("--list", type=int, default=0)
    args = ap.parse_args()
    root = pathlib.Path(args.root)
    found = []
    for sub in ("lib", "app"):
        for path in sorted((root / sub).rglob("*")):
            if path.suffix in (".cpp", ".hpp", ".h", ".cc"):
                found += [(length, f"{path.relative_to(root)}:{start}", name) for name, start, length in functions(path)]
    found.sort(reverse=True)
    for length, where, name in found[: args.list]:
        print(f"{length:4d}  {where}  {name}")
    over = [f for f in found if f[0] > args.max]
    for length, where, name in over:
        print(f"FAIL: {where}: {name} is {length} lines (at most {args.max})", file=sys.stderr)
    print(f"{len(found)} functions in lib/ and app/, {len(over)} over {args.max} lines")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
