"""A real server on 127.0.0.1 (a free port) over the 15.7 M reference pair in resources/models/,
and a second engine on the same pair for the headless reference outputs."""

from __future__ import annotations

import pytest

from engine_bridge.models.demo import reference_pair
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
from engine_bridge.serve.binding import resolve_binding
from engine_bridge.serve.protocol import Defaults
from engine_bridge.serve.server import Server

from serve_util import BUDGET, MODE, QUEUE


def pair_config() -> EngineConfig:
    pair = reference_pair()
    if pair is None:
        pytest.fail("the reference pair resources/models/target.gguf + drafter.gguf is missing")
    return EngineConfig(target=pair[0], draft=pair[1], n_ctx=1024, n_threads=1)


@pytest.fixture(scope="session")
def serve_engine():
    eng = Engine.load(pair_config(), preflight=PAIR_PREFLIGHT)
    yield eng
    eng.close()


@pytest.fixture(scope="session")
def q4_variant(tmp_path_factory):
    """A q4_0 variant of the reference drafter, as `dflash-studio quantize` writes it."""
    from engine_bridge.models.convert_quant import quantize_drafter

    return quantize_drafter(pair_config().draft, tmp_path_factory.mktemp("variants") / "drafter-q4_0.gguf", "q4_0")


@pytest.fixture(scope="session")
def served(serve_engine, q4_variant):
    """The server the tests talk to: chain 7 by default, greedy, QUEUE requests may wait, one
    draft variant (drafter-q4_0) a request may ask for."""
    srv = Server(
        serve_engine,
        resolve_binding("127.0.0.1", 0, None, {}),
        Defaults(mode=MODE, budget=BUDGET),
        max_waiting=QUEUE,
        variants=[q4_variant],
    ).start_in_thread()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def reference():
    """generate(prompt, settings) -> text from an engine of its own: what `dflash-studio generate` prints."""
    eng = Engine.load(pair_config(), preflight=PAIR_PREFLIGHT)

    def run(prompt: str, max_tokens: int, chat: bool = False, mode: str = MODE, budget: int = BUDGET) -> str:
        text = eng.format_chat([{"role": "user", "content": prompt}]) if chat else prompt
        return eng.generate(text, GenerationSettings(mode=mode, budget=budget, max_tokens=max_tokens)).text

    yield run
    eng.close()
