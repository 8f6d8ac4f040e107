"""The frames right below FRAME in py-spy raw stacks inside Engine.generate (optionally only stacks
through WITHIN), as % of the samples inside Engine.generate.
Usage: python3 pyspy_children.py RAW.txt FRAME [DEPTH] [WITHIN]; RAW from r70-raw.txz."""

import collections
import sys

path, target = sys.argv[1], sys.argv[2]
depth = int(sys.argv[3]) if len(sys.argv) > 3 else 1
tot = 0
kids = collections.Counter()
gen = 0
for line in open(path, errors="replace"):
    stack, _, c = line.rstrip("\n").rpartition(" ")
    if not c.isdigit():
        continue
    c = int(c)
    fr = stack.split(";")
    names = [f.split(" (")[0] if not f.startswith("0x") else f for f in fr]
    if "Engine.generate" not in names:
        continue
    gen += c
    if target not in names or (len(sys.argv) > 4 and sys.argv[4] not in names):
        continue
    i = names.index(target)
    tot += c
    kid = (
        ";".join(n if not n.startswith("0x") else "0x?" + n.split(" (")[-1] for n in names[i + 1 : i + 1 + depth])
        or "(self)"
    )
    kids[kid] += c
print(f"{target}: {tot} of {gen} samples ({100 * tot / gen:.2f} %)")
for k, c in kids.most_common(25):
    print(f"  {100 * c / gen:6.2f}  {k[:200]}")
