"""Stage ``generate``: the target's own conversations, the drafter's training data (GPU machine:
torch + numpy + gguf, no llama.cpp).

Published drafters learn from real requests answered by the target itself, greedily and sampled,
over several turns; a drafter that saw only greedy single-turn answers accepts less on a user's
second turn or at temperature > 0. Three passes share one time budget:

1. **Magpie** (``magpie_frac`` of the budget): the target gets only its template's user-turn
   prefix (``chat_turns`` fragment ``pre_query``) and writes a request itself, sampled at T = 1.
   What reads like a request is kept (ended with an end-of-turn token, 6-120 tokens, no looping, and
   clean under ``decontam``: without the checker or a detokenizer for the vocabulary none is kept),
   deduplicated, and joins the prompts. This needs no data and follows the target's own idea of what
   users ask.
2. **First turns** (the bulk): each prompt answered once, greedily or sampled in turn
   (``temperatures``, default 0 and 0.8; ``every_temperature``: once at each), in length-sorted
   batches, until the budget is spent.
3. **Follow-ups** (``followup_frac``): for answers that ended, the target writes the user's next
   message (sampled, Magpie-style, after the ``after_answer`` fragment) and answers it greedily.

Before them, the validation prompts (``val.npz`` of the prepared folder: the val split of the
training sources, never trained on) are answered greedily: checkpoint choice reads those.

Saved as RUN/gen/responses.npz: per sequence its context ids (``ctx_*``), the target's response
ids (``resp_*``), ``kind`` (0 greedy first turn, 1 sampled first turn, 2 follow-up answer, 3 a
validation answer), ``prompt_index`` (into the prepared prompts -- into val.npz for kind 3; -1 - k
for the k-th Magpie prompt) and the temperature. ``load_sequences`` below reads it; a resumed run reuses it.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

KIND_GREEDY, KIND_SAMPLED, KIND_FOLLOWUP, KIND_VAL = 0, 1, 2, 3


class Cancelled(Exception):
    pass


def looping(ids, n: int = 4, most: int = 2) -> bool:
    """True when some n-gram of ``ids`` occurs more than ``most`` times (a model stuck in a loop)."""
    seen: dict[tuple, int] = {}
    for i in range(len(ids) - n + 1):
        k = tuple(ids[i : i + n])
        seen[k] = seen.get(k, 0) + 1
        if seen[k] > most:
            return True
    return False


def good_query(q: list[int], stops: set[int], lo: int = 6, hi: int = 120) -> bool:
    """A request the target wrote that is worth answering: it ended, is neither a stub nor an
    essay, and does not loop."""
    if not q or q[-1] not in stops:
        return False
    body = q[:-1]
    return lo <= len(body) <= hi and not looping(body) and len(set(body)) >= 0.4 * len(body)


class _Budget:
    def __init__(self, seconds: float, cancel):
        self.t0, self.seconds, self.cancel = time.time(), seconds, cancel

    def left(self) -> float:
        return self.seconds - (time.time() - self.t0)

    def check(self):
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled()


def _batched(
    target,
    contexts: list[list[int]],
    temps: list[float],
    max_new: int,
    stop,
    pad: int,
    batch: int,
    until: float,
    exact: bool,
    graph: bool,
    seed: int,
    budget: _Budget,
    log,
    what: str,
    progress=None,
):
    """Answers ``contexts`` (length-sorted batches, shuffled so a cut-off keeps a mix) until ``until``
    seconds of the budget remain; returns {index: response ids}."""
    order = sorted(range(len(contexts)), key=lambda i: len(contexts[i]))
    chunks = [order[i : i + batch] for i in range(0, len(order), batch)]
    rng = np.random.default_rng(seed)
    rng.shuffle(chunks)
    out: dict[int, list[int]] = {}
    t0, ntok = time.time(), 0
    for ci, ch in enumerate(chunks):
        budget.check()
        if ci and budget.left() <= until:
            log(f"generate/{what}: time budget reached after {len(out)}/{len(contexts)}")
            break
        tt = [temps[i] for i in ch]
        r = target.generate(
            [contexts[i] for i in ch],
            max_new,
            stop,
            pad_id=pad,
            exact=exact,
            graph=graph,
            temperature=tt if any(t > 0 for t in tt) else None,
            seed=seed * 100_003 + ci,
        )
        for i, resp in zip(ch, r):
            out[i] = resp
            ntok += len(resp)
        el = time.time() - t0
        log(
            f"generate/{what}: {len(out)}/{len(contexts)}, {ntok} tokens, {ntok / max(el, 1e-9):.0f} tok/s, "
            f"{el:.0f} s, {max(0.0, budget.left() - until):.0f} s left for this pass"
        )
        if progress:
            progress(
                {
                    "stage": "generate",
                    "pass": what,
                    "done": len(out),
                    "total": len(contexts),
                    "elapsed_s": el,
                    "eta_s": max(0.0, budget.left() - until),
                    "tokens": ntok,
                }
            )
    return out


def detokenizer(target_path: str | Path):
    """ids -> text from the GGUF's own vocabulary (byte-level BPE or SentencePiece pieces), for the
    contamination check of prompts the target wrote; None when the vocabulary is of another kind."""
    from gguf import GGUFReader

    r = GGUFReader(str(target_path))
    f = r.fields.get("tokenizer.ggml.model")
    model = f.contents() if f is not None else None
    toks = r.fields["tokenizer.ggml.tokens"].contents()
    if model == "gpt2":
        bs = (
            list(range(ord("!"), ord("~") + 1))
            + list(range(ord("¡"), ord("¬") + 1))
            + list(range(ord("®"), ord("ÿ") + 1))
        )
        cs, n = bs[:], 0
        for b in range(256):
            if b not in bs:
                bs.append(b)
                cs.append(256 + n)
                n += 1
        back = {chr(c): b for b, c in zip(bs, cs)}
        return lambda ids: b"".join(bytes(back.get(ch, 32) for ch in toks[i]) for i in ids).decode("utf-8", "replace")
    if model == "llama":
        return lambda ids: "".join(toks[i] for i in ids).replace("\u2581", " ")
    return None


def _clean_filter(log):
    """decontam.check when the module and its fingerprints are present, else None (said in the log)."""
    try:
        from . import decontam

        decontam.check(["warm up the fingerprints"])
        return decontam
    except Exception as e:  # noqa: BLE001 -- a missing checker is reported, not fatal here
        log(f"generate/magpie: no contamination check ({type(e).__name__}: {e}); Magpie prompts kept unchecked")
        return None


def parse_category_weights(spec: str | None, names: Sequence[str]) -> dict[str, float] | None:
    """``"code=3,math=1.5"`` -> {"code": 3.0, "math": 1.5} (a category not named weighs 1); None or ""
    -> None. A name that is not one of ``names``, a weight that is not a positive number, or an entry
    without ``=`` is a ValueError that names it."""
    if not spec:
        return None
    out: dict[str, float] = {}
    for part in spec.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep or not name:
            raise ValueError(f"category weight {part.strip()!r}: write NAME=WEIGHT (e.g. code=3)")
        if name not in names:
            raise ValueError(f"category weight {name!r}: not a category of this data ({', '.join(names)})")
        try:
            w = float(value)
        except ValueError:
            raise ValueError(f"category weight {part.strip()!r}: {value!r} is not a number") from None
        if not (w > 0 and math.isfinite(w)):
            raise ValueError(f"category weight {part.strip()!r}: a weight must be a positive number")
        out[name] = w
    return out


def prompt_order(cats: np.ndarray, names: Sequence[str], rng, weights: dict[str, float] | None) -> np.ndarray:
    """The order in which the prompts are answered: a random permutation, or with ``weights``
    (category name -> weight; 1 for the rest) a weighted one, where each prompt comes ahead in
    proportion to its category's weight (keys u ** (1 / w), Efraimidis and Spirakis). A generation
    budget ends part-way through the order, so what it answered has the weighted mix: a code pair's
    pool can be code-heavy without preparing other data, and every prompt still appears once, so the
    pool answers the same prepared prompts and joins earlier pools (``shards.merge_pools``)."""
    if not weights:
        return rng.permutation(len(cats))
    w = np.array([weights.get(n, 1.0) for n in names], dtype=np.float64)[np.asarray(cats, dtype=np.int64)]
    keys = rng.random(len(cats)) ** (1.0 / w)
    return np.argsort(-keys, kind="stable")


def generate(
    target,
    target_path,
    data: Path,
    out: Path,
    *,
    seconds: float,
    max_new: int,
    batch: int,
    max_prompts: int | None,
    log,
    progress,
    cancel,
    exact: bool = False,
    temperatures=(0.0, 0.8),
    magpie_frac: float = 0.1,
    followup_frac: float = 0.2,
    magpie_n: int | None = None,
    seed: int = 0,
    query_min_tokens: int = 6,
    val_n: int = 512,
    every_temperature: bool = False,
    shard: tuple[int, int] = (0, 1),
    category_weights: dict[str, float] | None = None,
) -> dict:
    from .chat_data import load_prompts
    from .chat_turns import close_answer, close_query

    gdir = out / "gen"
    f = gdir / "responses.npz"
    if f.exists():
        stats = json.loads((gdir / "gen-stats.json").read_text())
        log(f"generate: reusing {stats['n']} responses from {f}")
        return stats
    prompts, cats, meta = load_prompts(data)
    stop = [int(s) for s in meta["stop_ids"]]
    stops = set(stop)
    pad = int(meta["pad_id"])
    frag = meta.get("turns")
    if frag is None:
        magpie_frac = followup_frac = 0.0
        log(
            "generate: the data folder has no chat-turn fragments (prepared before they existed): "
            "single-turn prompts only"
        )
    rng = np.random.default_rng(seed)
    n = len(prompts) if max_prompts is None else min(max_prompts, len(prompts))
    pick = prompt_order(cats, meta.get("categories", []), rng, category_weights)[:n]
    # one GPU's share of a pool written by several (shard K of N): every K-th prompt of the same
    # permutation, its own sampling seeds, Magpie prompts numbered apart; the validation answers
    # come from shard 0 only (shards.merge_pools joins the shares)
    rank, world = shard
    pick = pick[rank::world]
    seed = seed + 7919 * rank
    if rank:
        val_n = 0
    budget = _Budget(seconds, cancel)
    dev = target.embed_tokens.weight.device
    graph = False
    if dev.type == "cuda":
        # CUDA graphs remove the per-step launch overhead; used only when a small batch decodes to
        # the same tokens with and without them
        probe = [prompts[i].tolist() for i in pick[:4]]
        try:
            a = target.generate(probe, 24, stop, pad_id=pad, exact=exact)
            b = target.generate(probe, 24, stop, pad_id=pad, exact=exact, graph=True)
            graph = a == b
            log(f"generate: CUDA graphs {'on' if graph else 'off (they decoded differently)'}")
        except Exception as e:  # capture unsupported here: the eager loop is correct, only slower
            log(f"generate: CUDA graphs off ({type(e).__name__}: {e})")
    ctx_l, resp_l, kind_l, pidx_l, temp_l = [], [], [], [], []
    stats = {
        "max_new": max_new,
        "batch": batch,
        "temperatures": list(temperatures),
        "precision": "float32" if exact or dev.type != "cuda" else "bfloat16",
        "cuda_graphs": graph,
        "shard": [rank, world],
    }
    if category_weights:
        stats["category_weights"] = dict(category_weights)

    # 1. Magpie: the target writes requests
    magpie: list[list[int]] = []
    if magpie_frac > 0:
        assert frag is not None  # magpie_frac is 0 without the fragments
        want = magpie_n if magpie_n is not None else max(batch, n // 4 // world)
        ctxs = [list(frag["pre_query"])] * want
        got = _batched(
            target,
            ctxs,
            [1.0] * want,
            128,
            stop,
            pad,
            batch,
            seconds * (1 - magpie_frac),
            exact,
            graph,
            seed + 1,
            budget,
            log,
            "magpie",
            progress,
        )
        raw = [got[i] for i in sorted(got)]
        ok = [q for q in raw if good_query(q, stops, lo=query_min_tokens)]
        uniq = list({tuple(q): q for q in ok}.values())
        n_uniq = len(uniq)
        dropped_contam = 0
        checker = _clean_filter(log)
        detok = detokenizer(target_path) if checker is not None else None
        if checker is not None and detok is not None and uniq:
            texts = [detok(q[:-1]) for q in uniq]
            rep = checker.check(texts)
            bad = {h["index"] for h in rep["hits"]}
            dropped_contam = len(bad)
            uniq = [q for i, q in enumerate(uniq) if i not in bad]
            (gdir).mkdir(parents=True, exist_ok=True)
            (gdir / "magpie-samples.txt").write_text("\n---\n".join(texts[:200]))
        unchecked = 0
        if checker is None or detok is None:
            # requests nobody checked against the evaluation sets never reach training (three GPU
            # sittings ran with the fingerprints missing from the carried tree, said only in the log)
            unchecked, uniq = len(uniq), []
            log(f"generate/magpie: {unchecked} requests dropped: they could not be checked for contamination")
        magpie = [close_query(q, frag, stop) for q in uniq]
        magpie = [list(frag["pre_query"]) + q for q in magpie]
        stats["magpie"] = {
            "sampled": len(raw),
            "kept": len(magpie),
            "not_a_request": len(raw) - len(ok),
            "duplicates": len(ok) - n_uniq,
            "contaminated": dropped_contam,
            "unchecked": unchecked,
            "checked": bool(checker is not None and detok is not None),
        }
        log(f"generate/magpie: {len(raw)} sampled, {len(magpie)} kept ({stats['magpie']})")

    # validation answers: greedy, to the val split's prompts (one or two batches)
    if (data / "val.npz").exists() and val_n:
        vprompts, _, _ = load_prompts(data, "val")
        vp = [v.tolist() for v in vprompts[:val_n]]
        got = _batched(
            target,
            vp,
            [0.0] * len(vp),
            max_new,
            stop,
            pad,
            batch,
            0.0,
            exact,
            graph,
            seed + 5,
            budget,
            log,
            "validation",
            progress,
        )
        for i in sorted(got):
            if len(got[i]) >= 2:
                ctx_l.append(vp[i])
                resp_l.append(got[i])
                kind_l.append(KIND_VAL)
                pidx_l.append(i)
                temp_l.append(0.0)

    # 2. first turns: every prompt greedy and sampled
    firsts: list[list[int]] = [prompts[i].tolist() for i in pick] + magpie
    fidx = [int(i) for i in pick] + [-1 - (k * world + rank) for k in range(len(magpie))]
    # one answer per prompt, the temperatures taking turns (more distinct requests in a budget),
    # or one at each temperature (every_temperature)
    ctxs, temps, src = [], [], []
    for j, c in enumerate(firsts):
        for t in temperatures if every_temperature else (temperatures[j % len(temperatures)],):
            ctxs.append(c)
            temps.append(float(t))
            src.append(j)
    got = _batched(
        target,
        ctxs,
        temps,
        max_new,
        stop,
        pad,
        batch,
        seconds * followup_frac,
        exact,
        graph,
        seed + 2,
        budget,
        log,
        "first-turns",
        progress,
    )
    ended_firsts = []
    for i in sorted(got):
        r = got[i]
        if len(r) < 2:
            continue
        ctx_l.append(ctxs[i])
        resp_l.append(r)
        kind_l.append(KIND_GREEDY if temps[i] == 0 else KIND_SAMPLED)
        pidx_l.append(fidx[src[i]])
        temp_l.append(temps[i])
        if r[-1] in stops and temps[i] == 0 and len(ctxs[i]) + len(r) < 1024:
            ended_firsts.append(len(ctx_l) - 1)

    # 3. follow-ups: the target writes the user's next message, then answers it
    if followup_frac > 0 and ended_firsts and budget.left() > 5:
        assert frag is not None  # followup_frac is 0 without the fragments
        base = [ctx_l[k] + close_answer(resp_l[k], frag) for k in ended_firsts]
        qs = _batched(
            target,
            base,
            [1.0] * len(base),
            96,
            stop,
            pad,
            batch,
            budget.left() * 0.55,
            exact,
            graph,
            seed + 3,
            budget,
            log,
            "follow-up questions",
            progress,
        )
        keep = [(k, close_query(q, frag, stop)) for k, q in qs.items() if good_query(q, stops, lo=query_min_tokens)]
        ctx2 = [base[k] + q for k, q in keep]
        ans = _batched(
            target,
            ctx2,
            [0.0] * len(ctx2),
            max_new,
            stop,
            pad,
            batch,
            0.0,
            exact,
            graph,
            seed + 4,
            budget,
            log,
            "follow-up answers",
            progress,
        )
        for i in sorted(ans):
            if len(ans[i]) < 2:
                continue
            k = ended_firsts[keep[i][0]]
            ctx_l.append(ctx2[i])
            resp_l.append(ans[i])
            kind_l.append(KIND_FOLLOWUP)
            pidx_l.append(pidx_l[k])
            temp_l.append(0.0)
        stats["followups"] = {"asked": len(qs), "kept_questions": len(keep), "answered": len(ans)}

    def flat(rows):
        lens = np.array([len(x) for x in rows], dtype=np.int64)
        ids = np.concatenate([np.asarray(x, dtype=np.int32) for x in rows]) if rows else np.zeros(0, np.int32)
        return ids, np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)

    ci, co = flat(ctx_l)
    ri, ro = flat(resp_l)
    gdir.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        f,
        ctx_ids=ci,
        ctx_offsets=co,
        resp_ids=ri,
        resp_offsets=ro,
        kind=np.asarray(kind_l, np.int8),
        prompt_index=np.asarray(pidx_l, np.int32),
        temperature=np.asarray(temp_l, np.float32),
    )
    lens = np.diff(ro)
    kinds = np.asarray(kind_l)
    ended = np.array([r[-1] in stops for r in resp_l]) if resp_l else np.zeros(0, bool)
    el = time.time() - budget.t0
    by_cat = {}
    for c_, name in enumerate(meta["categories"]):
        sel = np.array([p >= 0 and k != KIND_VAL and cats[p] == c_ for p, k in zip(pidx_l, kind_l)])
        if sel.any():
            by_cat[name] = {
                "n": int(sel.sum()),
                "mean_len": round(float(lens[sel].mean()), 1),
                "ended": round(float(ended[sel].mean()), 3),
            }
    stats.update(
        {
            "n": len(resp_l),
            "of": len(pick),
            "tokens": int(lens.sum()),
            "mean_len": round(float(lens.mean()), 1) if resp_l else 0,
            "ended_with_stop": round(float(ended.mean()), 3) if resp_l else 0,
            "seconds": round(el, 1),
            "tokens_per_s": round(float(lens.sum()) / max(el, 1e-9), 1),
            "by_kind": {
                name: int((kinds == k).sum())
                for k, name in (
                    (KIND_GREEDY, "greedy"),
                    (KIND_SAMPLED, "sampled"),
                    (KIND_FOLLOWUP, "follow-up"),
                    (KIND_VAL, "validation"),
                )
            },
            "by_category": by_cat,
        }
    )
    (gdir / "gen-stats.json").write_text(json.dumps(stats, indent=1))
    log(
        f"generate: done, {stats['n']} responses, {stats['tokens']} tokens (mean {stats['mean_len']}, "
        f"{100 * stats['ended_with_stop']:.0f}% ended; {stats['by_kind']}) in {el:.0f} s"
    )
    return stats


def load_sequences(out: Path, data: Path | None = None):
    """(context + response int64 arrays, context lengths, prompt index per sequence, kind per
    sequence) of a run's generated data; reads the single-turn format of earlier runs too (needs
    ``data`` then; every kind is greedy there)."""
    z = np.load(Path(out) / "gen" / "responses.npz")
    seqs, plen, pidx, kinds = [], [], [], []
    if "ctx_ids" in z:
        ci, co, ri, ro, pi, kd = (
            z["ctx_ids"],
            z["ctx_offsets"],
            z["resp_ids"],
            z["resp_offsets"],
            z["prompt_index"],
            z["kind"],
        )
        for k in range(len(co) - 1):
            r = ri[ro[k] : ro[k + 1]]
            if len(r) < 2:
                continue
            c = ci[co[k] : co[k + 1]]
            seqs.append(np.concatenate([c, r]).astype(np.int64))
            plen.append(len(c))
            pidx.append(int(pi[k]))
            kinds.append(int(kd[k]))
        return seqs, np.asarray(plen), np.asarray(pidx), np.asarray(kinds, np.int8)
    from .chat_data import load_prompts

    if data is None:
        raise ValueError(f"{out}: responses of the single-turn format are read with the data folder they came from")
    prompts, _, _ = load_prompts(data)
    ids, off, pi = z["ids"], z["offsets"], z["prompt_index"]
    for k, i in enumerate(pi):
        r = ids[off[k] : off[k + 1]]
        if len(r) < 2:
            continue
        seqs.append(np.concatenate([prompts[i], r]).astype(np.int64))
        plen.append(len(prompts[i]))
        pidx.append(int(i))
    return seqs, np.asarray(plen), np.asarray(pidx), np.zeros(len(seqs), np.int8)
