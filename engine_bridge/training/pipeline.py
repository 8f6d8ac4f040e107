"""Target then drafter in one process (one GPU call), with a log file next to the weights.

python -m engine_bridge.training.pipeline --data DIR --out DIR --target-seconds 280 --drafter-seconds 170
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--preset", default="base")
    ap.add_argument("--target-seconds", type=float, default=280)
    ap.add_argument("--drafter-seconds", type=float, default=170)
    ap.add_argument("--target-batch", type=int, default=64)
    ap.add_argument("--target-lr", type=float, default=2e-3)
    ap.add_argument("--drafter-layers", type=int, default=2)
    ap.add_argument("--drafter-batch", type=int, default=64)
    ap.add_argument("--gen-seconds", type=float, default=50)
    ap.add_argument("--n-seq", type=int, default=16384)
    ap.add_argument("--length", type=int, default=512)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args(argv)
    import torch

    from . import train_drafter, train_target

    if a.threads:
        torch.set_num_threads(a.threads)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    logf = open(out / "train-log.txt", "a")

    def log(msg: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        print(line, flush=True)
        logf.write(line + "\n")
        logf.flush()

    t0 = time.time()
    target = train_target.train(
        a.data, out, seconds=a.target_seconds, preset=a.preset, batch=a.target_batch, lr=a.target_lr, log=log
    )
    train_drafter.train(
        a.data,
        out,
        out,
        seconds=a.drafter_seconds,
        n_layer=a.drafter_layers,
        batch=a.drafter_batch,
        length=a.length,
        n_seq=a.n_seq,
        gen_seconds=a.gen_seconds,
        target=target,
        log=log,
    )
    log(f"pipeline done in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
