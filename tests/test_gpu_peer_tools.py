"""gpu/gpu_peer_tools.sh: the switches that make upstream's drivers run as upstream on our patched ggml.

The peer runs (ours against upstream's `llama-speculative-simple`, llama-bench) set every switch its
`env` prints. A patch that adds a switch changing upstream's behaviour must be listed there, or the
"upstream" figures silently include our change; these tests fail until it is, or until it is named
below with the reason it needs no switch in a peer run.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "gpu" / "gpu_peer_tools.sh"

#: switches a peer run leaves unset, and why
NOT_FOR_PEERS = {
    "DFLASH_GRAPH_STATS": "0001: diagnostics, off unless set",
    "DFLASH_AMX_TILES": "0020/0021: CPU AMX builds only, off unless set",
    "DFLASH_EXACT_FUSION": "0016: acts only in a batch-invariant context, which the engine alone asks for",
    "DFLASH_ROW_SLOT_WAYS": "0019: acts only on the row slots the engine asks for (llama_set_row_slots)",
    "DFLASH_VERIFY_VEC_KV": "0022: the length limit of DFLASH_VERIFY_KERNELS's path, which the peer turns off",
}


def _peer_env() -> dict[str, str]:
    out = subprocess.run(["bash", str(SCRIPT), "env"], capture_output=True, text=True, check=True).stdout.strip()
    assert out.startswith("export "), out
    return dict(kv.split("=", 1) for kv in out[len("export ") :].split())


def _patch_switches() -> set[str]:
    found: set[str] = set()
    for p in sorted((ROOT / "packaging" / "patches").glob("*.patch")):
        found |= set(re.findall(r'getenv\("(DFLASH_[A-Z0-9_]+)"\)', p.read_text()))
    return found


def test_every_patch_switch_is_set_for_the_peer_or_named_with_its_reason():
    env, switches = _peer_env(), _patch_switches()
    assert switches, "no getenv switch found in packaging/patches"
    missing = sorted(s for s in switches if s not in env and s not in NOT_FOR_PEERS)
    assert not missing, f"patch switches the peer runs leave at our behaviour: {missing}"


def test_the_peer_sets_only_switches_that_exist():
    stale = sorted(set(_peer_env()) - _patch_switches())
    assert not stale, f"gpu_peer_tools.sh env sets switches no patch reads: {stale}"
    assert not set(NOT_FOR_PEERS) - _patch_switches()


def test_the_build_needs_an_engine_and_names_what_is_missing(tmp_path):
    proc = subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path / "peer.tgz"), str(tmp_path / "w")],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "ENGINE_LIB": str(tmp_path / "nolib")},
        cwd=ROOT,
    )
    assert proc.returncode != 0 and "no libggml.so in" in proc.stderr
