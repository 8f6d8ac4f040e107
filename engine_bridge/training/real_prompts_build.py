"""Builds the shipped real training prompt set, resources/prompts/train/prompts.jsonl.xz, from
public, permissively licensed repositories (prompts only; no responses are kept).

    python -m engine_bridge.training.real_prompts_build --mirrors /work/.mirror

``--mirrors`` holds bare git snapshots named ``owner+name/repo`` (what the ``fetch`` tool brings);
every file is read at the commit recorded in ``SOURCES``, so a rebuild from the same snapshots gives
the same file. Steps: read each source -> keep lengths like real requests (15..1,500 characters) ->
drop exact duplicates (normalised words) -> drop whatever the decontamination check flags (counted
per source) -> assign the split by a hash of the text (``val``: about 2 %) -> write, sorted by id.
resources/prompts/train/SOURCES.md is the table of sources, licences, counts and refusals; the
builder writes ``sources.json`` beside the set (what ``real_prompts`` and the data meta read).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import lzma
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from ..common.resources import resource
from . import chat_prompts, decontam

MIN_CHARS, MAX_CHARS = 15, 1500
VAL_PER_MILLE = 20  # 2 % of the texts, by hash, form the validation split

T0_DIR = "data/finetuning/t0_train_50k/data_per_template"
#: T0 training datasets kept, with the licence of the dataset the prompt's text comes from and the
#: category it maps to. Datasets whose own licence is non-commercial, share-alike, research-only or
#: not stated are left out (T0_REFUSED).
T0_KEEP = {
    "cosmos_qa": ("CC-BY-4.0", "reasoning"),
    "commonsense_qa": ("MIT", "reasoning"),
    "qasc": ("CC-BY-4.0", "reasoning"),
    "quarel": ("CC-BY-4.0", "reasoning"),
    "quartz": ("CC-BY-4.0", "reasoning"),
    "ropes": ("CC-BY-4.0", "reasoning"),
    "duorc": ("MIT", "instructions"),
    "quoref": ("CC-BY-4.0", "instructions"),
    "paws": ("PAWS terms: free to use for any purpose (google-research-datasets/paws)", "instructions"),
    "common_gen": ("MIT", "writing"),
    "cnn_dailymail": ("Apache-2.0", "writing"),
}
T0_REFUSED = {
    "adversarial_qa": "CC-BY-SA-3.0 (share-alike)",
    "sciq": "CC-BY-NC-3.0 (non-commercial)",
    "samsum": "CC-BY-NC-ND-4.0 (non-commercial)",
    "quail": "CC-BY-NC-SA-4.0",
    "wiki_bio": "CC-BY-SA-3.0",
    "wiki_hop": "CC-BY-SA-3.0",
    "kilt_tasks": "CC-BY-SA (Wikipedia)",
    "dbpedia_14": "CC-BY-SA-3.0",
    "wiki_qa": "Microsoft Research Data License (restricted)",
    "ag_news": "non-commercial use only",
    "yelp_review": "Yelp dataset terms (non-commercial)",
    "amazon_polarity": "Amazon review data, terms unclear",
    "imdb": "not stated",
    "rotten_tomatoes": "not stated",
    "app_reviews": "not stated",
    "trec": "not stated",
    "glue_mrpc": "not stated (Microsoft)",
    "glue_qqp": "Quora terms",
    "xsum": "not stated",
    "gigaword": "LDC-derived",
    "multi_news": "not stated",
    "dream": "research only",
    "social_i_qa": "not stated",
    "wiqa": "not stated",
}

#: source name -> (repository, commit, what was read, licence)
SOURCES = {
    "self-instruct-t0": (
        "yizhongw/self-instruct",
        "0b26ccaa415992100fa32df62d41b994cf928e23",
        T0_DIR + "/*.jsonl (the T0 training subset, 50k; prompts of the datasets in T0_KEEP)",
        "Apache-2.0 (repository); per dataset as in T0_KEEP",
    ),
    "self-instruct-seed": (
        "yizhongw/self-instruct",
        "0b26ccaa415992100fa32df62d41b994cf928e23",
        "data/seed_tasks.jsonl (175 human-written tasks)",
        "Apache-2.0",
    ),
    "gsm8k-train": (
        "openai/grade-school-math",
        "3101c7d5072418e28b9008a6636bde82a006892c",
        "grade_school_math/data/train.jsonl (questions only; test.jsonl is evaluation only)",
        "MIT",
    ),
    "gpteacher-codegen": (
        "teknium1/GPTeacher",
        "481075123c29854bddb82655badeef6a438f2436",
        "Codegen/codegen-instruct.json (instruction + input)",
        "MIT",
    ),
    "gpteacher-roleplay": (
        "teknium1/GPTeacher",
        "481075123c29854bddb82655badeef6a438f2436",
        "Roleplay/roleplay-simple-deduped-roleplay-instruct.json (instruction + input)",
        "MIT",
    ),
    "thealgorithms-python": (
        "TheAlgorithms/Python",
        "f5988cc09713315817df6a7e327e258013a94440",
        "*.py: function names, signatures and docstring first paragraphs",
        "MIT",
    ),
    "thealgorithms-javascript": (
        "TheAlgorithms/JavaScript",
        "08d8c6b6749c06a36fab705a8cf16e9a04d46a8e",
        "*.js: doc comments and the function they describe",
        "MIT",
    ),
    "thealgorithms-java": (
        "TheAlgorithms/Java",
        "9d05db2d14702454a418ff31158905e502df83e0",
        "*.java: doc comments and the method they describe",
        "MIT",
    ),
    "thealgorithms-go": (
        "TheAlgorithms/Go",
        "5ba447ec5ff3d1213de65b92e726ee74c5d5cc19",
        "*.go: doc comments and the function they describe",
        "MIT",
    ),
    "thealgorithms-rust": (
        "TheAlgorithms/Rust",
        "2c53ddfa4b43da4df34bc2f990c5e806f455cb90",
        "*.rs: doc comments and the function they describe",
        "MIT",
    ),
    "thealgorithms-cpp": (
        "TheAlgorithms/C-Plus-Plus",
        "b9c118fb5dca86f6325e816481959e1e6c360373",
        "*.cpp: doc comments and the function they describe",
        "MIT",
    ),
    "scitldr-train": (
        "allenai/scitldr",
        "5ccad9c00a60ad75c9e04abf7f27d0f53f983b20",
        "SciTLDR-Data/SciTLDR-A/train.jsonl (paper abstracts, train split only) in our summary request templates",
        "Apache-2.0 (abstracts); MIT (templates, DFlash Studio)",
    ),
    "awesome-chatgpt-prompts": (
        "f/awesome-chatgpt-prompts",
        "50a97c072933c93c76cc0714e9dd4c4cf1d80ae7",
        "prompts.csv (type TEXT; ${var:default} placeholders filled with their defaults)",
        "CC0-1.0 (public domain dedication)",
    ),
    "cpython-stdlib": (
        f"CPython {sys.version_info.major}.{sys.version_info.minor} (the interpreter running the builder)",
        "",
        "module and function names, docstring first lines (chat_prompts.stdlib_functions) in our "
        "code request templates",
        "PSF-2.0 (docstrings); MIT (templates, DFlash Studio)",
    ),
}

#: requests built around a TheAlgorithms function (one per function, chosen by a hash of its name)
ALGO_TEMPLATES = [
    "Write a Python function `{name}({args})`.\n\n{doc}",
    "Implement `{name}({args})` in Python. {doc}",
    "{doc}\n\nWrite this as a Python function named `{name}` and explain how it works.",
    "In Python, write `{name}({args})` with type hints and a docstring. What it should do: {doc}",
    "How would I implement this in Python? {doc}",
]
CODE_TEMPLATES = chat_prompts.TRAIN_TEMPLATES["code"]


class Mirror:
    """Blobs of one bare snapshot at one commit, read through ``git cat-file --batch``."""

    def __init__(self, mirrors: Path, repo: str, commit: str):
        self.gitdir = mirrors / repo.replace("/", "+") / "repo"
        if not self.gitdir.is_dir():
            raise FileNotFoundError(f"{self.gitdir}: no snapshot of {repo} (fetch github:{repo})")
        self.commit = commit

    def _git(self, *args: str, data: bytes | None = None) -> bytes:
        return subprocess.run(
            ["git", "--git-dir", str(self.gitdir), *args], input=data, check=True, capture_output=True
        ).stdout

    def ls(self, under: str = "") -> list[str]:
        args = ["ls-tree", "-r", "--name-only", self.commit] + ([under] if under else [])
        return self._git(*args).decode().splitlines()

    def read(self, path: str) -> bytes:
        return self._git("show", f"{self.commit}:{path}")

    def read_many(self, paths: list[str]) -> dict[str, bytes]:
        req = "".join(f"{self.commit}:{p}\n" for p in paths).encode()
        raw = self._git("cat-file", "--batch", data=req)
        out, pos = {}, 0
        for p in paths:
            nl = raw.index(b"\n", pos)
            head = raw[pos:nl].split()
            if head[-1] == b"missing":
                pos = nl + 1
                continue
            size = int(head[2])
            out[p] = raw[nl + 1 : nl + 1 + size]
            pos = nl + 1 + size + 1
        return out


def _h(s: str) -> int:
    return int(hashlib.sha256(s.encode()).hexdigest()[:12], 16)


def join(instruction: str, inp: str | None) -> str:
    instruction, inp = instruction.strip(), (inp or "").strip()
    return f"{instruction}\n\n{inp}" if inp else instruction


# -- sources -------------------------------------------------------------------------------------------
def t0(m: Mirror, per_template: int = 1000) -> list[tuple[str, str, str]]:
    out = []
    files = [p for p in m.ls(T0_DIR) if p.endswith(".jsonl")]
    for path, data in sorted(m.read_many(files).items()):
        tmpl = path.rsplit("/", 1)[1][: -len(".jsonl")]
        ds = next((d for d in T0_KEEP if tmpl.startswith(d + "_")), None)
        if ds is None:
            continue
        kept = 0
        for line in data.decode().splitlines():
            if kept >= per_template:
                break
            if not line.strip():
                continue
            text = json.loads(line)["prompt"].replace("\\n", "\n").strip()
            if MIN_CHARS <= len(text) <= MAX_CHARS:
                out.append((T0_KEEP[ds][1], "self-instruct-t0", text))
                kept += 1
    return out


WRITING_WORDS = (
    "write",
    "compose",
    "poem",
    "story",
    "essay",
    "letter",
    "email",
    "slogan",
    "tweet",
    "rewrite",
    "paraphrase",
    "summar",
    "headline",
    "title",
    "lyrics",
    "describe",
)


def seeds(m: Mirror) -> list[tuple[str, str, str]]:
    out = []
    for line in m.read("data/seed_tasks.jsonl").decode().splitlines():
        t = json.loads(line)
        inst = t["instances"][0] if t.get("instances") else {}
        text = join(t["instruction"], inst.get("input"))
        low = t["instruction"].lower()
        cat = (
            "writing" if any(w in low for w in WRITING_WORDS) else ("chat" if not inst.get("input") else "instructions")
        )
        out.append((cat, "self-instruct-seed", text))
    return out


def gsm8k_train(m: Mirror) -> list[tuple[str, str, str]]:
    return [
        ("math", "gsm8k-train", json.loads(line)["question"].strip())
        for line in m.read("grade_school_math/data/train.jsonl").decode().splitlines()
        if line.strip()
    ]


def gpteacher(m: Mirror) -> list[tuple[str, str, str]]:
    out = []
    for r in json.loads(m.read("Codegen/codegen-instruct.json")):
        out.append(("code", "gpteacher-codegen", join(r["instruction"], r.get("input"))))
    for r in json.loads(m.read("Roleplay/roleplay-simple-deduped-roleplay-instruct.json")):
        text = join(r["instruction"], r.get("input"))
        low = r["instruction"].lower()
        cat = "writing" if low.startswith(("write", "compose", "create a", "draft")) else "chat"
        out.append((cat, "gpteacher-roleplay", text))
    return out


def awesome(m: Mirror) -> list[tuple[str, str, str]]:
    import csv
    import io

    csv.field_size_limit(1 << 30)
    out = []
    for r in csv.DictReader(io.StringIO(m.read("prompts.csv").decode("utf-8", "replace"))):
        if (r.get("type") or "TEXT") != "TEXT":
            continue
        text = re.sub(r"\$\{[^}:]*:([^}]*)\}", r"\1", r["prompt"]).strip()
        if "${" in text or text.startswith("---"):
            continue
        cat = "code" if (r.get("for_devs") or "").upper() == "TRUE" else "chat"
        out.append((cat, "awesome-chatgpt-prompts", text))
    return out


SUMMARY_TEMPLATES = [
    "Write a one-sentence TL;DR of this abstract:\n\n{a}",
    "Summarize the following paper abstract in a single sentence.\n\n{a}",
    "{a}\n\nExplain what this paper is about to someone who is not an expert, in a short paragraph.",
    "Here is the abstract of a research paper:\n\n{a}\n\nWhat is its main contribution, in one or two sentences?",
    "Suggest a clear, catchy title for a paper with this abstract:\n\n{a}",
    "Rewrite this abstract as a short blog post introduction for a general audience.\n\n{a}",
]


def scitldr(m: Mirror) -> list[tuple[str, str, str]]:
    out = []
    for line in m.read("SciTLDR-Data/SciTLDR-A/train.jsonl").decode().splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        a = " ".join(s.strip() for s in r["source"]).strip()
        tmpl = SUMMARY_TEMPLATES[_h(r["paper_id"]) % len(SUMMARY_TEMPLATES)]
        out.append(("writing", "scitldr-train", tmpl.format(a=a)))
    return out


def _doc_paragraph(doc: str) -> str:
    """The docstring's first paragraph, without doctest lines or parameter sections."""
    keep: list[str] = []
    for line in doc.strip().splitlines():
        s = line.strip()
        if not s:
            if keep:
                break
            continue
        if s.startswith(
            (
                ">>>",
                ":param",
                ":return",
                "Args:",
                "Arguments:",
                "Parameters",
                "Returns",
                "Example",
                "Examples",
                "Reference",
                "https://",
                "http://",
                "wikipedia",
                "Source:",
                "doctest",
            )
        ):
            break
        keep.append(s)
    return " ".join(keep)


