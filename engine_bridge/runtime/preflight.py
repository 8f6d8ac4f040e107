"""What the engine needs from the layer above before llama.cpp loads anything.

runtime imports only ``common``. The pairing checks (a pair that would make llama.cpp abort is
refused with a reason) and the drafter's default place on several GPUs read model headers, which
is the ``models`` layer's work: ``engine_bridge.models.pair_preflight.PAIR_PREFLIGHT`` does both.
The caller of ``Engine.load`` / ``open_engine`` hands that object down (``preflight=``); the engine
keeps it for ``swap_drafter`` and ``set_adapters``, and it crosses to the engine's child process
(RPC) by pickle, as a module-level instance, i.e. by reference.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..common.errors import EngineError

if TYPE_CHECKING:
    from ..common.placement import Placement
    from .config import EngineConfig


class Preflight(Protocol):
    def check(self, config: "EngineConfig", gpus: list[dict]):
        """The pairing report for ``config`` with the layers offloaded to ``gpus``; raises
        IncompatiblePairError (carrying the report) when a check fails."""

    def draft_placement(self, config: "EngineConfig", gpus: list[dict]) -> "Placement":
        """Where the drafter goes on several GPUs when ``config`` names no placement for it."""


def missing() -> EngineError:
    """The error for a caller that asked for the checks without handing them over: a programming
    error, said plainly instead of loading a pair nobody checked."""
    return EngineError(
        "the engine was asked to check the pair but was given no checks: pass "
        "preflight=engine_bridge.models.pair_preflight.PAIR_PREFLIGHT (or check=False)"
    )
