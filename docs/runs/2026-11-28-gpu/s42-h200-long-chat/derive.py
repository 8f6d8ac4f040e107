"""The figures of docs/benchmarks.md, "The window on the GPU", that the bench does not print itself:
what a chain-7 step cost in AR steps per context band (the band's commit over its x AR), and each
round's whole-chat tok/s. Run from the project root:

    python docs/runs/2026-11-28-gpu/s42-h200-long-chat/derive.py
"""

import json
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CPU = HERE.parent.parent / "2026-11-28-cpu" / "long-chat" / "mt-bench-windows-0-512-ar.json"


def runs():
    for m in ("m1", "m2"):
        with tarfile.open(HERE / m / "longchat-json.tgz") as tf:
            for member in sorted(tf.getmembers(), key=lambda x: x.name):
                f = tf.extractfile(member)
                if f is not None and member.name.endswith(("chain-fast.json", "auto-fast.json")):
                    yield f"{m}/{member.name}", json.load(f)


for name, d in runs():
    bands = [b for b in d["bands"] if b["from"] is not None]
    cost = [b["512"]["commit"] / (sum(b["512"]["x_ar"]) / len(b["512"]["x_ar"])) for b in bands]
    whole = {
        side: [
            round(sum(len(t["tokens"]) for t in r[side]) / sum(t["wall_s"] for t in r[side]), 1) for r in d["rounds"]
        ]
        for side in d["rounds"][0]
    }
    print(name, "step in AR steps by band:", [round(c, 2) for c in cost], "| whole chat tok/s per round:", whole)
cpu = json.loads(CPU.read_text())
print(
    "cpu mt-bench chat, step in AR steps by band:",
    [round(b["512"]["commit"] / (b["512"]["tok_s"] / b["ar_tok_s"]), 2) for b in cpu["bands"]],
)
