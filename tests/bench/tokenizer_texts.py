"""The benchmark's texts for tokenizers, made from what a Debian system holds offline, in a fixed
order, so that a run on the same packages sees the same bytes (bench.py prints their sha256):

- English: /usr/share/common-licenses, then /usr/share/doc/*/copyright and the man pages of
  section 1 with their troff markup stripped, paragraph by paragraph, each paragraph once, taking
  one from each source in turn until the size is reached.
- mixed scripts: tests/fixtures/tokenizers/hostile/texts.json, then the translations in
  /usr/share/locale/*/LC_MESSAGES/*.mo (about 190 languages: Latin with accents, Cyrillic, Greek,
  Arabic, Hebrew, Devanagari and other Indic scripts, Thai, Khmer, CJK, Hangul, Ethiopic ...), one
  message per language in turn, each message once, until the size is reached.

Usage: tokenizer_texts.py english|mixed SIZE OUT (or import english(), mixed())."""
import glob
import gzip
import json
import os
import re
import struct
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _prose(p):
    """Mostly letters and spaces: not a table of markup or numbers."""
    return len(p) > 40 and sum(c.isalpha() or c.isspace() for c in p) > 0.8 * len(p)


def _paragraphs(text):
    return [p.strip() for p in re.split(r"\n\s*\n", text) if _prose(p.strip())]


def _troff_text(raw):
    lines = []
    for line in raw.splitlines():
        if line.startswith((".", "'")):
            words = line.split(None, 1)
            if len(words) == 2 and words[0] in (".SH", ".SS", ".TP", ".B", ".I", ".BR", ".IR", ".IP"):
                lines.append(words[1].replace('"', ""))
            elif words and words[0] in (".PP", ".P", ".LP", ".sp"):
                lines.append("")
            continue
        lines.append(line)
    text = "\n".join(lines)
    text = re.sub(r"\\f[BIRP]|\\f\(..|\\s[-+]?\d|\\\(..|\\[&|^]", "", text)
    return text.replace("\\-", "-").replace("\\e", "\\").replace("\\ ", " ")


def _interleave(sources, size):
    """Paragraphs taken from each source in turn, each paragraph once, until SIZE UTF-8 bytes."""
    seen, out, total = set(), [], 0
    iters = [iter(s) for s in sources]
    while iters and total < size:
        for it in list(iters):
            p = next(it, None)
            if p is None:
                iters.remove(it)
                continue
            if p in seen:
                continue
            seen.add(p)
            out.append(p)
            total += len(p.encode("utf-8")) + 2
    return _cut("\n\n".join(out), size)


def _cut(text, size):
    data = text.encode("utf-8")
    if len(data) < size:
        data = (data + b"\n\n") * (size // (len(data) + 2) + 1)
    return data[:size].decode("utf-8", "ignore")


def _read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return ""


def english(size=1_000_000):
    licenses = [p for f in sorted(glob.glob("/usr/share/common-licenses/*")) if os.path.isfile(f) for p in _paragraphs(_read(f))]
    copyrights = (p for f in sorted(glob.glob("/usr/share/doc/*/copyright")) for p in _paragraphs(_read(f)))

    def man_pages():
        for f in sorted(glob.glob("/usr/share/man/man1/*.1.gz")):
            try:
                raw = gzip.open(f).read().decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            yield from _paragraphs(_troff_text(raw))
    return _interleave([licenses, copyrights, man_pages()], size)


def _mo_messages(path):
    """The translated strings of a gettext .mo file."""
    try:
        data = open(path, "rb").read()
        magic = struct.unpack("<I", data[:4])[0]
        order = "<" if magic == 0x950412DE else ">"
        _, n, _, trans = struct.unpack(order + "4I", data[4:20])
        for i in range(n):
            length, offset = struct.unpack(order + "2I", data[trans + 8 * i: trans + 8 * i + 8])
            for s in data[offset: offset + length].decode("utf-8").split("\0"):
                if len(s) > 20 and "Project-Id-Version" not in s and "Content-Type:" not in s:
                    yield s
    except (OSError, UnicodeDecodeError, struct.error):
        return


def mixed(size=1_000_000):
    hostile = json.load(open(os.path.join(ROOT, "tests/fixtures/tokenizers/hostile/texts.json"), encoding="utf-8"))
    languages = []
    for lang in sorted(os.listdir("/usr/share/locale")):
        files = sorted(glob.glob(f"/usr/share/locale/{lang}/LC_MESSAGES/*.mo"))
        if files and not lang.startswith("en"):
            languages.append(m for f in files for m in _mo_messages(f))
    return _interleave([[t for t in hostile if t.strip()]] + languages, size)


if __name__ == "__main__":
    kind, size, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    text = english(size) if kind == "english" else mixed(size)
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
