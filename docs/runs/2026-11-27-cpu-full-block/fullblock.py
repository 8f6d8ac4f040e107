import json, os, sys, time, collections
from engine_bridge.runtime.engine import Engine
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime import drafter as D
M=os.path.expanduser("~/.local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf")
eng = Engine.load(EngineConfig(target=M, draft="resources/models/smollm2/drafter.gguf", n_ctx=2048, n_threads=2), check=False)
rows=[json.loads(l) for l in open("resources/models/smollm2/prompts.jsonl") if l.strip()]
bycat=collections.defaultdict(list)
for r in rows: bycat[r["category"]].append(r)
sel=[r for c in sorted(bycat) for r in bycat[c][:int(sys.argv[1])]]
print("prompts", len(sel), {c: min(len(v), int(sys.argv[1])) for c,v in bycat.items()}, flush=True)
res=collections.defaultdict(lambda: [0,0])
t0=time.time()
for r in sel:
    toks = eng.tokenize_chat(r["messages"][:1])
    for mode,b in (("chain",7),("tree",7)):
        outs=[]
        for full in (False, True):
            D.FULL_BLOCK = full
            g = eng.generate(toks, GenerationSettings(mode=mode, budget=b, max_tokens=int(sys.argv[2]) if len(sys.argv) > 2 else 96))
            k=(r["category"],mode,b,full); res[k][0]+=len(g.tokens); res[k][1]+=len(g.steps); outs.append(g.tokens)
        assert outs[0]==outs[1], "tokens differ"
print("secs", int(time.time()-t0))
for k in sorted(res): print(k, "commit %.3f" % (res[k][0]/res[k][1]))
