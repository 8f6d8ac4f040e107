"""Without a display the entry point says so and exits 2, before Qt can abort the process; and Qt's
offscreen capability notices stay off the terminal (issue 33, item 5). Real processes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from app.shell import qt_system_deps as deps

ROOT = Path(__file__).resolve().parents[3]


def _env_without_display(tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env.update(DFLASH_DATA_DIR=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    return env


def test_the_cli_without_a_display_prints_a_sentence_and_exits_2(tmp_path):
    # the same entry point as the console script (pyproject: dflash-studio = engine_bridge.cli:main)
    proc = subprocess.run(
        [sys.executable, "-m", "engine_bridge.cli"],
        cwd=ROOT,
        env=_env_without_display(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    err = proc.stderr.strip()
    assert err == f"dflash-studio: {deps.display_problem({})}", err
    assert "xcb" not in err and "Aborted" not in err and "Traceback" not in err
    assert not (tmp_path / "config").exists()  # nothing was started


def test_the_app_module_says_the_same(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "app.shell.main"],
        cwd=ROOT,
        env=_env_without_display(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "no display: DISPLAY and WAYLAND_DISPLAY are unset" in proc.stderr


def test_missing_xcb_libraries_are_named_with_the_install_line(tmp_path):
    # a copy of the plugin next to none of the wheel's Qt libraries: ldd really reports them missing
    lonely = tmp_path / "libqxcb.so"
    shutil.copy(deps.xcb_plugin(), lonely)
    problem = deps.startup_problem({"DISPLAY": ":0"}, plugin=lonely)
    assert problem and problem.startswith("Qt's xcb plugin cannot load: missing system libraries")
    assert "libQt6XcbQpa.so.6" in problem
    assert deps.startup_problem({"DISPLAY": ":0"}) is None or "missing" in deps.startup_problem({"DISPLAY": ":0"})
    assert deps.startup_problem({"QT_QPA_PLATFORM": "offscreen"}, plugin=lonely) is None  # no xcb needed


def test_offscreen_platform_notices_stay_off_the_terminal(tmp_path):
    """The offscreen plugin warns 'This plugin does not support propagateSizeHints()' for every
    floating dock; the app's handler drops those and passes every other Qt message on."""
    code = (
        "import sys\n"
        "from app.shell.qt_messages import install_quiet_handler\n"
        "from app.shell.main import make_application\n"
        "install_quiet_handler()\n"
        "app = make_application()\n"
        "from PySide6.QtCore import Qt, QTimer, qWarning\n"
        "from PySide6.QtWidgets import QDockWidget, QLabel, QMainWindow\n"
        "w = QMainWindow(); d = QDockWidget('dock'); d.setWidget(QLabel('x'))\n"
        "w.addDockWidget(Qt.RightDockWidgetArea, d); w.show(); d.setFloating(True); d.raise_()\n"
        "qWarning('a real warning')\n"
        "QTimer.singleShot(200, app.quit); sys.exit(app.exec())\n"
    )
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "does not support" not in proc.stderr
    assert proc.stderr.strip() == "dflash-studio: Qt: a real warning"
    # without the handler the same run prints the notices (what the handler is for)
    raw = subprocess.run(
        [sys.executable, "-c", code.replace("install_quiet_handler()\n", "")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "This plugin does not support" in raw.stderr
