"""The xcb plugin's system libraries: the soname -> package table against the real ``ldd``/``dpkg``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.shell import qt_system_deps as deps

ROOT = Path(__file__).resolve().parents[3]
PLUGIN = deps.xcb_plugin()
WHEEL_QT = PLUGIN.parents[2]  # .../PySide6/Qt: libraries the wheel ships itself


def _system_libraries() -> dict[str, str | None]:
    """What the shipped plugin loads from the system (ldd, for real), wheel libraries left out."""
    return {
        so: where
        for so, where in deps.ldd(PLUGIN).items()
        if where is None or not Path(where).resolve().is_relative_to(WHEEL_QT.resolve())
    }


def test_the_table_covers_every_system_library_the_xcb_plugin_loads():
    assert PLUGIN.exists(), PLUGIN
    libs = _system_libraries()
    assert any(so.startswith("libxcb") for so in libs), libs  # ldd really listed the plugin's libraries
    missing_here = sorted(so for so, where in libs.items() if where is None)
    assert not [so for so in missing_here if so not in deps.SONAME_PACKAGES], missing_here
    # and those this machine provides, so the table also holds on a machine that lacks them
    uncovered = sorted(so for so in libs if so not in deps.SONAME_PACKAGES and not so.startswith("ld-linux"))
    assert not uncovered, f"add these sonames to app/shell/qt_system_deps.SONAME_PACKAGES: {uncovered}"


@pytest.mark.skipif(not shutil.which("dpkg"), reason="dpkg is Debian's; the table names Debian packages")
def test_the_table_names_the_package_that_really_ships_each_installed_library():
    wrong = {}
    for so, where in _system_libraries().items():
        if where is None or so not in deps.SONAME_PACKAGES:
            continue
        real = Path(where).resolve()
        # usrmerge: dpkg may know the file under /usr/lib or /lib
        candidates = [str(real), str(real).replace("/usr/lib/", "/lib/", 1), str(real).replace("/lib/", "/usr/lib/", 1)]
        owner = None
        for c in candidates:
            r = subprocess.run(["dpkg", "-S", c], capture_output=True, text=True)
            if r.returncode == 0:
                owner = r.stdout.split(":")[0].strip()
                break
        if owner is not None and owner not in deps.SONAME_PACKAGES[so]:
            wrong[so] = (owner, deps.SONAME_PACKAGES[so])
    assert not wrong, wrong


@pytest.mark.skipif(not shutil.which("apt-cache"), reason="needs apt to resolve package names")
def test_every_package_for_a_missing_library_is_one_apt_can_install():
    if subprocess.run(["apt-cache", "show", "libc6"], capture_output=True).returncode != 0:
        pytest.skip("apt has no package lists here (apt-get update)")
    xcb = [so for so in deps.SONAME_PACKAGES if so.startswith(("libxcb", "libxkb"))]
    packages, unknown = deps.packages_for(xcb)
    assert not unknown
    assert not [p for p in packages if not deps.apt_knows(p)]
    assert {"libxcb-cursor0", "libxcb-icccm4", "libxcb-keysyms1"} <= set(packages)
    # a soname nobody maps is reported, not guessed
    assert deps.packages_for(["libnot-a-real-lib.so.7"]) == ([], ["libnot-a-real-lib.so.7"])


def test_without_root_it_prints_the_exact_install_command_and_stops(tmp_path, capsys):
    # a copy of the plugin next to no Qt libraries: ldd really reports them "not found"
    lonely = tmp_path / "libqxcb.so"
    shutil.copy(PLUGIN, lonely)
    missing = deps.missing_libraries(lonely)
    assert "libQt6XcbQpa.so.6" in missing
    env = {"DISPLAY": ":0"}
    assert deps.check("run", env=env, root=False, apt=True, plugin=lonely) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "libQt6XcbQpa.so.6" in err and "no known package" in err


def test_without_root_a_known_missing_package_gives_the_sudo_apt_line(capsys):
    assert deps.install_command(["libxcb-icccm4", "libxcb-keysyms1"], root=False) == [
        "sudo",
        "apt-get",
        "install",
        "-y",
        "libxcb-icccm4",
        "libxcb-keysyms1",
    ]
    # the test mode asks for Xvfb too where it is absent (/bin/true stands for a plugin that lacks nothing)
    code = deps.check("test", env={}, root=False, apt=True, plugin=Path("/bin/true"), have_xvfb=False)
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.endswith("run: sudo apt-get install -y xvfb"), err


def test_make_run_without_a_display_says_so_in_one_line():
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    proc = subprocess.run(
        [sys.executable, "-m", "app.shell.qt_system_deps", "--for", "run"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if deps.missing_libraries() and os.geteuid() != 0:
        assert proc.returncode == 1 and "sudo apt-get install -y" in proc.stderr
    else:
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.strip().splitlines()[-1].startswith("dflash-studio: no display")
    # offscreen needs no X libraries and no display
    off = subprocess.run(
        [sys.executable, "-m", "app.shell.qt_system_deps", "--for", "run"],
        cwd=ROOT,
        env=dict(env, QT_QPA_PLATFORM="offscreen"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert off.returncode == 0 and off.stderr == ""