def thealgorithms(m: Mirror) -> list[tuple[str, str, str]]:
    out = []
    files = [p for p in m.ls() if p.endswith(".py") and "/" in p and not p.split("/")[-1].startswith("test")]
    for path, data in sorted(m.read_many(files).items()):
        try:
            tree = ast.parse(data.decode("utf-8", "replace"))
        except SyntaxError:
            continue
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("_") or node.name == "main":
                continue
            doc = _doc_paragraph(ast.get_docstring(node) or "")
            if not (30 <= len(doc) <= 600) or not any(c.isalpha() for c in doc):
                continue
            args = ", ".join(a.arg for a in node.args.args)
            tmpl = ALGO_TEMPLATES[_h(f"{path}:{node.name}") % len(ALGO_TEMPLATES)]
            out.append(("code", "thealgorithms-python", tmpl.format(name=node.name, args=args, doc=doc)))
    return out


#: TheAlgorithms in other languages (MIT): file extension, language name, function-name pattern of the
#: line after a doc comment
OTHER_LANGS = {
    "JavaScript": (
        ".js",
        r"(?:export\s+)?(?:default\s+)?(?:async\s+)?(?:function\s*\*?\s*(\w+)|(?:const|let|var)\s+(\w+)\s*=)",
    ),
    "Java": (".java", r"(?:public|private|protected|static|final|synchronized|\s)+[\w<>\[\],?\s]+?\s(\w+)\s*\("),
    "Go": (".go", r"func\s+(?:\([^)]*\)\s*)?(\w+)"),
    "Rust": (".rs", r"(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?fn\s+(\w+)"),
    "C++": (
        ".cpp",
        r"(?:template\s*<[^>]*>\s*)?(?:static\s+|inline\s+|constexpr\s+)*[\w:<>,\*&\s]+?\s[\*&]*(\w+)\s*\(",
    ),
}
OTHER_TEMPLATES = [
    "Write a {lang} function `{name}`: {doc}",
    "Implement `{name}` in {lang}. {doc}",
    "{doc}\n\nWrite this in {lang} (a function named `{name}`) and explain the approach.",
    "How would I write `{name}` in {lang}? It should do this: {doc}",
]
FILE_TEMPLATES = [
    "Implement the following in {lang}: {doc}",
    "Write a {lang} program for this. {doc}",
    "{doc}\n\nShow an implementation in {lang}, with a short explanation.",
]
_COMMENT_RE = re.compile(r"/\*\*?(.*?)\*/|((?:^[ \t]*//[/!]?[^\n]*\n)+)", re.S | re.M)
_DROP_DOC = re.compile(
    r"^(?:@(?:param|return|returns|throws|author|see|since|version|tparam|note|example|file|"
    r"namespace|exception|license|copyright)|\\(?:param|return|author)|reference|references|"
    r"author|time complexity|space complexity|complexity|see |https?://|example|for more|"
    r"package |copyright|license)",
    re.I,
)


