"""Answers the settings panel's "can this K/V pair run?" from the model library's pairing check.

It holds the inspected target and drafter (ModelInfo) and asks ``compat.check`` about one KV
choice at a time, reading back the ``kv_types_target`` / ``kv_types_drafter`` row, so the rules
(quantised V needs flash attention, block sizes that must divide head_dim, MLA, the CUDA kernels
this build compiled) are compat's alone. Answers are memoised per model pair.
"""

from __future__ import annotations

from engine_bridge.runtime.config import KVTypes


class KVAdvisor:
    def __init__(self):
        self.target_info = None
        self.drafter_info = None
        self._memo: dict = {}

    def set_models(self, target_info, drafter_info) -> None:
        self.target_info, self.drafter_info = target_info, drafter_info
        self._memo.clear()

    def verdict(self, which: str, k: str, v: str, flash_attn: str) -> tuple[str, str]:
        """(PASS | WARN | FAIL, reason) for KV types k/v on the target or the drafter."""
        key = (which, k, v, flash_attn)
        if key not in self._memo:
            self._memo[key] = self._ask(which, KVTypes(k, v), flash_attn)
        return self._memo[key]

    def _ask(self, which: str, kv: KVTypes, flash_attn: str) -> tuple[str, str]:
        from engine_bridge.models import compat

        t, d = self.target_info, self.drafter_info
        if t is None or (which == "drafter" and d is None):
            return "PASS", ""  # nothing to judge against yet: every choice stays open
        if which == "target":
            row = compat.check(t, None, kv=kv, flash_attn=flash_attn).get("kv_types_target")
        else:
            row = compat.check(t, d, kv=KVTypes(), draft_kv=kv, flash_attn=flash_attn).get("kv_types_drafter")
        if row is None:
            return "PASS", ""
        return row.status, row.reason + (f" — {row.fix}" if row.fix and row.status != "PASS" else "")
