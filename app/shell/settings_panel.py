"""Settings: generation (next request), loading (needs a reload) and the drafter variant.

Every edit updates a ``StudioSettings`` and emits ``changed``; the main window saves it with
QSettings and decides, by comparing engine configs, whether the loaded engine still matches. When
it does not, ``show_pending`` puts up a banner naming what changed and a button that applies it
(a reload, or only a drafter swap) on request.

K/V cache types the build cannot run with the chosen model and flash-attention mode are disabled,
the reason in the item's tooltip. The rule is the model library's (compat's KV check); the panel
asks it through ``kv_verdict(which, k, v, flash_attn)``.
"""

from __future__ import annotations

import importlib.util
import threading
from typing import Callable

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from engine_bridge.common.placement import Placement
from engine_bridge.runtime.config import KV_TYPES, EngineConfig
from engine_bridge.runtime.default_mode import default_budget

from .app_settings import FLOAT_RANGES, INT_RANGES, StudioSettings, nonzero_floor

MODE_LABELS = {
    "chain": "chain (DFlash)",
    "tree": "tree (DFlash)",
    "ar": "autoregressive (target only)",
    "auto": "auto (fastest here: AR, chain or tree)",
}
WARN_MARK = " ⚠"


def tree_supported() -> bool:
    """Tree verification exists once the engine ships engine_bridge/runtime/tree.py or says so itself."""
    try:
        from engine_bridge.runtime import generation
    except ImportError:
        return False
    flag = getattr(generation, "TREE_SUPPORTED", None)
    if flag is not None:
        return bool(flag)
    return importlib.util.find_spec("engine_bridge.runtime.tree") is not None


#: kv_verdict(which: 'target'|'drafter', k, v, flash_attn) -> (status 'PASS'|'WARN'|'FAIL', reason)
KVVerdict = Callable[[str, str, str, str], tuple[str, str]]