def _clean_comment(raw: str) -> str:
    """The prose of a doc comment: comment markers, tags and links dropped, first paragraph(s) only."""
    keep: list[str] = []
    for line in raw.splitlines():
        s = re.sub(r"^\s*(?:/\*+|\*+/?|//[/!]?)\s?", "", line).strip()
        s = re.sub(
            r"^(?:@brief|\\brief|@details|\\details|description:|@description|@summary)\s*", "", s, flags=re.I
        ).strip()
        s = re.sub(r"^@(?:function|name|method|class|module|func)\s+\S+\s*", "", s).strip()
        if not s:
            if len(" ".join(keep)) >= 60:
                break
            continue
        if _DROP_DOC.match(s) or s.startswith(("```", "<", "|", "#include", "import ", "$")):
            if keep:
                break
            continue
        keep.append(s)
    text = " ".join(keep)
    text = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", text)  # markdown links -> their text
    text = re.sub(r"https?://\S+", "", text).replace("\\f$", "")  # bare links, Doxygen math markers
    return re.sub(r"\s+", " ", text).strip()


def other_languages(mirrors: Path) -> list[tuple[str, str, str]]:
    out = []
    for lang, (ext, fn_re) in OTHER_LANGS.items():
        src = "thealgorithms-" + lang.lower().replace("+", "p")
        m = Mirror(mirrors, *SOURCES[src][:2])
        files = [p for p in m.ls() if p.endswith(ext) and "test" not in p.lower()]
        fn = re.compile(fn_re)
        for path, data in sorted(m.read_many(files).items()):
            code = data.decode("utf-8", "replace")
            first = True
            for mt in _COMMENT_RE.finditer(code):
                doc = _clean_comment(mt.group(1) or mt.group(2) or "")
                after = code[mt.end() : mt.end() + 300].lstrip().split("\n", 1)[0]
                name_m = fn.match(after)
                name = next((g for g in name_m.groups() if g), None) if name_m else None
                is_header = first and mt.start() < 400
                first = False
                if not (40 <= len(doc) <= 700) or sum(c.isalpha() for c in doc) < 30:
                    continue
                if (
                    name
                    and name not in ("main", "if", "for", "while", "return", "switch", "new")
                    and not name.startswith("test")
                ):
                    tmpl = OTHER_TEMPLATES[_h(f"{path}:{name}") % len(OTHER_TEMPLATES)]
                    out.append(("code", src, tmpl.format(lang=lang, name=name, doc=doc)))
                elif is_header:
                    tmpl = FILE_TEMPLATES[_h(path) % len(FILE_TEMPLATES)]
                    out.append(("code", src, tmpl.format(lang=lang, doc=doc)))
    return out


