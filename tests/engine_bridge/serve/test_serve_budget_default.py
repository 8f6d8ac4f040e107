"""A request's budget when it names none: the server's, unless the request picks another mode and the
server was started without --budget; then that mode's own default (the server reads them once, as
``Defaults.mode_budgets``), so that a GPU build serving chain 5 does not run a request's tree at 5
(its top-k on the host there)."""

from __future__ import annotations

import pytest

from engine_bridge.runtime import default_mode as dm
from engine_bridge.runtime import llama_ffi
from engine_bridge.runtime.config import MODES
from engine_bridge.serve.protocol import ApiError, Defaults, Limits, parse_request

LIM = Limits(has_drafter=True, max_draft=15, tree_nodes=32, n_ctx=2048)


def _budget(body_spec, d: Defaults) -> tuple[str, int]:
    body = {"prompt": "def f():", "max_tokens": 4}
    if body_spec is not None:
        body["speculative"] = body_spec
    req = parse_request("completion", body, ("m",), d, LIM)
    return req.settings.mode, req.settings.budget


def test_another_mode_without_a_budget_gets_its_own_default(monkeypatch):
    monkeypatch.setattr(llama_ffi, "build_info", lambda: {"backend": "cuda"})  # a GPU build: chain 5
    d = Defaults(mode="chain", budget=5, mode_budgets=tuple((m, dm.default_budget(m)) for m in MODES))
    assert _budget(None, d) == ("chain", 5)
    assert _budget({"mode": "chain"}, d) == ("chain", 5)
    assert _budget({"mode": "tree"}, d) == ("tree", 7)
    assert _budget({"mode": "auto"}, d) == ("auto", 7)
    assert _budget({"mode": "tree", "budget": 3}, d) == ("tree", 3)


def test_a_budget_the_server_was_given_holds_for_every_mode():
    d = Defaults(mode="chain", budget=5)  # --budget 5
    assert _budget({"mode": "tree"}, d) == ("tree", 5)
    assert _budget({"mode": "auto"}, d) == ("auto", 5)


def test_a_bad_budget_is_still_refused_with_its_field():
    d = Defaults(mode="chain", budget=7)
    with pytest.raises(ApiError) as e:
        _budget({"mode": "tree", "budget": 0}, d)
    assert (e.value.status, e.value.param) == (400, "speculative.budget")
