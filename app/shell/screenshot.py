"""``dflash-studio --screenshot PATH``: the app, offscreen, on the default pair, one prompt, a PNG.

Every stage must succeed — the pair loads, the answer streams, the plots and the profiler hold
the run's steps, the image is written — or the process exits non-zero naming the stage. It runs
on a temporary settings file and conversation store seeded with the user's chosen pair, so it
never changes the user's own settings or chat history.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from PySide6.QtCore import QObject, QTimer

PROMPT = "Explain in two sentences how a drafter speeds up a large language model."
TIMEOUT_S = 300
SIZE = (1480, 900)


class ScreenshotRun(QObject):
    def __init__(self, app, out: Path, prompt: str = PROMPT, timeout_s: int = TIMEOUT_S, max_tokens: int = 96):
        super().__init__()
        from .app_settings import StudioSettings, open_settings
        from ..chat.conversations import ConversationStore
        from .main_window import MainWindow

        self.app, self.out, self.prompt = app, Path(out), prompt
        self.failures: list[str] = []
        self._done = False
        self.reply: str | None = None
        self.tmp = tempfile.TemporaryDirectory(prefix="dflash-screenshot-")
        user = StudioSettings.load(open_settings())
        qs = open_settings(Path(self.tmp.name) / "settings.ini")
        user.replace(max_tokens=max_tokens, highlight_drafts=True).save(qs)
        self.window = MainWindow(qsettings=qs, store=ConversationStore(Path(self.tmp.name) / "chat.sqlite3"))
        self.window.resize(*SIZE)
        self.window.pairLoaded.connect(self._loaded)
        self.window.pairLoadFailed.connect(lambda exc: self._fail(f"loading the pair: {exc}"))
        self.window.answerFinished.connect(self._answered)
        self.window.answerFailed.connect(lambda exc: self._fail(f"generating: {exc}"))
        self.timer = QTimer(self, singleShot=True, interval=timeout_s * 1000)
        self.timer.timeout.connect(lambda: self._fail(f"timed out after {timeout_s} s"))

    def start(self) -> None:
        self.timer.start()
        self.window.show()
        self.window.load_default_pair()

    def _loaded(self, info) -> None:
        chat = self.window.chat
        chat.input.setPlainText(self.prompt)
        chat.send_button.click()  # the same path a user's click takes

    def _answered(self, result) -> None:
        w = self.window
        if not result.steps:
            self.failures.append("the answer has no steps")
        if w.plots.step_count() == 0:
            self.failures.append("the plots hold no data")
        if w.profiler.row_count() != len(result.steps):
            self.failures.append(f"profiler rows {w.profiler.row_count()} != steps {len(result.steps)}")
        if not w.chat.transcript.token_spans():
            self.failures.append("the transcript shows no token spans")
        shown, said = " ".join(w.chat.transcript.toPlainText().split()), " ".join(result.text.split())
        if said[:40] not in shown:
            self.failures.append("the reply's text is not in the transcript")
        self.reply = result.text
        # let the last throttled redraw and layout settle before grabbing
        QTimer.singleShot(300, self._grab)

    def _grab(self) -> None:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        if not self.window.grab().save(str(self.out), "PNG"):
            self.failures.append(f"could not write {self.out}")
        self._finish()

    def _fail(self, message: str) -> None:
        self.failures.append(message)
        self._finish()

    def _finish(self) -> None:
        if self._done:
            return
        self._done = True
        self.timer.stop()
        self.window.close()
        self.app.exit(1 if self.failures else 0)


def run_screenshot(app, path: str, **kwargs) -> int:
    run = ScreenshotRun(app, Path(path), **kwargs)
    QTimer.singleShot(0, run.start)
    code = app.exec()
    for f in run.failures:
        print(f"dflash-studio --screenshot: {f}", file=sys.stderr)
    if not run.failures:
        # one line a caller (the Xvfb test) can check: where the pixels came from and what was answered
        print(f"wrote {run.out} (platform {app.platformName()}, reply of {len(run.reply or '')} chars)")
        print(f"reply: {run.reply!r}")
    run.tmp.cleanup()
    return code


def pairing_report_shot(app, out, target: str, drafter: str, timeout_s: int = 60) -> int:
    """The whole window at its default size with the Pair tab's report for ``target`` + ``drafter``
    (docs/pairing-report.png: a mismatched pair, so FAIL rows show their reasons and fixes). Runs
    on temporary settings and data, like ``run_screenshot``; 0 when the PNG was written."""
    from ..chat.conversations import ConversationStore
    from .app_settings import open_settings
    from .main_window import MainWindow

    tmp = tempfile.TemporaryDirectory(prefix="dflash-screenshot-")
    window = MainWindow(
        qsettings=open_settings(Path(tmp.name) / "settings.ini"),
        store=ConversationStore(Path(tmp.name) / "chat.sqlite3"),
    )
    window.resize(*SIZE)
    window.show()
    failures: list[str] = []

    def grab() -> None:
        if not Path(out).parent.is_dir():
            Path(out).parent.mkdir(parents=True)
        if not window.grab().save(str(out), "PNG"):
            failures.append(f"could not write {out}")
        window.close()
        app.exit(0)

    def reported(report) -> None:
        if report is None:
            failures.append("the pairing check could not run")
        QTimer.singleShot(300, grab)  # the report's rows take their wrapped heights first

    window.pairing.reportReady.connect(reported)
    QTimer.singleShot(timeout_s * 1000, lambda: (failures.append(f"timed out after {timeout_s} s"), app.exit(1)))
    window.pairing.set_pair(str(target), str(drafter))
    app.exec()
    tmp.cleanup()
    for f in failures:
        print(f"pairing report screenshot: {f}", file=sys.stderr)
    if not failures:
        print(f"wrote {out}")
    return 1 if failures else 0


if __name__ == "__main__":  # pragma: no cover - how docs/pairing-report.png is made
    import argparse
    import os

    from engine_bridge.models import demo, registry_models

    ap = argparse.ArgumentParser(
        prog="python -m app.shell.screenshot",
        description="docs/pairing-report.png: the Pair tab's report at the default size",
    )
    ap.add_argument("out", help="PNG to write")
    ap.add_argument("--target", default=None, help="default: SmolLM2 (fetched) or the reference target")
    ap.add_argument("--drafter", default=None, help="default: the reference pair's drafter (it does not fit SmolLM2)")
    a = ap.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    ref = demo.reference_pair()
    target = a.target or registry_models.cached() or (ref and ref[0])
    drafter = a.drafter or (ref and ref[1])
    # a private data folder: the user's library is not touched, and no default pair loads over this one
    data = tempfile.TemporaryDirectory(prefix="dflash-screenshot-data-")
    os.environ["DFLASH_DATA_DIR"] = data.name
    from PySide6.QtWidgets import QApplication

    from .qt_messages import install_quiet_handler

    install_quiet_handler()
    sys.exit(pairing_report_shot(QApplication(sys.argv[:1]), a.out, target, drafter))
