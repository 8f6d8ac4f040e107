"""The embedded demo pair: what a new user chats with before choosing models.

Until a trained reference pair ships in resources/models/, the demo pair is a generated tiny
qwen3 target with a DFlash drafter (engine_bridge.synth), written once into the user's data
folder from fixed seeds, so it is the same on every machine and works offline.
"""

from __future__ import annotations

from pathlib import Path

from . import synth
from .paths import data_dir
from .resources import resource

#: Bump when the generated demo pair changes, so old copies are rewritten.
DEMO_VERSION = 1


def shipped_pair() -> tuple[Path, Path] | None:
    """A pair shipped in resources/models/ (target.gguf + drafter.gguf), if there is one."""
    folder = resource("models")
    t, d = folder / "target.gguf", folder / "drafter.gguf"
    return (t, d) if t.exists() and d.exists() else None


def demo_pair(folder: Path | None = None) -> tuple[Path, Path]:
    """The pair ``make run`` opens when no other pair is configured."""
    shipped = shipped_pair()
    if shipped is not None:
        return shipped
    folder = Path(folder) if folder else data_dir() / "demo" / f"v{DEMO_VERSION}"
    target, drafter = folder / "demo-target.gguf", folder / "demo-dflash.gguf"
    if not (target.exists() and drafter.exists()):
        tmp = folder / ".writing"
        t, d = synth.write_pair(tmp, synth.TargetSpec(name="DFlash Studio demo target"),
                                synth.DrafterSpec(name="DFlash Studio demo drafter"), stem="demo")
        folder.mkdir(parents=True, exist_ok=True)
        t.replace(target)   # rename last: a half-written pair is never picked up
        d.replace(drafter)
        tmp.rmdir()
    return target, drafter
