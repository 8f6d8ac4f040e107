"""Builds resources/prompts/public/: the public benchmark suites (for the bench, never for training)
and the decontamination fingerprints of every evaluation set we could get.

    python -m engine_bridge.training.public_sets_build --mirrors /work/.mirror

``--mirrors`` holds bare git snapshots named ``owner+name/repo`` (what the ``fetch`` tool brings);
each file is read at the commit recorded in ``SOURCES`` (``git show COMMIT:PATH``), so a rebuild
gives the same bytes. The sets are described in resources/prompts/public/README.md.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
from pathlib import Path

from ..common.resources import resource
from . import decontam

#: (repository, commit, path, licence) of every file read
SOURCES = {
    "mt-bench": (
        "lm-sys/FastChat",
        "0e6d3e4beaab66f4d3f93db72541a4abab8af28d",
        "fastchat/llm_judge/data/mt_bench/question.jsonl",
        "Apache-2.0",
    ),
    "vicuna-80": (
        "lm-sys/FastChat",
        "0e6d3e4beaab66f4d3f93db72541a4abab8af28d",
        "fastchat/llm_judge/data/vicuna_bench/question.jsonl",
        "Apache-2.0",
    ),
    "humaneval": ("openai/human-eval", "6d43fb980f9fee3c892a914eda09951f772ad10d", "data/HumanEval.jsonl.gz", "MIT"),
    "gsm8k-test": (
        "openai/grade-school-math",
        "3101c7d5072418e28b9008a6636bde82a006892c",
        "grade_school_math/data/test.jsonl",
        "MIT",
    ),
    "alpaca-eval": (
        "tatsu-lab/alpaca_eval",
        "cd543a149df89434d8a54582c0151c0b945c3d20",
        "example/outputs.json",
        "Apache-2.0 (the repository); the 805 instructions",
    ),
    "mbpp": (
        "OckBench/OckBench",
        "b72752a0ba5989d3c212675ec60d3eedcd838628",
        "data/mbpp.jsonl",
        "CC-BY-4.0 (MBPP, google-research/google-research mbpp/mbpp.jsonl; all 974 tasks, copied verbatim there)",
    ),
    "math-test": (
        "LightChen233/ECM",
        "aac9ae2f22e312fac2de44f20e4227922649b5f4",
        "data/math/test.jsonl",
        "MIT (MATH, hendrycks/math); the whole test split, 5,000 problems (a copy; its subject counts "
        "match the original's and it holds every MATH-500 problem)",
    ),
}

#: the user message of a HumanEval suite line (the function's prompt, as the model must complete it)
HUMANEVAL_WORDING = "Complete the following Python function.\n\n```python\n{prompt}```"


def show(mirrors: Path, key: str) -> bytes:
    repo, commit, path, _ = SOURCES[key]
    gitdir = mirrors / repo.replace("/", "+") / "repo"
    if not gitdir.is_dir():
        raise FileNotFoundError(f"{gitdir}: no snapshot of {repo} (fetch github:{repo})")
    return subprocess.run(
        ["git", "--git-dir", str(gitdir), "show", f"{commit}:{path}"], check=True, capture_output=True
    ).stdout


def jsonl(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.decode().splitlines() if line.strip()]


def read_sets(mirrors: Path) -> dict[str, list[dict]]:
    """Every evaluation set as records: {"id", "category", "texts" (all turns), "suite" (or None)}."""
    out: dict[str, list[dict]] = {}
    out["mt-bench"] = [
        {"id": f"mt-bench-{q['question_id']}", "category": q["category"], "texts": q["turns"]}
        for q in jsonl(show(mirrors, "mt-bench"))
    ]
    out["vicuna-80"] = [
        {"id": f"vicuna-{q['question_id']}", "category": q["category"], "texts": q["turns"]}
        for q in jsonl(show(mirrors, "vicuna-80"))
    ]
    out["humaneval"] = [
        {"id": q["task_id"].replace("/", "-"), "category": "code", "texts": [q["prompt"]], "prompt": q["prompt"]}
        for q in jsonl(gzip.decompress(show(mirrors, "humaneval")))
    ]
    out["gsm8k-test"] = [
        {"id": f"gsm8k-test-{i:04d}", "category": "math", "texts": [q["question"]]}
        for i, q in enumerate(jsonl(show(mirrors, "gsm8k-test")))
    ]
    out["alpaca-eval"] = [
        {"id": f"alpaca-eval-{i:03d}", "category": q.get("dataset", ""), "texts": [q["instruction"]]}
        for i, q in enumerate(json.loads(show(mirrors, "alpaca-eval")))
    ]
    out["mbpp"] = [
        {"id": f"mbpp-{q['task_id']}", "category": "code", "texts": [q["text"], "\n".join(q.get("test_list", []))]}
        for q in jsonl(show(mirrors, "mbpp"))
    ]
    out["math-test"] = [
        {"id": f"math-test-{i:04d}", "category": "math", "texts": [q["question"]]}
        for i, q in enumerate(jsonl(show(mirrors, "math-test")))
    ]
    return out


def suite_line(rec_id: str, category: str, content: str) -> str:
    return json.dumps({"id": rec_id, "category": category, "messages": [{"role": "user", "content": content}]})


def write_suites(sets: dict[str, list[dict]], dest: Path) -> dict[str, int]:
    dest.mkdir(parents=True, exist_ok=True)
    mt = [suite_line(q["id"], q["category"], q["texts"][0]) for q in sets["mt-bench"]]
    gsm = [suite_line(q["id"], "math", q["texts"][0]) for q in sets["gsm8k-test"][:100]]
    he = [suite_line(q["id"], "code", HUMANEVAL_WORDING.format(prompt=q["prompt"])) for q in sets["humaneval"]]
    for name, lines in (("mt_bench.jsonl", mt), ("gsm8k_test.jsonl", gsm), ("humaneval.jsonl", he)):
        (dest / name).write_text("\n".join(lines) + "\n")
    return {"mt_bench.jsonl": len(mt), "gsm8k_test.jsonl": len(gsm), "humaneval.jsonl": len(he)}


def build_fingerprints(sets: dict[str, list[dict]], dest: Path) -> decontam.Fingerprints:
    items = {name: [t for q in recs for t in q["texts"] if t] for name, recs in sets.items()}
    info = {
        name: {
            "items": len(recs),
            "texts": len(items[name]),
            "repository": SOURCES[name][0],
            "commit": SOURCES[name][1],
            "path": SOURCES[name][2],
            "licence": SOURCES[name][3],
        }
        for name, recs in sets.items()
    }
    fp = decontam.build(items, info)
    decontam.save(fp, dest / "decontam.npz")
    return fp


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirrors", default="/work/.mirror", help="folder of owner+name/repo bare git snapshots")
    ap.add_argument("--out", default=str(resource("prompts", "public")))
    a = ap.parse_args(argv)
    dest = Path(a.out)
    sets = read_sets(Path(a.mirrors))
    counts = write_suites(sets, dest)
    fp = build_fingerprints(sets, dest)
    print(
        f"suites {counts}; fingerprints: {len(fp.gram)} 13-grams, {len(fp.short)} short items, "
        f"{len(fp.full)} whole texts of {', '.join(f'{k} ({len(v)})' for k, v in sets.items())} -> {dest}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
