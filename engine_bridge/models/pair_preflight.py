"""The engine's pre-flight, from the models layer: the pairing checks before llama.cpp loads a pair,
and the drafter's default place on several GPUs. Callers of ``Engine.load`` / ``open_engine`` pass
``preflight=PAIR_PREFLIGHT``; runtime itself imports only ``common`` (engine_bridge.runtime.preflight
describes what the engine asks of it).
"""

from __future__ import annotations

from ..common.errors import IncompatiblePairError
from ..common.placement import Placement
from . import compat


class PairPreflight:
    """Stateless; pickled by reference into the engine's child process."""

    def check(self, config, gpus: list[dict]):
        report = compat.check(
            config.target,
            config.draft,
            adapters=[p for p, _ in config.adapters],
            kv=config.target_kv,
            draft_kv=config.draft_kv if config.draft else None,
            flash_attn=config.flash_attn,
            gpus=gpus,
            placement=config.target_placement,
            draft_placement=config.draft_placement,
            n_gpu_layers=config.n_gpu_layers,
            draft_n_gpu_layers=config.draft_n_gpu_layers,
            n_ctx=config.n_ctx or None,
        )
        if not report.ok:
            raise IncompatiblePairError(report.summary(), report)
        return report

    def draft_placement(self, config, gpus: list[dict]) -> Placement:
        # all of the drafter on the GPU that holds the target's output (its features and lm_head)
        return compat.default_draft_placement(config.target, config.target_placement, gpus, config.n_gpu_layers)


PAIR_PREFLIGHT = PairPreflight()