def stdlib() -> list[tuple[str, str, str]]:
    out = []
    for mod, fn, doc in chat_prompts.stdlib_functions():
        tmpl = CODE_TEMPLATES[_h(f"{mod}.{fn}") % len(CODE_TEMPLATES)]
        out.append(("code", "cpython-stdlib", tmpl.format(mod=mod, fn=fn, doc=doc)))
    return out


# -- assembly -----------------------------------------------------------------------------------------------
def split_of(text: str) -> str:
    return (
        "val" if int(hashlib.sha256(("split:" + text).encode()).hexdigest()[:8], 16) % 1000 < VAL_PER_MILLE else "train"
    )


def assemble(raw: list[tuple[str, str, str]], log=print) -> tuple[list[dict], dict]:
    stats: dict = {
        "read": Counter(),
        "length": Counter(),
        "duplicate": Counter(),
        "contaminated": Counter(),
        "contaminated_sets": Counter(),
        "contaminated_examples": [],
    }
    seen: set[int] = set()
    cand = []
    for cat, src, text in raw:
        stats["read"][src] += 1
        text = text.strip()
        if not (MIN_CHARS <= len(text) <= MAX_CHARS):
            stats["length"][src] += 1
            continue
        key = decontam.full_hash(decontam.words(text))
        if key in seen:
            stats["duplicate"][src] += 1
            continue
        seen.add(key)
        cand.append((cat, src, text))
    rep = decontam.check([t for _, _, t in cand])
    bad = {h["index"]: h for h in rep["hits"]}
    rows = []
    for i, (cat, src, text) in enumerate(cand):
        if i in bad:
            stats["contaminated"][src] += 1
            for s in bad[i]["sets"]:
                stats["contaminated_sets"][s] += 1
            if len(stats["contaminated_examples"]) < 12:
                stats["contaminated_examples"].append(
                    {"source": src, "set": bad[i]["set"], "kind": bad[i]["kind"], "ngram": bad[i]["ngram"]}
                )
            continue
        rows.append(
            {
                "id": f"{src}-{hashlib.sha256(text.encode()).hexdigest()[:12]}",
                "category": cat,
                "source": src,
                "split": split_of(text),
                "text": text,
            }
        )
    rows.sort(key=lambda r: r["id"])
    log(
        f"read {sum(stats['read'].values())}, kept {len(rows)}; dropped: length {sum(stats['length'].values())}, "
        f"duplicates {sum(stats['duplicate'].values())}, contaminated {sum(stats['contaminated'].values())}"
    )
    return rows, stats


