"""One pool of the target's conversations from the shares that several GPUs wrote at once
(``generate --shard K/N``, each into its own run folder): their ``gen/responses.npz`` joined in
shard order into ``OUT/gen/responses.npz``, with the statistics added up, so that training reads
one pool as if one GPU had written it.

An earlier sitting's pool of the same prepared data (``--earlier RUN``) can join too, after the
shares and without its validation answers (shard 0 of this pool answers the same validation prompts):
a drafter warm-started from that sitting then trains on its old conversations and the new ones, where
the new ones alone would be all a sitting's generation time buys.

    python -m engine_bridge.training.shards --out RUN RUN/shard-0 RUN/shard-1 ... [--earlier OLD_RUN]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Sequence

import numpy as np

_ARRAYS = ("kind", "prompt_index", "temperature")


def _join_ragged(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    ids = np.concatenate([p[0] for p in parts])
    offs, base = [np.zeros(1, np.int64)], 0
    for _, o in parts:
        offs.append(o[1:] + base)
        base += int(o[-1])
    return ids, np.concatenate(offs).astype(np.int64)


def _add_stats(stats: list[dict]) -> dict:
    out = dict(stats[0])
    n = sum(s["n"] for s in stats)
    tokens = sum(s["tokens"] for s in stats)
    out.update(
        {
            "n": n,
            "of": sum(s["of"] for s in stats),
            "tokens": tokens,
            "mean_len": round(tokens / max(n, 1), 1),
            "ended_with_stop": round(sum(s["ended_with_stop"] * s["n"] for s in stats) / max(n, 1), 3),
            # the shares ran side by side: the pool took as long as the slowest
            "seconds": max(s["seconds"] for s in stats),
            "tokens_per_s": round(sum(s["tokens_per_s"] for s in stats), 1),
            "by_kind": {k: sum(s["by_kind"].get(k, 0) for s in stats) for k in stats[0]["by_kind"]},
            "shards": len(stats),
        }
    )
    out.pop("shard", None)
    cats: dict[str, dict] = {}
    for s in stats:
        for c, v in s.get("by_category", {}).items():
            a = cats.setdefault(c, {"n": 0, "len": 0.0, "ended": 0.0})
            a["n"] += v["n"]
            a["len"] += v["mean_len"] * v["n"]
            a["ended"] += v["ended"] * v["n"]
    out["by_category"] = {
        c: {"n": a["n"], "mean_len": round(a["len"] / a["n"], 1), "ended": round(a["ended"] / a["n"], 3)}
        for c, a in cats.items()
        if a["n"]
    }
    for key in ("magpie", "followups"):
        got = [s[key] for s in stats if key in s]
        if got:
            merged = {k: sum(g.get(k, 0) for g in got) for k in got[0] if k != "checked"}
            if "checked" in got[0]:
                merged["checked"] = all(g.get("checked", False) for g in got)
            out[key] = merged
    return out


def _load_pool(run: str | Path) -> tuple[dict, dict]:
    f = Path(run) / "gen" / "responses.npz"
    if not f.exists():
        raise ValueError(f"{run}: no generated pool ({f})")
    with np.load(f) as z:
        arrays = {k: z[k] for k in z.files}
    return arrays, json.loads((Path(run) / "gen" / "gen-stats.json").read_text())


def _without_val(z: dict) -> dict:
    """A pool's arrays without its validation answers (the ragged id arrays cut to match)."""
    from .gen_conversations import KIND_VAL

    keep = np.flatnonzero(z["kind"] != KIND_VAL)

    def cut(ids, offs):
        parts = [ids[offs[i] : offs[i + 1]] for i in keep]
        lens = np.array([len(x) for x in parts], np.int64)
        new_offs = np.concatenate([np.zeros(1, np.int64), np.cumsum(lens)])
        return (np.concatenate(parts) if parts else ids[:0]), new_offs

    ci, co = cut(z["ctx_ids"], z["ctx_offsets"])
    ri, ro = cut(z["resp_ids"], z["resp_offsets"])
    return {"ctx_ids": ci, "ctx_offsets": co, "resp_ids": ri, "resp_offsets": ro, **{k: z[k][keep] for k in _ARRAYS}}