class SettingsPanel(QScrollArea):
    changed = Signal(object)  # StudioSettings
    applyRequested = Signal()  # the banner's button: reload or swap, as the banner says
    rpcProbed = Signal(object)  # (endpoints, devices, problems) from the probe thread

    def __init__(self, settings: StudioSettings, parent=None):
        super().__init__(parent)
        self.setObjectName("settingsPanel")
        self.setWidgetResizable(True)
        self.settings = settings
        self.kv_verdict: KVVerdict | None = None
        self._updating = False
        body = QWidget(self)
        self.setWidget(body)

        # -- pending-change banner
        self.banner = QFrame(body, objectName="reloadBanner")
        self.banner.setStyleSheet("#reloadBanner { background: #fff4dc; border: 1px solid #e0b050; }")
        self.banner_text = QLabel("", self.banner, objectName="reloadBannerText")
        self.banner_text.setWordWrap(True)
        self.apply_button = QPushButton("Reload now", self.banner, objectName="reloadButton")
        self.apply_button.clicked.connect(self.applyRequested)
        bl = QHBoxLayout(self.banner)
        bl.addWidget(self.banner_text, 1)
        bl.addWidget(self.apply_button)
        self.banner.hide()

        # -- generation
        gen = QGroupBox("Generation (applies to the next message)", body)
        gf = QFormLayout(gen)
        self.mode = QComboBox(gen, objectName="modeCombo")
        modes = ["chain"] + (["tree"] if tree_supported() else []) + ["ar", "auto"]
        for m in modes:
            self.mode.addItem(MODE_LABELS[m], m)
        self.mode.setToolTip(
            "How drafts are verified. Tree verification appears here once the engine supports it.\n"
            "auto measures what a step costs on this machine (a few seconds, once per pair) and "
            "picks AR, chain or tree and the budget that is fastest with this pair's acceptance."
        )
        self.budget = _spin(
            gen, "budgetSpin", *INT_RANGES["budget"], "draft tokens per step (chain); node budget (tree)"
        )
        self.temperature = _dspin(gen, "temperatureSpin", *FLOAT_RANGES["temperature"], 0.05, 2, "0 = greedy")
        self.top_k = _spin(gen, "topKSpin", *INT_RANGES["top_k"], "0 = off")
        self.top_p = _dspin(gen, "topPSpin", *FLOAT_RANGES["top_p"], 0.05, 2, "1 = off")
        self.max_tokens = _spin(gen, "maxTokensSpin", *INT_RANGES["max_tokens"], "longest answer, in tokens")
        self.seed = _spin(gen, "seedSpin", *INT_RANGES["seed"], "sampling seed (temperature > 0)")
        gf.addRow("Verify mode", self.mode)
        gf.addRow("Budget", self.budget)
        gf.addRow("Temperature", self.temperature)
        gf.addRow("Top-k", self.top_k)
        gf.addRow("Top-p", self.top_p)
        gf.addRow("Max tokens", self.max_tokens)
        gf.addRow("Seed", self.seed)
        self.margins = _check(
            gen,
            "tokenMarginsCheck",
            "the target's top-2 margin in token tooltips",
            "Each committed token's tooltip shows how far the target's pick led its runner-up "
            "(logits): a parting from the target alone at a small margin is a near-tie of "
            "rounding. Reads the target's logits on the host every step: a little slower.",
        )
        gf.addRow("Token margins", self.margins)
        self.exact_phases = _check(
            gen,
            "exactPhasesCheck",
            "every phase ends at a device sync",
            "The profiler's phase times become exact: each step waits for the GPU after the "
            "drafter's inject. Off (the default), the inject runs while the next draft is queued, "
            "which is faster, and its GPU time shows in the draft phase. No effect on a CPU.",
        )
        gf.addRow("Exact phase times", self.exact_phases)

        # -- loading
        load = QGroupBox("Loading (a change needs a reload)", body)
        lf = QFormLayout(load)
        self.n_ctx = _spin(
            load,
            "nCtxSpin",
            *INT_RANGES["n_ctx"],
            "context size in tokens (0: the model's own length, capped by memory)",
        )
        self.n_ctx.setSpecialValueText("model's own")
        self.n_ctx.setSingleStep(1024)
        self.gpu_layers = _spin(
            load, "gpuLayersSpin", *INT_RANGES["n_gpu_layers"], "-1 = all layers (ignored by CPU builds)"
        )
        self.flash_attn = QComboBox(load, objectName="flashAttnCombo")
        for fa in ("auto", "on", "off"):
            self.flash_attn.addItem(fa, fa)
        self.exact = _check(
            load,
            "exactVerifyCheck",
            "token-identical to the target alone",
            "The exact verify: every verified row is computed as a one-token decode computes it "
            "(batch-invariant kernels, on CPU and on CUDA GPUs), so greedy chain and auto output is "
            "the target's own, token for token. On a GPU a tree may still part at a near-tie: "
            "docs/benchmarks.md.",
        )
        self.draft_window = _spin(
            load,
            "draftWindowSpin",
            *INT_RANGES["draft_window"],
            "The drafter sees only the last N cells of the conversation. The shipped drafter was "
            "trained on short conversations: over a whole long chat it drafts less and less, and "
            "with a window it keeps drafting (docs/benchmarks.md). 0 = the whole context. The "
            "target always sees everything, so the output does not change.",
        )
        self.draft_window.setSpecialValueText("whole context")
        self.draft_window.setSingleStep(128)
        self.kv = {}
        for which in ("target", "drafter"):
            for part in ("k", "v"):
                combo = QComboBox(load, objectName=f"{which}{part.upper()}Combo")
                for t in KV_TYPES:
                    combo.addItem(t, t)
                self.kv[(which, part)] = combo
        lf.addRow("Context size", self.n_ctx)
        lf.addRow("GPU layers", self.gpu_layers)
        lf.addRow("Flash attention", self.flash_attn)
        lf.addRow("Exact verify", self.exact)
        lf.addRow("Drafter window", self.draft_window)
        lf.addRow("Target K cache", self.kv[("target", "k")])
        lf.addRow("Target V cache", self.kv[("target", "v")])
        lf.addRow("Drafter K cache", self.kv[("drafter", "k")])
        lf.addRow("Drafter V cache", self.kv[("drafter", "v")])
        self.in_process = _check(
            load,
            "inProcessCheck",
            "Run the engine in the app's process",
            "Off (default): the engine runs in a child process, so a llama.cpp abort, a crash "
            "or the out-of-memory killer ends only it, and the window offers a reload. On: no "
            "inter-process streaming, but any of those ends the app. Applies at the next load.",
        )
        lf.addRow(self.in_process)

        # -- several GPUs: llama.cpp's split of the target, the drafter's GPU, and what each GPU holds
        gpu = QGroupBox("Several GPUs and RPC servers (a change needs a reload)", body)
        uf = QFormLayout(gpu)
        self.split_mode = QComboBox(gpu, objectName="splitModeCombo")
        for mode, label in (
            ("layer", "layer (whole layers per GPU)"),
            ("row", "row (rows of each matrix)"),
            ("none", "none (all on the main GPU)"),
        ):
            self.split_mode.addItem(label, mode)
        self.tensor_split = QLineEdit(gpu, objectName="tensorSplitEdit")
        self.tensor_split.setPlaceholderText("by free memory")
        self.tensor_split.setToolTip("share of the target's layers (or rows) per GPU, e.g. 3,1")
        self.main_gpu = _spin(
            gpu, "mainGpuSpin", *INT_RANGES["main_gpu"], "split none: the GPU; row: the GPU for the rest"
        )
        self.draft_gpu = _spin(
            gpu,
            "draftGpuSpin",
            *INT_RANGES["draft_gpu"],
            "the drafter's GPU; -1: the one holding the target's output (its features come from there)",
        )
        self.draft_gpu.setSpecialValueText("beside the target's output")
        self.rpc_edit = QLineEdit(gpu, objectName="rpcServersEdit")
        self.rpc_edit.setPlaceholderText("none (host:port, ...)")
        self.rpc_edit.setToolTip(
            "llama.cpp RPC servers (`dflash-studio rpc-server` on each machine): their devices "
            "take layers first, before this machine's GPUs; the engine then runs in a child "
            "process, so a lost server ends it, not the app"
        )
        self.split_error = QLabel("", gpu, objectName="splitError")
        self.split_error.setStyleSheet("color: #b00020;")
        self.split_error.setWordWrap(True)
        self.split_error.hide()
        self.devices_view = QLabel("", gpu, objectName="devicesView")
        self.devices_view.setWordWrap(True)
        self.devices_view.setTextInteractionFlags(Qt.TextSelectableByMouse)
        uf.addRow("Split mode", self.split_mode)
        uf.addRow("Tensor split", self.tensor_split)
        uf.addRow("Main GPU", self.main_gpu)
        uf.addRow("Drafter GPU", self.draft_gpu)
        uf.addRow("RPC servers", self.rpc_edit)
        uf.addRow(self.split_error)
        uf.addRow(self.devices_view)
        #: the GPUs to plan over: this build's (engine_bridge), replaceable where there are none to show
        self.gpu_source: Callable[[], list[dict]] = _offload_gpus
        #: the RPC servers' devices from the last probe (off the UI thread: a host may take seconds)
        self.rpc_devices: list[dict] = []
        self.rpc_problems: list[str] = []
        self._rpc_probed_for: tuple[str, ...] | None = None
        self.rpcProbed.connect(self._on_rpc_probed)

        # -- drafter variant
        var = QGroupBox("Drafter", body)
        vf = QFormLayout(var)
        self.variant = QComboBox(var, objectName="draftVariantCombo")
        self.variant.setToolTip(
            "The base drafter, a quantised variant of it, or the base with a LoRA adapter "
            "(from the library). Applied by swapping the drafter, without reloading the target."
        )
        vf.addRow("Draft variant", self.variant)

        lay = QVBoxLayout(body)
        lay.addWidget(self.banner)
        lay.addWidget(gen)
        lay.addWidget(load)
        lay.addWidget(gpu)
        lay.addWidget(var)
        lay.addStretch(1)

        self._variants: list[tuple[str, str, list]] = []  # (label, draft_variant, adapters)
        self.show_settings(settings)
        for w in (
            self.budget,
            self.top_k,
            self.max_tokens,
            self.seed,
            self.n_ctx,
            self.gpu_layers,
            self.main_gpu,
            self.draft_gpu,
        ):
            w.valueChanged.connect(self._edited)
        self.tensor_split.editingFinished.connect(self._edited)
        self.rpc_edit.editingFinished.connect(self._edited)
        for w in (self.temperature, self.top_p):
            w.valueChanged.connect(self._edited)
        self.in_process.toggled.connect(self._edited)
        for w in (self.mode, self.flash_attn, self.variant, self.split_mode, *self.kv.values()):
            w.currentIndexChanged.connect(self._edited)
        self.exact.toggled.connect(self._edited)
        self.draft_window.valueChanged.connect(self._edited)
        self.margins.toggled.connect(self._edited)
        self.exact_phases.toggled.connect(self._edited)

    # -- showing ----------------------------------------------------------------------------------
    def show_settings(self, s: StudioSettings) -> None:
        self._updating = True
        try:
            self.settings = s
            _select(self.mode, s.mode if self.mode.findData(s.mode) >= 0 else "chain")
            self.budget.setValue(s.budget)
            self.temperature.setValue(s.temperature)
            self.top_k.setValue(s.top_k)
            self.top_p.setValue(s.top_p)
            self.max_tokens.setValue(s.max_tokens)
            self.seed.setValue(s.seed)
            self.n_ctx.setValue(s.n_ctx)
            self.gpu_layers.setValue(s.n_gpu_layers)
            _select(self.flash_attn, s.flash_attn)
            self.exact.setChecked(s.exact_verify)
            self.draft_window.setValue(s.draft_window)
            self.margins.setChecked(s.token_margins)
            self.exact_phases.setChecked(s.exact_phases)
            _select(self.kv[("target", "k")], s.target_k)
            _select(self.kv[("target", "v")], s.target_v)
            _select(self.kv[("drafter", "k")], s.draft_k)
            _select(self.kv[("drafter", "v")], s.draft_v)
            _select(self.split_mode, s.split_mode)
            self.tensor_split.setText(s.tensor_split)
            self.main_gpu.setValue(s.main_gpu)
            self.draft_gpu.setValue(s.draft_gpu)
            self.rpc_edit.setText(s.rpc_servers)
            self.in_process.setChecked(s.engine_in_process)
            self._fill_variants()
        finally:
            self._updating = False
        self.refresh_kv()
        self.refresh_devices()

    def refresh_devices(self) -> None:
        """Each GPU's memory and what the target and drafter would hold there (from their GGUF
        headers, under the panel's split), with the pairing check's verdict when it cannot fit."""
        endpoints = self.settings.rpc_endpoints()
        if endpoints != self._rpc_probed_for:
            self._probe_rpc(endpoints)  # answers through rpcProbed, which refreshes again
        try:
            gpus = self.rpc_devices + self.gpu_source()
        except Exception as exc:  # noqa: BLE001 - the device list is advice; the app stays up
            self.devices_view.setText(f"GPUs: not read ({exc})")
            return
        if not gpus:
            self.devices_view.setText(
                "\n".join(self.rpc_problems + ["No GPU to offload to: every layer runs on the CPU."])
            )
            return
        lines = [
            f"GPU{i}  {g.get('description') or g.get('name')}: {g['memory_free'] / 2**30:.2f} GiB free of "
            f"{g.get('memory_total', g['memory_free']) / 2**30:.2f}"
            for i, g in enumerate(gpus)
        ]
        lines += self.rpc_problems
        s = self.settings
        if s.target:
            # the split check alone (device_plan over the two GGUF headers), not the whole pairing check
            from engine_bridge.models import compat

            cfg = s.engine_config()
            try:
                _, fits = compat.split_plan(
                    cfg.target,
                    cfg.draft,
                    gpus,
                    cfg.target_placement,
                    cfg.draft_placement,
                    n_gpu_layers=cfg.n_gpu_layers,
                    draft_n_gpu_layers=cfg.draft_n_gpu_layers,
                    n_ctx=cfg.n_ctx or None,
                    kv=cfg.target_kv,
                    draft_kv=cfg.draft_kv,
                )
            except Exception as exc:  # noqa: BLE001 - an unreadable file: the panel stays up and says so
                lines.append(f"Not planned: {exc}")
            else:
                held = fits.reason.split(": ", 1)[1] if fits.status == "PASS" else fits.reason
                lines += [("Fits" if fits.status == "PASS" else "Does not fit") + ":"]
                lines += ["  " + part for part in held.split("; ")]
                if fits.fix:
                    lines.append("  -> " + fits.fix)
        self.devices_view.setText("\n".join(lines))

    def _probe_rpc(self, endpoints: tuple[str, ...]) -> None:
        self._rpc_probed_for = endpoints
        if not endpoints:
            self.rpc_devices, self.rpc_problems = [], []
            return
        self.rpc_problems = [f"{ep}: asking ..." for ep in endpoints]

        def work():
            from engine_bridge.runtime import rpc

            devices, problems = [], []
            for ep in endpoints:
                try:
                    devices += [d.as_gpu() for d in rpc.probe(ep, timeout=2.0).devices]
                except rpc.RpcError as exc:
                    busy = " (a pair loaded on it holds the server)" if exc.reason == "busy" else ""
                    problems.append(f"{ep}: {exc.reason}{busy}: {exc}")
            try:
                self.rpcProbed.emit((endpoints, devices, problems))  # queued to the UI thread
            except RuntimeError:
                pass  # the panel was closed while the probe waited on a host

        threading.Thread(target=work, name="rpc-probe", daemon=True).start()

    @Slot(object)
    def _on_rpc_probed(self, answer) -> None:
        endpoints, devices, problems = answer
        if endpoints != self._rpc_probed_for:
            return  # an older probe, overtaken by an edit
        self.rpc_devices, self.rpc_problems = devices, problems
        self.refresh_devices()

    def set_variants(self, variants: list[tuple[str, str, list]]) -> None:
        """Drafter choices: (label, draft_variant path or '' for the base, adapters [[path, scale]])."""
        self._variants = list(variants)
        self._updating = True
        try:
            self._fill_variants()
        finally:
            self._updating = False

    def _fill_variants(self) -> None:
        s = self.settings
        self.variant.clear()
        base = [("base drafter" + (f": {_name(s.drafter)}" if s.drafter else " (none chosen)"), "", [])]
        entries = base + [v for v in self._variants if v[1] or v[2]]
        current = 0
        for i, (label, path, adapters) in enumerate(entries):
            self.variant.addItem(label, (path, adapters))
            if path == s.draft_variant and [list(a) for a in adapters] == [list(a) for a in s.adapters]:
                current = i
        self.variant.setCurrentIndex(current)
        self.variant.setEnabled(bool(s.drafter))

    # -- K/V availability -------------------------------------------------------------------------
    def cap_context(self, tokens: int | None) -> None:
        """Caps the context spin box at what memory holds for the chosen pair (None: the widget's
        own range); the tooltip says why."""
        top = INT_RANGES["n_ctx"][1]
        cap = top if tokens is None else max(16, min(top, tokens))
        self.n_ctx.setMaximum(cap)
        base = "context size in tokens (0: the model's own length, capped by memory)"
        self.n_ctx.setToolTip(
            base
            if cap == top
            else f"{base}; at most {cap:,} here: a larger KV cache and the weights would not fit "
            "in the memory available"
        )

    def refresh_kv(self) -> None:
        """Disables the K/V types that cannot run with the current K (or V) choice, with reasons."""
        fa = self.flash_attn.currentData()
        self._updating = True
        try:
            for which in ("target", "drafter"):
                kc, vc = self.kv[(which, "k")], self.kv[(which, "v")]
                k = kc.currentData()
                for i in range(vc.count()):
                    status, reason = self._verdict(which, k, vc.itemData(i), fa)
                    _set_item(vc, i, status, reason)
                # a K type is offered when some V type works with it
                for i in range(kc.count()):
                    verdicts = [self._verdict(which, kc.itemData(i), vc.itemData(j), fa) for j in range(vc.count())]
                    ok = [v for v in verdicts if v[0] != "FAIL"]
                    if ok:
                        _set_item(
                            kc,
                            i,
                            "WARN" if all(v[0] == "WARN" for v in ok) else "PASS",
                            "" if any(v[0] == "PASS" for v in ok) else ok[0][1],
                        )
                    else:
                        _set_item(kc, i, "FAIL", verdicts[0][1])
                if not _enabled(vc, vc.currentIndex()):  # the chosen V no longer works
                    for prefer in (k, "f16"):
                        j = vc.findData(prefer)
                        if j >= 0 and _enabled(vc, j):
                            vc.setCurrentIndex(j)
                            break
        finally:
            self._updating = False

    def _verdict(self, which: str, k: str, v: str, fa: str) -> tuple[str, str]:
        if self.kv_verdict is None:
            return "PASS", ""
        try:
            return self.kv_verdict(which, k, v, fa)
        except Exception as exc:  # noqa: BLE001 - an unknown answer must not disable choices
            return "PASS", f"not checked: {exc}"

    # -- editing ----------------------------------------------------------------------------------
    def _follow_mode_budget(self) -> None:
        """A budget still at the old mode's default takes the new mode's: a GPU build's chain runs 5,
        its tree 7 (below 7 a tree's top-k runs on the host; runtime.default_mode). A budget the user
        chose stays."""
        old_mode, new_mode = self.settings.mode, self.mode.currentData()
        if new_mode and new_mode != old_mode and self.budget.value() == default_budget(old_mode):
            self._updating = True  # one edit, reported once below
            try:
                self.budget.setValue(default_budget(new_mode))
            finally:
                self._updating = False

    def _edited(self, *args) -> None:
        if self._updating:
            return
        if self.sender() in (self.flash_attn, self.kv[("target", "k")], self.kv[("drafter", "k")]):
            self.refresh_kv()
        if self.sender() is self.mode:
            self._follow_mode_budget()
        variant, adapters = self.variant.currentData() or ("", [])
        split_text = self.tensor_split.text().strip()
        try:
            Placement.parse(self.split_mode.currentData(), split_text, self.main_gpu.value())
        except ValueError as exc:
            self.split_error.setText(str(exc))  # kept out of the settings until it reads
            self.split_error.show()
            split_text = self.settings.tensor_split
        else:
            self.split_error.hide()
        rpc_text = self.rpc_edit.text().strip()
        try:
            from engine_bridge.runtime.rpc import parse_endpoints

            parse_endpoints(rpc_text)
        except ValueError as exc:
            self.split_error.setText(str(exc))
            self.split_error.show()
            rpc_text = self.settings.rpc_servers
        s = self.settings.replace(
            mode=self.mode.currentData(),
            budget=self.budget.value(),
            temperature=self.temperature.value(),
            top_k=self.top_k.value(),
            top_p=self.top_p.value(),
            max_tokens=self.max_tokens.value(),
            seed=self.seed.value(),
            n_ctx=nonzero_floor("n_ctx", self.n_ctx.value()),
            n_gpu_layers=self.gpu_layers.value(),
            flash_attn=self.flash_attn.currentData(),
            exact_verify=self.exact.isChecked(),
            draft_window=nonzero_floor("draft_window", self.draft_window.value()),
            token_margins=self.margins.isChecked(),
            exact_phases=self.exact_phases.isChecked(),
            target_k=self.kv[("target", "k")].currentData(),
            target_v=self.kv[("target", "v")].currentData(),
            draft_k=self.kv[("drafter", "k")].currentData(),
            draft_v=self.kv[("drafter", "v")].currentData(),
            draft_variant=variant,
            adapters=[list(a) for a in adapters],
            split_mode=self.split_mode.currentData(),
            tensor_split=split_text,
            main_gpu=self.main_gpu.value(),
            draft_gpu=self.draft_gpu.value(),
            rpc_servers=rpc_text,
            engine_in_process=self.in_process.isChecked(),
        )
        self.settings = s
        if self.sender() in (
            self.split_mode,
            self.tensor_split,
            self.main_gpu,
            self.draft_gpu,
            self.n_ctx,
            self.gpu_layers,
            self.rpc_edit,
        ):
            self.refresh_devices()
        self.changed.emit(s)

    def show_pending(self, reload_fields: list[str], swap_fields: list[str]) -> None:
        """The banner: what differs from the loaded engine, and how the button applies it."""
        if reload_fields:
            self.banner_text.setText(
                "Changed since the pair was loaded: "
                + ", ".join(_field_names(reload_fields))
                + ". These take effect after a reload."
            )
            self.apply_button.setText("Reload now")
            self.banner.show()
        elif swap_fields:
            self.banner_text.setText(
                "Changed: "
                + ", ".join(_field_names(swap_fields))
                + ". Applied by swapping the drafter (the target stays loaded)."
            )
            self.apply_button.setText("Swap drafter")
            self.banner.show()
        else:
            self.banner.hide()


