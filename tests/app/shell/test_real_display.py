"""The real app on a real X server: Xvfb, Qt's xcb plugin (not offscreen), the default pair, one message.

This is the check the offscreen tests cannot make: that the xcb platform plugin loads with the
system's libraries (app/shell/qt_system_deps.py installs them for ``make test``), that the window comes up
on an X display, and that a chat message is answered there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtGui import QImage

from app.shell import qt_system_deps
from app.shell.screenshot import SIZE
from engine_bridge.common.paths import data_dir

ROOT = Path(__file__).resolve().parents[3]
#: the user's models cache (read before the fixtures point DFLASH_DATA_DIR at tmp_path): the default
#: pair is whatever engine_bridge.models.demo.demo_pair() finds there, not a pair this test names
USER_MODELS = data_dir() / "models"


@pytest.fixture
def xvfb(tmp_path):
    """A real Xvfb on a display number it picks itself (-displayfd), stopped afterwards."""
    exe = shutil.which("Xvfb")
    if exe is None:
        cmd = " ".join(qt_system_deps.install_command(qt_system_deps.TEST_PACKAGES, root=os.geteuid() == 0))
        pytest.fail(f"Xvfb is not installed (make test installs it as root): {cmd}")
    read_fd, write_fd = os.pipe()
    w, h = SIZE
    proc = subprocess.Popen(
        [exe, "-displayfd", str(write_fd), "-screen", "0", f"{w + 120}x{h + 100}x24", "-nolisten", "tcp", "-noreset"],
        pass_fds=(write_fd,),
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "xvfb.log", "wb"),
    )
    os.close(write_fd)
    try:
        with os.fdopen(read_fd) as f:
            number = f.readline().strip()  # written once the server accepts connections
        assert number.isdigit(), f"Xvfb did not start: {(tmp_path / 'xvfb.log').read_text()[-1000:]}"
        yield f":{number}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_real_app_answers_under_xvfb_and_screenshots_at_full_size(xvfb, tmp_path):
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    if USER_MODELS.is_dir() and not (data / "models").exists():
        (data / "models").symlink_to(USER_MODELS, target_is_directory=True)
    out = tmp_path / "shot.png"
    env = dict(
        os.environ,
        DISPLAY=xvfb,
        QT_QPA_PLATFORM="xcb",
        DFLASH_DATA_DIR=str(data),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
    )
    env.pop("WAYLAND_DISPLAY", None)
    # the same check make run makes: the plugin's libraries are there and a display is set
    pre = subprocess.run(
        [sys.executable, "-m", "app.shell.qt_system_deps", "--for", "run"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert pre.returncode == 0, pre.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "app.shell.main", "--screenshot", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "platform xcb" in proc.stdout, proc.stdout  # really on the X server, not offscreen
    assert "could not load the qt platform plugin" not in proc.stderr.lower()
    reply = proc.stdout.split("reply: ", 1)[1].strip()
    assert len(reply) > 2 and reply != "''", proc.stdout  # an answer came back (and was in the transcript)
    img = QImage(str(out))
    assert (img.width(), img.height()) == SIZE
    # not blank: a rendered window has text, frames and plots, so many colours and no single one dominates
    small = img.scaled(148, 90)
    colours = {small.pixel(x, y) for x in range(small.width()) for y in range(small.height())}
    assert len(colours) > 50, len(colours)
