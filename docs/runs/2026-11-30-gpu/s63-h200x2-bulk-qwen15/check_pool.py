"""The contamination check of a pool's Magpie requests after the fact (sitting s63: the checker's
fingerprints were hidden from the tree when the shares generated): every context of an entry whose
prompt is one the target wrote (prompt_index < 0), detokenized, through decontam.check. Prints the
hits; with --drop, rewrites the pool without the entries whose context has a hit."""

import json
import sys
from pathlib import Path

import numpy as np

from engine_bridge.training import decontam
from engine_bridge.training.gen_conversations import detokenizer

run, target = Path(sys.argv[1]), sys.argv[2]
drop = "--drop" in sys.argv
f = run / "gen" / "responses.npz"
z = dict(np.load(f))
detok = detokenizer(target)
ci, co, pidx = z["ctx_ids"], z["ctx_offsets"], z["prompt_index"]
idx = np.flatnonzero(pidx < 0)
texts = [detok(ci[co[i] : co[i + 1]].tolist()) for i in idx]
rep = decontam.check(texts)
bad = sorted({int(idx[h["index"]]) for h in rep["hits"]})
print(json.dumps({"magpie_entries": len(idx), "hits": len(rep["hits"]), "entries_dropped": len(bad) if drop else 0}))
for h in rep["hits"][:10]:
    print(json.dumps(h)[:300])
if drop and bad:
    keep = np.setdiff1d(np.arange(len(pidx)), bad)

    def cut(ids, offs):
        parts = [ids[offs[i] : offs[i + 1]] for i in keep]
        return np.concatenate(parts), np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)

    c2, o2 = cut(ci, co)
    r2, ro2 = cut(z["resp_ids"], z["resp_offsets"])
    out = {"ctx_ids": c2, "ctx_offsets": o2, "resp_ids": r2, "resp_offsets": ro2}
    out.update({k: z[k][keep] for k in ("kind", "prompt_index", "temperature")})
    np.savez_compressed(run / "gen" / "responses.tmp.npz", **out)
    (run / "gen" / "responses.tmp.npz").rename(f)
    print("rewritten without", len(bad))
