"""Status bar: backend (CPU, or CUDA with the GPU's name), loaded pair, live tok/s, memory, and
whether speculation pays: the measured commit length next to the break-even one."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QLabel, QPushButton, QStatusBar

from ..common.file_names import short_path
from ..common.plain_text import plain, plain_tip


def backend_text() -> str:
    """'CPU' or 'CUDA · <GPU name>', from what the engine build recorded and the devices it sees."""
    try:
        from engine_bridge.runtime import llama_ffi

        backend = str(llama_ffi.build_info().get("backend", "cpu")).upper()
        gpus = llama_ffi.gpus() if hasattr(llama_ffi, "gpus") else []
    except Exception as exc:  # noqa: BLE001 - the engine may be missing; the bar says so
        return f"engine unavailable ({type(exc).__name__})"
    if gpus:
        names = ", ".join(g.get("description") or g.get("name", "GPU") for g in gpus)
        return f"{backend} · {names}"
    return backend


def backend_tip() -> str:
    """The backend label's tooltip: what the engine's CPU code was built for, and, for a portable engine
    on a CPU with AMX-INT8 (the one-file bundle's there), that an engine built on it runs faster."""
    from engine_bridge.runtime.cpu_build import engine_cpu_build

    built, advice = engine_cpu_build()
    return f"CPU code built for {built}" + (f"\n{advice}" if advice else "")


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def speed_ratio(commit: float, break_even: float) -> str:
    """A step's speed against the target alone (commit / break-even), as a user reads it: 0.15×."""
    return f"{commit / break_even:.2g}×"


class StudioStatusBar(QStatusBar):
    #: the user clicked "switch to auto" (speculation is slower here than the target alone)
    switchToAutoRequested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("statusBar")
        self.backend = QLabel(self, objectName="statusBackend")
        self.pair = QLabel("no pair loaded", self, objectName="statusPair")
        self.speed = QLabel("– tok/s", self, objectName="statusTokPerS")
        self.memory = QLabel("", self, objectName="statusMemory")
        self.break_even = QLabel("", self, objectName="statusBreakEven")
        plain(self.backend, self.pair, self.break_even)  # file and model names are text
        # fixed widths for the live figures: a label that resized on every update would re-layout the bar
        self.speed.setMinimumWidth(90)
        self.memory.setMinimumWidth(90)
        # one click from "speculation is slower here" to the mode that falls back to AR when it is
        self.switch_to_auto = QPushButton("switch to auto", self, objectName="switchToAutoButton")
        self.switch_to_auto.setFlat(True)
        self.switch_to_auto.setStyleSheet("color: #1a5fb4; text-decoration: underline; padding: 0 2px;")
        self.switch_to_auto.setToolTip(
            "Verify mode 'auto' picks AR, chain or tree and the budget per step from what "
            "a step costs on this machine: the target alone when speculation does not pay"
        )
        self.switch_to_auto.hide()
        self.switch_to_auto.clicked.connect(self.switchToAutoRequested)
        for w in (self.backend, self.pair, self.speed, self.break_even, self.switch_to_auto, self.memory):
            self.addPermanentWidget(w)

    def set_backend(self, text: str, tip: str = "") -> None:
        self.backend.setText(text)
        self.backend.setToolTip(plain_tip(tip))

    def set_pair(self, target: str | None, drafter: str | None) -> None:
        if not target:
            self.pair.setText("no pair loaded")
            return
        # folder/name: a swapped variant or another folder's drafter.gguf reads differently
        text = short_path(target) + (f" + {short_path(drafter)}" if drafter else " (no drafter)")
        self.pair.setText(text)
        self.pair.setToolTip(plain_tip(f"target: {target}\ndrafter: {drafter or '—'}"))

    def set_tok_per_s(self, value: float) -> None:
        self.speed.setText(f"{value:.1f} tok/s")

    def set_memory(self, memory: dict | None) -> None:
        if not memory:
            self.memory.setText("")
            return
        weights = sum(v for k, v in memory.items() if k.endswith("_weights"))
        context = sum(v for k, v in memory.items() if k.endswith("_context"))
        self.memory.setText(f"mem {human_bytes(memory.get('process_rss', 0))}")
        self.memory.setToolTip(
            f"process resident: {human_bytes(memory.get('process_rss', 0))}\n"
            f"weights: {human_bytes(weights)}\ncontexts (KV): {human_bytes(context)}"
        )

    def set_break_even(self, commit: float, break_even: float, label: str = "", mode: str = "") -> None:
        """Measured commit length vs the break-even one (engine_bridge.runtime.breakeven) for ``label``
        (e.g. "chain 7") in verify ``mode``; break_even <= 0 (no cost table measured yet) clears it.
        When speculation is measured slower than the target alone, the bar says so in words and, unless
        the mode is auto already, offers the switch to auto."""
        self.switch_to_auto.hide()
        if break_even <= 0:
            self.break_even.setText("")
            self.break_even.setToolTip("")
            return
        pays = commit > break_even
        measured = f"{commit:.2f}" if commit > 0 else "–"  # 0: not measured yet
        numbers = f"commit {measured} / break-even {break_even:.2f}"
        if commit > 0 and not pays:
            self.break_even.setText(
                f"speculation is slower here: {speed_ratio(commit, break_even)}"
                + (f" ({label})" if label else "")
                + (" —" if mode != "auto" else "")
            )
            self.switch_to_auto.setVisible(mode != "auto")
        else:
            self.break_even.setText(numbers + (f" ({label})" if label else ""))
        self.break_even.setStyleSheet("color: #1a7f37;" if pays else "color: #b35900;")
        cost = (
            f"A {label or 'speculative'} step costs as much time as {break_even:.2f} autoregressive steps "
            f"here, so it must commit more than {break_even:.2f} tokens to be faster than the target alone."
        )
        seen = (
            f"Measured: {commit:.2f} tokens per step — speculation {'pays' if pays else 'does not pay'}."
            if commit > 0
            else "Its commit length is not measured yet."
        )
        hint = "" if pays else " Verify mode 'auto' switches to autoregressive when it does not."
        self.break_even.setToolTip(f"{numbers}\n{cost}\n{seen}{hint}")