def merge_pools(out: str | Path, shard_runs: list[str | Path], earlier: Sequence[str | Path] = ()) -> dict:
    """Joins the shards' pools into ``out/gen``, then each ``earlier`` run's pool without its
    validation answers; returns the joined statistics (``earlier``: what each earlier pool gave). A
    shard or earlier run without a pool, shards of another split (their ``shard`` field), an earlier
    pool of other prepared data (another prompt count), or an ``out``
    that already holds a pool is a ValueError that names it: nothing is written then."""
    out = Path(out)
    dst = out / "gen" / "responses.npz"
    if dst.exists():
        raise ValueError(f"{dst} exists already: a pool is not merged over another")
    if not shard_runs:
        raise ValueError("no shards to merge")
    zs, stats = [], []
    for r in shard_runs:
        z, st = _load_pool(r)
        zs.append(z)
        stats.append(st)
    seen = sorted(tuple(s.get("shard", [0, 1])) for s in stats)
    world = seen[0][1]
    if seen != [(k, world) for k in range(world)]:
        raise ValueError(f"the shards are not one split of K/N, 0 <= K < N each once: {seen}")
    old = []
    n_prompts = sum(s["of"] for s in stats)
    for r in earlier:
        z, st = _load_pool(r)
        # prompt indices point into the prepared data: a pool of other data would mislabel them
        if st["of"] != n_prompts:
            raise ValueError(f"{r}: its pool answers other prepared data ({st['of']} prompts, this pool {n_prompts})")
        z = _without_val(z)
        # the target's own requests (negative indices) numbered apart from those already joined
        low = min(0, *(int(y["prompt_index"].min()) for y in zs if len(y["prompt_index"])))
        z["prompt_index"] = np.where(z["prompt_index"] < 0, z["prompt_index"] + low, z["prompt_index"])
        zs.append(z)
        n = len(z["kind"])
        old.append(
            {"run": str(r), "n": n, "tokens": int(z["resp_offsets"][-1]), "of": st["n"], "by_kind": st["by_kind"]}
        )
    ci, co = _join_ragged([(z["ctx_ids"], z["ctx_offsets"]) for z in zs])
    ri, ro = _join_ragged([(z["resp_ids"], z["resp_offsets"]) for z in zs])
    arrays = {k: np.concatenate([z[k] for z in zs]) for k in _ARRAYS}
    (out / "gen").mkdir(parents=True, exist_ok=True)
    tmp = out / "gen" / "responses.tmp.npz"
    np.savez_compressed(
        tmp,
        ctx_ids=ci,
        ctx_offsets=co,
        resp_ids=ri,
        resp_offsets=ro,
        kind=arrays["kind"],
        prompt_index=arrays["prompt_index"],
        temperature=arrays["temperature"],
    )
    merged = _add_stats(stats)
    if old:
        merged["earlier"] = old
        merged["n"] += sum(o["n"] for o in old)
        merged["tokens"] += sum(o["tokens"] for o in old)
        merged["mean_len"] = round(merged["tokens"] / max(merged["n"], 1), 1)
        for o in old:  # their validation answers stayed out
            for k, v in o["by_kind"].items():
                if k != "validation":
                    merged["by_kind"][k] = merged["by_kind"].get(k, 0) + v
    (out / "gen" / "gen-stats.json").write_text(json.dumps(merged, indent=1))
    tmp.rename(dst)
    return merged


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="the run folder that trains on the joined pool")
    ap.add_argument("shards", nargs="+", help="the shards' run folders")
    ap.add_argument(
        "--earlier",
        action="append",
        default=[],
        metavar="RUN",
        help="an earlier sitting's run folder whose pool joins after the shares (no validation answers)",
    )
    a = ap.parse_args(argv)
    try:
        s = merge_pools(a.out, a.shards, a.earlier)
    except ValueError as e:
        print(f"error: {e}", flush=True)
        return 2
    extra = "".join(f", {o['n']} from {o['run']}" for o in s.get("earlier", []))
    print(f"merged {s['shards']} shards{extra}: {s['n']} responses, {s['tokens']} tokens ({s['by_kind']})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