def counts_table(rows: list[dict]) -> dict:
    t: dict = {}
    for r in rows:
        t.setdefault(r["source"], Counter())[r["category"]] += 1
    return {s: dict(sorted(c.items())) for s, c in sorted(t.items())}


#: sources looked at and not used: (what, licence or reason)
REFUSED = {
    "sahil280114/codealpaca (data/code_alpaca_20k.json)": "data under CC-BY-NC-4.0 (DATA_LICENSE): non-commercial",
    "tatsu-lab/stanford_alpaca (alpaca_data.json)": "CC-BY-NC-4.0: non-commercial",
    "databricks/dolly (databricks-dolly-15k)": "CC-BY-SA-3.0: share-alike",
    "Instruction-Tuning-with-GPT-4/GPT-4-LLM": "CC-BY-NC-4.0: non-commercial",
    "ShareGPT dumps": "no licence; conversations scraped from users",
    "allenai/natural-instructions (tasks/*.json, Apache-2.0)": "not used, not refused: its snapshot (3.2 GB) is over "
    "the 500 MiB limit of this environment's fetch, and the SuperNI export in yizhongw/self-instruct "
    "(data/finetuning/superni_50k) is over the 4 MiB file limit, so neither could be read",
    "yizhongw/self-instruct all_instances_82K.jsonl / gpt3_finetuning_data.jsonl": "not used: over the 4 MiB file limit "
    "of the snapshot (Apache-2.0, would be fine)",
    "yizhongw/self-instruct human_eval/user_oriented_instructions.jsonl": "Self-Instruct's own evaluation set (252): "
    "kept out of training as an evaluation set",
    "anthropics/hh-rlhf (helpful-*)": "not used: Git LFS pointers only in the snapshot (MIT, would be fine); "
    "harmless-base is harmful requests by design",
    "orhonovich/unnatural-instructions (data/*.zip)": "not used: over the 4 MiB file limit (MIT, would be fine)",
    "teknium1/GPTeacher Instruct/*.json": "not used: over the 4 MiB file limit (MIT, would be fine); "
    "Toolformer/*: tool-call formatted, not requests a user types",
    "deepmind/AQuA train.json": "not used: over the 4 MiB file limit (Apache-2.0); dev/test are evaluation splits",
    "openai/prm800k (MATH splits)": "not used: Git LFS pointers only; its train split also holds 4,500 MATH test problems",
    "MATH train split (hendrycks/math; meta-math/MetaMath, Qwen-style evaluation folders)": "not used: the data is "
    "outside git or the copies are over the 4 MiB file limit (MIT, would be fine)",
    "Yale-LILY/dart": "MIT as released, but built from WebNLG (CC-BY-NC-SA) and E2E / WikiTableQuestions (CC-BY-SA)",
    "thunlp/UltraChat, LAION-AI/Open-Assistant (oasst1)": "not used: the conversations are on Hugging Face, not in "
    "the git repositories (MIT / Apache-2.0, would be fine); Open-Assistant's en_100 files are its evaluation set",
    "allenai/scitldr dev/test": "SciTLDR's evaluation splits: only its train split is used",
    "google/BIG-bench": "an evaluation benchmark whose canary asks that it never appear in training data",
}


