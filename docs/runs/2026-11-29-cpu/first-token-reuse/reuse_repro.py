"""Tree 7 with DFLASH_TREE_FIXED_OUTPUTS 0 / 1, without and with a reset between runs, on the branch
first-token-prefill (commit e84c8cd): docs/design/first-token-from-prefill.md. Output beside it."""

import os
from engine_bridge.models import registry_models
from engine_bridge.models.demo import smollm2_drafter
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime import generation
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

P = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?"
)
eng = Engine.load(
    EngineConfig(target=registry_models.cached(), draft=smollm2_drafter(), n_ctx=1024, n_threads=2),
    preflight=PAIR_PREFLIGHT,
)
toks = eng.tokenize_chat([{"role": "user", "content": P}])
out = {}
for reset in (False, True):
    for fixed in ("0", "1"):
        os.environ[generation.TREE_FIXED_OUTPUTS_ENV] = fixed
        if reset:
            eng.reset()
        r = eng.generate(toks, GenerationSettings(mode="tree", budget=7, max_tokens=96))
        out[(reset, fixed)] = r.tokens
        print(reset, fixed, len(r.tokens), r.summary.n_prompt_reused)
print("no reset equal:", out[(False, "0")] == out[(False, "1")], "reset equal:", out[(True, "0")] == out[(True, "1")])
