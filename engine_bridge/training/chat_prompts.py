"""Prompts for training a drafter on an instruct target: composed here, no data set downloaded.

Six categories (chat, instructions, writing, code, math, reasoning). A prompt is one of our own
templates filled with a topic:

* templates and everyday topics: written for this project (MIT, like the rest of it);
* code topics: names and first docstring lines of CPython standard-library modules and functions,
  read from the running interpreter (PSF-2.0);
* math and reasoning: numbers, names and orderings drawn from a seeded random generator.

Nothing comes from a public benchmark (MT-Bench, AlpacaEval, HumanEval, MBPP, GSM8K, MATH ...).

Held-out prompts (the later evaluation) use templates of their own (``HELD_OUT_TEMPLATES``) and
topics split off by a hash, so no held-out prompt shares a template instance with training.
Every prompt records its source; ``SOURCES`` lists each source's licence (data meta and card).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import random
import sys
import warnings

CATEGORIES = ("chat", "instructions", "writing", "code", "math", "reasoning")
EVAL_CATEGORIES = ("chat", "code", "math")

SOURCES = {
    "dflash-studio-templates": "MIT (written for DFlash Studio: prompt templates)",
    "dflash-studio-topics": "MIT (written for DFlash Studio: everyday topics, names, objects)",
    "cpython-stdlib": "PSF-2.0 (module and function names and docstring first lines of CPython "
    f"{sys.version_info.major}.{sys.version_info.minor}'s standard library)",
    "seeded-random": "generated (numbers and orderings from a seeded random generator; no licence needed)",
}

TOPICS = [
    "growing tomatoes on a balcony",
    "learning to play the guitar",
    "saving money on groceries",
    "training for a first 10k run",
    "keeping houseplants alive",
    "planning a weekend trip",
    "making sourdough bread",
    "studying for an exam",
    "starting a vegetable garden",
    "writing a cover letter",
    "adopting a cat",
    "caring for a dog in hot weather",
    "reducing screen time",
    "sleeping better",
    "learning a new language",
    "organising a small kitchen",
    "painting a room",
    "fixing a bicycle puncture",
    "brewing good coffee at home",
    "cooking rice",
    "meal planning for a week",
    "moving to a new city",
    "preparing for a job interview",
    "giving a short presentation",
    "working from home",
    "composting",
    "birdwatching",
    "taking better photos with a phone",
    "choosing a laptop",
    "backing up files",
    "public speaking nerves",
    "making friends as an adult",
    "hosting a dinner party",
    "camping in the rain",
    "reading more books",
    "keeping a journal",
    "learning to swim",
    "the history of the bicycle",
    "how rainbows form",
    "why the sky is blue",
    "how bees make honey",
    "the water cycle",
    "volcanoes",
    "the phases of the moon",
    "how vaccines work",
    "black holes",
    "the printing press",
    "coral reefs",
    "the Roman aqueducts",
    "how airplanes fly",
    "electric cars",
    "solar panels",
    "recycling plastics",
    "the invention of the telephone",
    "the Silk Road",
    "ancient Egyptian pyramids",
    "tides",
    "earthquakes",
    "photosynthesis",
    "the human heart",
    "how memory works",
    "dinosaurs",
    "glaciers",
    "the Amazon rainforest",
    "chess openings",
    "knitting a scarf",
    "baking cookies",
    "making a budget spreadsheet",
    "renting a flat",
    "a rainy afternoon",
    "a lighthouse keeper",
    "a lost umbrella",
    "a robot learning to paint",
    "a small town bakery",
    "the first day of school",
    "an old map",
    "a night train",
    "a forgotten garden",
    "a friendly dragon",
    "a letter from the future",
    "a storm at sea",
    "a street musician",
    "autumn leaves",
    "time management",
    "team meetings",
    "giving feedback",
    "negotiating a salary",
    "customer service",
    "writing clear emails",
    "version control",
    "unit testing",
    "code review",
    "open source licences",
    "password security",
    "spam emails",
    "online privacy",
    "the metric system",
    "time zones",
    "leap years",
    "prime numbers",
    "fractions",
    "percentages",
    "compound interest",
    "probability of dice",
    "maps and scale",
    "the speed of sound",
    "gravity",
    "magnets",
    "clouds",
    "the seasons",
    "snowflakes",
    "octopuses",
    "elephants",
    "penguins",
    "honeybees",
    "wolves",
    "whales",
    "owls",
    "ants",
    "the olympic games",
    "football tactics",
    "tennis scoring",
    "yoga for beginners",
    "stretching",
    "drinking enough water",
    "a healthy breakfast",
    "tea ceremonies",
    "street food",
    "spices",
    "jazz music",
    "classical music",
    "learning to draw",
    "origami",
    "pottery",
    "woodworking",
    "museums",
    "libraries",
    "trains",
    "lighthouses",
    "bridges",
    "castles",
    "deserts",
    "islands",
]

NAMES = [
    "Ada",
    "Ben",
    "Chloe",
    "Dev",
    "Elena",
    "Farid",
    "Grace",
    "Hugo",
    "Ines",
    "Jonas",
    "Kim",
    "Liam",
    "Maya",
    "Noor",
    "Omar",
    "Priya",
    "Quinn",
    "Rosa",
    "Sam",
    "Tariq",
    "Uma",
    "Victor",
    "Wen",
    "Yusuf",
    "Zoe",
]
OBJECTS = [
    "apples",
    "pencils",
    "marbles",
    "stickers",
    "books",
    "cookies",
    "coins",
    "cards",
    "shells",
    "stamps",
    "bottles",
    "tickets",
    "eggs",
    "plants",
    "boxes",
    "candles",
]

# -- templates ----------------------------------------------------------------------------------------
# {t}: a topic; code templates: {mod}, {fn}, {doc}; math/reasoning are generated by functions below.
TRAIN_TEMPLATES = {
    "chat": [
        "Hi! Can you tell me a bit about {t}?",
        "What do you think is the most interesting thing about {t}?",
        "I'm curious about {t}. Where should I start?",
        "Can you give me some tips on {t}?",
        "My friend keeps talking about {t}. What is it all about?",
        "Is {t} hard for a beginner?",
        "What are common mistakes people make with {t}?",
        "Tell me three fun facts about {t}.",
        "How would you explain {t} to a ten-year-old?",
        "I have ten minutes. Teach me something about {t}.",
        "What should I know before getting into {t}?",
        "Why do people care about {t}?",
    ],
    "instructions": [
        "Give step-by-step instructions for {t}.",
        "Write a checklist for {t}.",
        "List five practical tips for {t}, one line each.",
        "Summarise the key points of {t} in three bullet points.",
        "Explain {t} in one short paragraph.",
        "Make a simple plan for {t} over one week.",
        "What are the pros and cons of {t}? Answer as two lists.",
        "Describe {t} in exactly three sentences.",
        "Give me a short glossary of terms related to {t}.",
        "Write a FAQ with three questions about {t}.",
    ],
    "writing": [
        "Write a short poem about {t}.",
        "Write a haiku about {t}.",
        "Write a short story about {t}.",
        "Write a friendly email inviting a colleague to a talk on {t}.",
        "Write a product description for a book about {t}.",
        "Write the opening paragraph of a novel about {t}.",
        "Write a limerick about {t}.",
        "Write a short blog post introduction about {t}.",
        "Write a tweet announcing a workshop on {t}.",
        "Write a thank-you note to someone who taught me about {t}.",
    ],
    "code": [
        "Write a Python function that does the following: {doc}",
        "Explain what `{mod}.{fn}` does in Python and show a short example.",
        "Show how to use the `{mod}` module in Python with a small example.",
        "What is the `{mod}` module in Python used for?",
        "Write a small Python script that uses `{mod}.{fn}`.",
        "Implement in Python, without using `{mod}`: {doc}",
        "Write a Python function with type hints and a docstring that does this: {doc}",
        "Give an example of a common mistake when using `{mod}.{fn}` in Python and how to fix it.",
    ],
}
HELD_OUT_TEMPLATES = {
    "chat": [
        "Hello there, what can you tell me about {t}?",
        "I just got interested in {t}. Any advice?",
        "What is something surprising about {t}?",
        "Could you chat with me about {t} for a bit?",
    ],
    "code": [
        "In Python, write a function for this task: {doc}",
        "Please demonstrate `{mod}.{fn}` with a Python example.",
        "Describe the Python `{mod}` module and give one usage example.",
    ],
}


#: System messages (our own text) a prompt may be rendered with, besides the template's default:
#: a second rendering of the same request gives another, equally valid, response of the target.
SYSTEM_PROMPTS = [
    "You are a helpful assistant.",
    "You are a friendly and knowledgeable assistant. Answer clearly.",
    "You are a concise assistant. Keep answers short and to the point.",
    "You are a patient teacher who explains things step by step.",
    "You are an expert programmer and a careful writer.",
    "Answer the user's question as well as you can.",
]


def system_prompt_for(text: str) -> str:
    return SYSTEM_PROMPTS[_h("system:" + text) % len(SYSTEM_PROMPTS)]


def _h(s: str) -> int:
    return int(hashlib.sha256(s.encode()).hexdigest()[:8], 16)


def topic_is_held_out(topic: str) -> bool:
    """About one topic in eight is kept for evaluation, chosen by a hash (stable on every machine)."""
    return _h(topic) % 8 == 0


# -- code topics from CPython's standard library (PSF-2.0) ----------------------------------------------
STDLIB_MODULES = (
    "math",
    "statistics",
    "random",
    "string",
    "textwrap",
    "re",
    "json",
    "csv",
    "datetime",
    "calendar",
    "collections",
    "itertools",
    "functools",
    "operator",
    "heapq",
    "bisect",
    "os.path",
    "pathlib",
    "shutil",
    "glob",
    "fnmatch",
    "hashlib",
    "base64",
    "binascii",
    "zlib",
    "gzip",
    "struct",
    "difflib",
    "fractions",
    "decimal",
    "copy",
    "pprint",
    "html",
    "urllib.parse",
    "ipaddress",
    "uuid",
    "secrets",
    "time",
    "enum",
    "dataclasses",
    "typing",
    "unicodedata",
    "colorsys",
    "zipfile",
    "tempfile",
    "argparse",
    "logging",
    "shlex",
    "array",
    "keyword",
    "cmath",
    "sqlite3",
    "email.utils",
    "http",
    "io",
    "inspect",
)


def stdlib_functions() -> list[tuple[str, str, str]]:
    """(module, function, docstring first line) for public functions with a usable first line."""
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in STDLIB_MODULES:
            try:
                mod = importlib.import_module(name)
            except Exception:  # a module missing from this interpreter's build
                continue
            for fn_name in sorted(dir(mod)):
                if fn_name.startswith("_"):
                    continue
                obj = getattr(mod, fn_name, None)
                if not (inspect.isfunction(obj) or inspect.isbuiltin(obj)):
                    continue
                doc = (inspect.getdoc(obj) or "").strip().splitlines()
                first = doc[0].strip() if doc else ""
                if not (20 <= len(first) <= 160) or "(" in first[: len(fn_name) + 1] or first.endswith(":"):
                    continue
                out.append((name, fn_name, first.rstrip(".") + "."))
    return out


# -- math (seeded random numbers) ---------------------------------------------------------------------------
def math_prompt(rng: random.Random) -> tuple[str, str]:
    """(kind, prompt): arithmetic word problems, percentages, equations, units, sequences, geometry."""
    kind = rng.choice(
        [
            "items",
            "percent",
            "linear",
            "speed",
            "area",
            "sequence",
            "average",
            "fraction",
            "interest",
            "arith",
            "ratio",
            "minutes",
        ]
    )
    a, b, c = rng.randint(2, 60), rng.randint(2, 40), rng.randint(2, 12)
    n1, n2 = rng.sample(NAMES, 2)
    obj = rng.choice(OBJECTS)
    if kind == "items":
        p = f"{n1} has {a} {obj}. {n2} gives {n1} {b} more, and then {n1} shares them equally among {c} friends. How many {obj} does each friend get, and how many are left over?"
    elif kind == "percent":
        p = f"A jacket costs ${a * 5}. It is on sale for {rng.choice([10, 15, 20, 25, 30, 40])}% off. What is the sale price? Show your working."
    elif kind == "linear":
        p = f"Solve for x: {c}x + {a} = {c * b + a}. Explain each step."
    elif kind == "speed":
        p = f"A train travels {a * 10} km in {c} hours. What is its average speed in km/h, and how far would it go in {b} hours at that speed?"
    elif kind == "area":
        p = f"A rectangle is {a} cm long and {b} cm wide. What are its area and its perimeter?"
    elif kind == "sequence":
        p = f"What are the next three numbers in the sequence {a}, {a + c}, {a + 2 * c}, {a + 3 * c}, ...? Explain the rule."
    elif kind == "average":
        xs = [rng.randint(40, 100) for _ in range(rng.randint(3, 6))]
        p = f"{n1}'s test scores are {', '.join(map(str, xs))}. What is the average score?"
    elif kind == "fraction":
        p = f"What is {a}/{a + b} + {c}/{c + 3}? Give the answer as a simplified fraction."
    elif kind == "interest":
        p = f"If I invest ${a * 100} at {c}% simple interest per year, how much interest do I earn after {rng.randint(2, 9)} years?"
    elif kind == "arith":
        p = f"Calculate {a * 17} x {b + 3} - {c * 11} step by step."
    elif kind == "ratio":
        p = f"{n1} and {n2} share {a * (c + 2)} {obj} in the ratio {c}:2. How many does each get?"
    else:
        p = f"A recipe takes {a} minutes to prepare and {b + 10} minutes to cook. If {n1} starts at 5:{rng.randint(10, 59)} pm, when will the meal be ready?"
    return kind, p


# -- reasoning (seeded random names and orderings) -----------------------------------------------------------
def reasoning_prompt(rng: random.Random) -> tuple[str, str]:
    kind = rng.choice(["order", "syllogism", "days", "truth", "family", "schedule", "explain"])
    if kind == "order":
        names = rng.sample(NAMES, 4)
        adj = rng.choice(["taller", "older", "faster", "heavier"])
        facts = [f"{names[i]} is {adj} than {names[i + 1]}" for i in range(3)]
        rng.shuffle(facts)
        p = f"{'. '.join(facts)}. Who is the {adj.replace('er', 'est')}? Explain your reasoning."
    elif kind == "syllogism":
        x, y = rng.sample(["cats", "birds", "teachers", "robots", "painters", "runners", "gardeners"], 2)
        z = rng.choice(["curious", "careful", "friendly", "patient", "quick"])
        p = f"All {x} are {z}. Some {y} are {x}. Can we conclude that some {y} are {z}? Explain step by step."
    elif kind == "days":
        d = rng.choice(["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"])
        p = f"If today is {d}, what day of the week will it be in {rng.randint(3, 100)} days? Explain how you worked it out."
    elif kind == "truth":
        a, b = rng.sample(NAMES, 2)
        p = f"{a} says: '{b} always lies.' {b} says: '{a} and I both tell the truth.' Who is telling the truth? Reason carefully."
    elif kind == "family":
        a, b = rng.sample(NAMES, 2)
        p = f"{a} is {b}'s mother's only child's child. What is {a}'s relationship to {b}? Explain."
    elif kind == "schedule":
        a, b, c = rng.sample(NAMES, 3)
        p = (
            f"{a} can meet on Monday or Wednesday, {b} on Wednesday or Friday, and {c} on Monday, Wednesday or "
            f"Friday. On which day can all three meet? Explain."
        )
    else:
        t = rng.choice(TOPICS)
        p = f"Think step by step: what are the likely causes and effects of {t} becoming very popular?"
    return kind, p


def compose(n_per_category: int = 3000, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """(training prompts, held-out prompts); each {"id", "category", "text", "source", "template"}.

    Training prompts are distinct; held-out prompts share no template with training and no topic
    (chat, code) and, for math, come from a generator seeded apart (checked distinct)."""
    rng = random.Random(seed)
    train: list[dict] = []
    held: list[dict] = []
    seen: set[str] = set()

    counts: dict[str, int] = {}

    def add(lst, cat, text, source, template):
        if text in seen:
            return
        seen.add(text)
        if lst is train:
            counts[cat] = counts.get(cat, 0) + 1
        lst.append(
            {"id": f"{cat}-{len(lst):05d}", "category": cat, "text": text, "source": source, "template": template}
        )

    topics_train = [t for t in TOPICS if not topic_is_held_out(t)]
    topics_held = [t for t in TOPICS if topic_is_held_out(t)]
    funcs = stdlib_functions()
    funcs_train = [f for f in funcs if not topic_is_held_out(f"{f[0]}.{f[1]}")]
    funcs_held = [f for f in funcs if topic_is_held_out(f"{f[0]}.{f[1]}")]

    def count(cat):
        return counts.get(cat, 0)

    for cat in ("chat", "instructions", "writing"):
        pairs = [(ti, t) for ti in range(len(TRAIN_TEMPLATES[cat])) for t in topics_train]
        rng.shuffle(pairs)
        for ti, t in pairs:
            if count(cat) >= n_per_category:
                break
            add(
                train,
                cat,
                TRAIN_TEMPLATES[cat][ti].format(t=t),
                "dflash-studio-templates+dflash-studio-topics",
                f"{cat}/{ti}",
            )
    code_pairs = [(ti, f) for ti in range(len(TRAIN_TEMPLATES["code"])) for f in funcs_train]
    rng.shuffle(code_pairs)
    for ti, (mod, fn, doc) in code_pairs:
        if count("code") >= n_per_category:
            break
        add(
            train,
            "code",
            TRAIN_TEMPLATES["code"][ti].format(mod=mod, fn=fn, doc=doc),
            "dflash-studio-templates+cpython-stdlib",
            f"code/{ti}",
        )
    for cat, gen in (("math", math_prompt), ("reasoning", reasoning_prompt)):
        tries = 0
        while count(cat) < n_per_category and tries < 20 * n_per_category:
            tries += 1
            kind, text = gen(rng)
            add(train, cat, text, "dflash-studio-templates+seeded-random", f"{cat}/{kind}")

    # held out: own templates x held-out topics; math from its own seed, distinct from training
    hrng = random.Random(seed + 1_000_003)
    for ti, tmpl in enumerate(HELD_OUT_TEMPLATES["chat"]):
        for t in topics_held[:4]:
            add(held, "chat", tmpl.format(t=t), "dflash-studio-templates+dflash-studio-topics", f"held-chat/{ti}")
    for ti, tmpl in enumerate(HELD_OUT_TEMPLATES["code"]):
        for mod, fn, doc in funcs_held[:6]:
            add(
                held,
                "code",
                tmpl.format(mod=mod, fn=fn, doc=doc),
                "dflash-studio-templates+cpython-stdlib",
                f"held-code/{ti}",
            )
    n_math = 0
    while n_math < 16:
        kind, text = math_prompt(hrng)
        if text not in seen:
            add(held, "math", text, "dflash-studio-templates+seeded-random", f"held-math/{kind}")
            n_math += 1
    return train, held