def sources_md(meta: dict) -> str:
    cats = list(chat_prompts.CATEGORIES)
    L = [
        "# The shipped real training prompt set",
        "",
        "`prompts.jsonl.xz`: one JSON object per line, `{id, category, source, split, text}`; prompts only, no "
        "responses. `split` is `val` for about 2 % of the texts (a SHA-256 of the text), `train` otherwise: "
        "training uses `train` only; held-out figures and checkpoint choice use `val` only.",
        "",
        "Rebuild (from bare git snapshots of the repositories below, read at the commits listed):",
        "",
        "```",
        "python -m engine_bridge.training.public_sets_build --mirrors /work/.mirror   # fingerprints first",
        "python -m engine_bridge.training.real_prompts_build --mirrors /work/.mirror",
        "```",
        "",
        f"{meta['n']} distinct prompts (exact duplicates after normalisation removed), sha256 of the uncompressed "
        f"file `{meta['sha256']}`.",
        "",
        "## Sources and counts",
        "",
        "| source | repository @ commit | read | licence | " + " | ".join(cats) + " | total |",
        "|---|---|---|---|" + "---|" * (len(cats) + 1),
    ]
    for name, src in meta["sources"].items():
        c = meta["per_source"].get(name, {})
        where = f"{src['repository']} @ `{src['commit'][:12]}`" if src["commit"] else src["repository"]
        L.append(
            f"| {name} | {where} | {src['read']} | {src['licence']} | "
            + " | ".join(str(c.get(k, 0)) for k in cats)
            + f" | {sum(c.values())} |"
        )
    tot = meta["categories"]
    L.append("| **all** | | | | " + " | ".join(str(tot.get(k, 0)) for k in cats) + f" | {meta['n']} |")
    L.append(
        "| of them `val` | | | | "
        + " | ".join(str(meta["val"].get(k, 0)) for k in cats)
        + f" | {sum(meta['val'].values())} |"
    )
    L += [
        "",
        "### T0 datasets kept (text of the prompt comes from these; their licences)",
        "",
        "The repository is Apache-2.0. The text inside each T0 prompt comes from the dataset named in the "
        "template. These licences are the ones stated on the datasets' public cards and releases; they were not "
        "re-read in each dataset's own repository here. CC-BY-4.0 asks for attribution, which this table gives. "
        "To leave a dataset out, delete it from `T0_KEEP` in `real_prompts_build.py` and rebuild.",
        "",
    ]
    L += [f"- `{k}`: {v}" for k, v in meta["t0_datasets"].items()]
    L += [
        "",
        "### T0 datasets dropped (licence of the dataset is non-commercial, share-alike, restricted or not stated)",
        "",
    ]
    L += [f"- `{k}`: {v}" for k, v in meta["t0_refused"].items()]
    d = meta["dropped"]
    L += [
        "",
        "## What was dropped, and why",
        "",
        f"- length outside {MIN_CHARS}..{MAX_CHARS} characters: {dict(d['length'])}",
        f"- exact duplicates (normalised words): {dict(d['duplicate'])}",
        f"- overlapping a public evaluation set (`decontam`: 13-gram / short item / exact copy): "
        f"{dict(d['contaminated'])}; by set {dict(d['contaminated_sets'])}. Examples:",
        "",
    ]
    L += [f'  - {e["source"]} vs {e["set"]} ({e["kind"]}): "{e["ngram"]}"' for e in meta["contaminated_examples"]]
    L += [
        "",
        f"Evaluation sets fingerprinted: {', '.join(meta['fingerprints']['sets'])} "
        "(resources/prompts/public/README.md).",
        "",
        "## Sources refused or not available",
        "",
        "| source | why |",
        "|---|---|",
    ]
    L += [f"| {k} | {v} |" for k, v in REFUSED.items()]
    L += [
        "",
        "Licence notes: CC-BY-4.0 (attribution) datasets behind some T0 prompts are permissive but require "
        "attribution, given here; GPT-generated sources (self-instruct seeds are human-written; GPTeacher was "
        "written by GPT-4) carry their repositories' MIT/Apache licences.",
        "",
    ]
    return "\n".join(L)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirrors", default="/work/.mirror", help="folder of owner+name/repo bare git snapshots")
    ap.add_argument("--out", default=str(resource("prompts", "train")))
    a = ap.parse_args(argv)
    mirrors, dest = Path(a.mirrors), Path(a.out)
    si = Mirror(mirrors, *SOURCES["self-instruct-t0"][:2])
    raw = []
    raw += t0(si)
    raw += seeds(si)
    raw += gsm8k_train(Mirror(mirrors, *SOURCES["gsm8k-train"][:2]))
    raw += gpteacher(Mirror(mirrors, *SOURCES["gpteacher-codegen"][:2]))
    raw += thealgorithms(Mirror(mirrors, *SOURCES["thealgorithms-python"][:2]))
    raw += other_languages(mirrors)
    raw += scitldr(Mirror(mirrors, *SOURCES["scitldr-train"][:2]))
    raw += awesome(Mirror(mirrors, *SOURCES["awesome-chatgpt-prompts"][:2]))
    raw += stdlib()
    rows, stats = assemble(raw)
    dest.mkdir(parents=True, exist_ok=True)
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()
    (dest / "prompts.jsonl.xz").write_bytes(lzma.compress(body, preset=9 | lzma.PRESET_EXTREME))
    cats = Counter(r["category"] for r in rows)
    splits = Counter((r["category"], r["split"]) for r in rows)
    meta = {
        "file": "prompts.jsonl.xz",
        "n": len(rows),
        "sha256": hashlib.sha256(body).hexdigest(),
        "categories": dict(sorted(cats.items())),
        "val": {c: splits[(c, "val")] for c in sorted(cats)},
        "per_source": counts_table(rows),
        "sources": {k: {"repository": v[0], "commit": v[1], "read": v[2], "licence": v[3]} for k, v in SOURCES.items()},
        "t0_datasets": {k: v[0] for k, v in T0_KEEP.items()},
        "t0_refused": T0_REFUSED,
        "dropped": {k: dict(v) for k, v in stats.items() if k != "contaminated_examples"},
        "contaminated_examples": stats["contaminated_examples"],
        "fingerprints": {"sets": list(decontam.load().sets)},
    }
    meta["refused"] = REFUSED
    (dest / "sources.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
    (dest / "SOURCES.md").write_text(sources_md(meta))
    print(json.dumps({k: meta[k] for k in ("n", "categories", "val", "per_source", "dropped")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
