#!/usr/bin/python3
"""Compare two texts that print float32 results: same layout, numbers within float32 rounding.

    numtext.py EXPECTED ACTUAL   prints one line saying how they differ; exit 0 when they are the
                                 same text but for numbers within the tolerance below, else 1.

A golden text (tests/goldens/traces/*.txt, the README's examples) is kept byte for byte as its
reference wrote it, and never re-generated to be diffed: float32 sums round differently from one
CPU, OpenBLAS kernel (OPENBLAS_CORETYPE) or torch build (ATEN_CPU_CAPABILITY) to another. So:

  - layout: the text between the numbers must be equal byte for byte, except the run of spaces
    just before a number (torch pads numbers to a common width, which a sign can change);
  - integers (no digit after a point, no exponent: shapes, counts, indices) must be equal;
  - every other number (a printed float) may differ by
        |expected - actual| <= one unit in the last digit printed + 1e-5 * max(1, |expected|)
    one unit: two results either side of a rounding boundary print one unit apart (0.1235 vs
    0.1234); 1e-5 (about 80 float32 ulps of 1.0): float32 sums of O(1) terms in another order,
    FMA or not; measured across Prescott, Haswell, SkylakeX and Zen kernels: at most 1e-7, and
    9e-8 = nine units in the last digit of d2l's -3.3891e-04 (a sum that cancels);
  - nan, inf and -inf must be equal.
A real change of meaning (a wrong mask, softmax over the wrong axis, a changed note) moves numbers
by far more than that, or changes the text.
"""
import re
import sys

# a number with its sign; "e" exponents as torch and std::to_chars print them; nan, inf
NUMBER = re.compile(r"-?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf\b)|\bnan\b")
RTOL = 1e-5


def unit(s):
    """One unit in the last digit printed: 1e-4 for 0.1234, 1e-6 for 1.2345e-02."""
    m = re.fullmatch(r"-?\d+\.?(\d*)(?:[eE]([-+]?\d+))?", s)
    return 10.0 ** (int(m.group(2) or 0) - len(m.group(1)))


def is_integer(s):
    """No digit after the point and no exponent: a shape, count or index (or torch's "1." for a
    tensor of whole numbers), which must be equal."""
    return re.fullmatch(r"-?\d+\.?", s) is not None


def finite(s):
    return re.match(r"-?\d", s) is not None


def close(expected, actual):
    """Are two printed numbers the same within float32 rounding (see the module's doc)?"""
    if expected == actual:
        return True
    if not (finite(expected) and finite(actual)) or is_integer(expected) or is_integer(actual):
        return False
    e, a = float(expected), float(actual)
    return abs(e - a) <= unit(expected) + RTOL * max(1.0, abs(e))


def same_layout(sep_e, sep_a, before_number):
    if sep_e == sep_a:
        return True
    # only the padding before a number may differ, and a space stays a space
    return before_number and sep_e.rstrip(" ") == sep_a.rstrip(" ") and sep_e.endswith(" ") == sep_a.endswith(" ")


def compare(expected, actual):
    """(ok, one line): ok when ACTUAL is EXPECTED's text with numbers within float32 rounding."""
    if expected == actual:
        return True, "equal byte for byte"
    seps_e, seps_a = NUMBER.split(expected), NUMBER.split(actual)
    nums_e, nums_a = NUMBER.findall(expected), NUMBER.findall(actual)
    if len(nums_e) != len(nums_a):
        line = next((i for i, (x, y) in enumerate(zip(expected.split("\n"), actual.split("\n"))) if x != y), None)
        return False, f"layout differs: {len(nums_e)} numbers expected, {len(nums_a)} printed (first at line {line})"
    for i, (x, y) in enumerate(zip(seps_e, seps_a)):
        if not same_layout(x, y, i < len(nums_e)):
            return False, f"layout differs: {x[-60:]!r} expected, {y[-60:]!r} printed"
    differ = [(x, y) for x, y in zip(nums_e, nums_a) if x != y]
    far = [(x, y) for x, y in differ if not close(x, y)]
    worst = max([(x, y) for x, y in differ if finite(x) and finite(y)], key=lambda p: abs(float(p[0]) - float(p[1])), default=None)
    summary = f"{len(differ)} of {len(nums_e)} printed numbers differ"
    if worst:
        summary += f", at most by {abs(float(worst[0]) - float(worst[1])):.3g} ({worst[0]} expected, {worst[1]} printed)"
    if far:
        return False, f"numbers differ beyond float32 rounding: {summary}; first beyond: {far[0][0]} expected, {far[0][1]} printed"
    return True, f"same layout; numbers within float32 rounding: {summary}"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ok, why = compare(open(sys.argv[1]).read(), open(sys.argv[2]).read())
    print(why)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
