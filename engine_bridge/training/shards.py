"""One pool of the target's conversations from the shares that several GPUs wrote at once
(``generate --shard K/N``, each into its own run folder): their ``gen/responses.npz`` joined in
shard order into ``OUT/gen/responses.npz``, with the statistics added up, so that training reads
one pool as if one GPU had written it.

    python -m engine_bridge.training.shards --out RUN RUN/shard-0 RUN/shard-1 ...
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

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


def merge_pools(out: str | Path, shard_runs: list[str | Path]) -> dict:
    """Joins the shards' pools into ``out/gen``; returns the joined statistics. A shard without a
    pool, shards of another split (their ``shard`` field), or an ``out`` that already holds a pool
    is a ValueError that names it: nothing is written then."""
    out = Path(out)
    dst = out / "gen" / "responses.npz"
    if dst.exists():
        raise ValueError(f"{dst} exists already: a pool is not merged over another")
    if not shard_runs:
        raise ValueError("no shards to merge")
    zs, stats = [], []
    for r in shard_runs:
        f = Path(r) / "gen" / "responses.npz"
        if not f.exists():
            raise ValueError(f"{r}: no generated pool ({f})")
        zs.append(np.load(f))
        stats.append(json.loads((Path(r) / "gen" / "gen-stats.json").read_text()))
    seen = sorted(tuple(s.get("shard", [0, 1])) for s in stats)
    world = seen[0][1]
    if seen != [(k, world) for k in range(world)]:
        raise ValueError(f"the shards are not one split of K/N, 0 <= K < N each once: {seen}")
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
    (out / "gen" / "gen-stats.json").write_text(json.dumps(merged, indent=1))
    tmp.rename(dst)
    return merged


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="the run folder that trains on the joined pool")
    ap.add_argument("shards", nargs="+", help="the shards' run folders")
    a = ap.parse_args(argv)
    try:
        s = merge_pools(a.out, a.shards)
    except ValueError as e:
        print(f"error: {e}", flush=True)
        return 2
    print(f"merged {s['shards']} shards: {s['n']} responses, {s['tokens']} tokens ({s['by_kind']})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
