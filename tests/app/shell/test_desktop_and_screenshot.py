"""make install-desktop writes a launcher entry and icon; --screenshot renders the app to a PNG."""

from __future__ import annotations

import configparser
import os
import subprocess
import sys
from pathlib import Path

from PySide6.QtGui import QImage

from app.shell import desktop_entry

ROOT = Path(__file__).resolve().parents[3]


def test_install_desktop_entry_honours_xdg_data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    exe = tmp_path / "venv bin" / "dflash-studio"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n")
    entry, icon = desktop_entry.install(exe)
    assert entry == tmp_path / "share" / "applications" / "dflash-studio.desktop"
    assert icon == tmp_path / "share" / "icons" / "hicolor" / "scalable" / "apps" / "dflash-studio.svg"
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.optionxform = str
    cfg.read(entry)
    de = cfg["Desktop Entry"]
    assert de["Exec"] == f'"{exe}"' and de["Icon"] == "dflash-studio" and de["Type"] == "Application"
    assert "@" not in entry.read_text()
    assert icon.read_bytes().startswith(b"<?xml") and os.access(entry, os.X_OK)
    assert desktop_entry.uninstall() == [entry, icon]


def test_the_default_launcher_is_the_venvs_console_script():
    assert desktop_entry.launcher() == Path(sys.executable).parent.absolute() / "dflash-studio"
    rendered = desktop_entry.render_entry(Path("/opt/dflash/bin/dflash-studio"))
    assert "Exec=/opt/dflash/bin/dflash-studio\n" in rendered


def test_screenshot_runs_the_app_offscreen_and_writes_a_png(tmp_path):
    out = tmp_path / "shot.png"
    env = dict(
        os.environ,
        DFLASH_DATA_DIR=str(tmp_path / "data"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        QT_QPA_PLATFORM="offscreen",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "app.shell.main", "--screenshot", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "does not support" not in proc.stderr  # the offscreen plugin's notices stay off the terminal
    img = QImage(str(out))
    assert (img.width(), img.height()) == (1480, 900)
    # the app used the private data dir (the conversation store), and the user's settings were not touched
    assert any((tmp_path / "data").iterdir())
    assert not (tmp_path / "config" / "DFlashStudio").exists()
