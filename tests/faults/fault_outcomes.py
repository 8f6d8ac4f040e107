"""How fault cases report, for the tests (which assert) and benchmarks/faults.py (which counts).

A case either raises (the user saw the wrong thing, or something was lost: a failure) or returns
an Outcome: ``refused`` (the fault met a clear, typed error and nothing changed) or ``recovered``
(the fault happened and the system carried on: a cancelled run left a lossless engine, a killed
writer left a store that opens with every committed row). ``lost`` counts committed things that
went missing; every case asserts it is 0, and the benchmark reports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

REFUSED, RECOVERED = "refused", "recovered"


@dataclass
class Outcome:
    case: str
    kind: str  # REFUSED | RECOVERED
    message: str = ""  # what the user saw
    lost: int = 0
    figures: dict = field(default_factory=dict)


@dataclass
class Tally:
    family: str
    tried: int = 0
    refused: int = 0
    recovered: int = 0
    lost: int = 0
    failed: int = 0
    failures: list[str] = field(default_factory=list)
    figures: dict = field(default_factory=dict)

    def add(self, outcome: Outcome) -> None:
        self.tried += 1
        self.lost += outcome.lost
        if outcome.kind == REFUSED:
            self.refused += 1
        elif outcome.kind == RECOVERED:
            self.recovered += 1
        else:
            raise ValueError(outcome.kind)

    def fail(self, case: str, exc: BaseException) -> None:
        self.tried += 1
        self.failed += 1
        self.failures.append(f"{case}: {type(exc).__name__}: {exc}")

    def run(self, case: str, fn, *args, **kwargs) -> Outcome | None:
        """Runs one case, counting it whatever happens (the benchmark's loop)."""
        try:
            out = fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - a failing case is a figure, not a crash
            self.fail(case, exc)
            return None
        self.add(out)
        return out