def _offload_gpus() -> list[dict]:
    from engine_bridge.runtime.engine import offload_gpus

    return offload_gpus(EngineConfig(target="x"))


FIELD_NAMES = {
    "rpc_servers": "RPC servers",
    "target_placement": "GPU split",
    "draft_placement": "drafter GPU",
    "n_ctx": "context size",
    "n_gpu_layers": "GPU layers",
    "draft_n_gpu_layers": "GPU layers",
    "flash_attn": "flash attention",
    "exact": "exact verify",
    "draft_window": "drafter window",
    "target_kv": "target K/V cache",
    "draft_kv": "drafter K/V cache",
    "draft": "drafter",
    "adapters": "LoRA adapters",
    "target": "target",
}


def _field_names(fields: list[str]) -> list[str]:
    out = []
    for f in fields:
        name = FIELD_NAMES.get(f, f)
        if name not in out:
            out.append(name)
    return out


def _name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def _check(parent, name: str, text: str, tip: str) -> QCheckBox:
    w = QCheckBox(text, parent, objectName=name)
    w.setToolTip(tip)
    return w


def _spin(parent, name: str, lo: int, hi: int, tip: str) -> QSpinBox:
    w = QSpinBox(parent, objectName=name)
    w.setRange(lo, hi)
    w.setToolTip(tip)
    w.setKeyboardTracking(False)
    return w


def _dspin(parent, name: str, lo: float, hi: float, step: float, decimals: int, tip: str) -> QDoubleSpinBox:
    w = QDoubleSpinBox(parent, objectName=name)
    w.setRange(lo, hi)
    w.setSingleStep(step)
    w.setDecimals(decimals)
    w.setToolTip(tip)
    w.setKeyboardTracking(False)
    return w


def _select(combo: QComboBox, data) -> None:
    i = combo.findData(data)
    if i >= 0:
        combo.setCurrentIndex(i)


def _set_item(combo: QComboBox, i: int, status: str, reason: str) -> None:
    """Enables or disables one combo entry; the reason goes in its tooltip."""
    model = combo.model()
    item = model.item(i) if isinstance(model, QStandardItemModel) else None
    if item is None:
        return
    name = combo.itemData(i)
    item.setEnabled(status != "FAIL")
    item.setText(name + (WARN_MARK if status == "WARN" else ""))
    item.setToolTip(reason if status != "PASS" else "")


def _enabled(combo: QComboBox, i: int) -> bool:
    model = combo.model()
    item = model.item(i) if isinstance(model, QStandardItemModel) and i >= 0 else None
    return item is None or bool(item.flags() & Qt.ItemFlag.ItemIsEnabled)
