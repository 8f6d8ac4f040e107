"""The system libraries Qt's xcb platform plugin needs, checked before the app starts.

The PySide6 wheel ships Qt but not the X11/xcb libraries its xcb platform plugin links against; a
fresh Debian/Ubuntu desktop lacks some of them (libxcb-cursor0, libxcb-icccm4, libxcb-keysyms1),
and Qt then stops with "Could not load the Qt platform plugin "xcb"". ``make run`` and ``make test``
call ``python -m app.shell.qt_system_deps`` first: it runs ``ldd`` on the shipped plugin, maps every "not
found" library to its Debian package (the table below) and, as root with apt, installs them in one
``apt-get install`` line; otherwise it prints that command and stops with one line saying why.

Nothing here imports Qt: it has to run where Qt cannot load.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

#: soname -> Debian/Ubuntu package(s) providing it, first choice first (Ubuntu 24.04 / Debian 13
#: renamed a few libraries with a ``t64`` suffix; the first name apt knows is used). Covers every
#: system library the shipped libqxcb.so links against (directly or through the wheel's Qt
#: libraries), as ``ldd`` lists them; tests/app/shell/test_qt_system_deps.py checks that against ldd.
SONAME_PACKAGES: dict[str, tuple[str, ...]] = {
    # xcb and xkb: what fresh machines usually lack
    "libxcb-cursor.so.0": ("libxcb-cursor0",),
    "libxcb-icccm.so.4": ("libxcb-icccm4",),
    "libxcb-keysyms.so.1": ("libxcb-keysyms1",),
    "libxcb-image.so.0": ("libxcb-image0",),
    "libxcb-render-util.so.0": ("libxcb-render-util0",),
    "libxcb-randr.so.0": ("libxcb-randr0",),
    "libxcb-render.so.0": ("libxcb-render0",),
    "libxcb-shape.so.0": ("libxcb-shape0",),
    "libxcb-shm.so.0": ("libxcb-shm0",),
    "libxcb-sync.so.1": ("libxcb-sync1",),
    "libxcb-util.so.1": ("libxcb-util1",),
    "libxcb-xfixes.so.0": ("libxcb-xfixes0",),
    "libxcb-xkb.so.1": ("libxcb-xkb1",),
    "libxcb-xinerama.so.0": ("libxcb-xinerama0",),
    "libxcb-xinput.so.0": ("libxcb-xinput0",),
    "libxcb-glx.so.0": ("libxcb-glx0",),
    "libxcb.so.1": ("libxcb1",),
    "libxkbcommon-x11.so.0": ("libxkbcommon-x11-0",),
    "libxkbcommon.so.0": ("libxkbcommon0",),
    "libX11-xcb.so.1": ("libx11-xcb1",),
    "libX11.so.6": ("libx11-6",),
    "libXau.so.6": ("libxau6",),
    "libXdmcp.so.6": ("libxdmcp6",),
    # OpenGL / EGL (glvnd)
    "libEGL.so.1": ("libegl1",),
    "libGL.so.1": ("libgl1",),
    "libGLX.so.0": ("libglx0",),
    "libGLdispatch.so.0": ("libglvnd0",),
    # fonts, D-Bus, GLib and what they pull in
    "libfontconfig.so.1": ("libfontconfig1",),
    "libfreetype.so.6": ("libfreetype6",),
    "libpng16.so.16": ("libpng16-16t64", "libpng16-16"),
    "libbrotlicommon.so.1": ("libbrotli1",),
    "libbrotlidec.so.1": ("libbrotli1",),
    "libexpat.so.1": ("libexpat1",),
    "libdbus-1.so.3": ("libdbus-1-3",),
    "libsystemd.so.0": ("libsystemd0",),
    "libcap.so.2": ("libcap2",),
    "libgcrypt.so.20": ("libgcrypt20",),
    "libgpg-error.so.0": ("libgpg-error0",),
    "liblz4.so.1": ("liblz4-1",),
    "liblzma.so.5": ("liblzma5",),
    "libzstd.so.1": ("libzstd1",),
    "libz.so.1": ("zlib1g",),
    "libglib-2.0.so.0": ("libglib2.0-0t64", "libglib2.0-0"),
    "libgthread-2.0.so.0": ("libglib2.0-0t64", "libglib2.0-0"),
    "libpcre2-8.so.0": ("libpcre2-8-0",),
    "libbsd.so.0": ("libbsd0",),
    "libmd.so.0": ("libmd0",),
    # the C/C++ runtime: present wherever Python runs, listed so the table is complete
    "libc.so.6": ("libc6",),
    "libm.so.6": ("libc6",),
    "libdl.so.2": ("libc6",),
    "libpthread.so.0": ("libc6",),
    "libstdc++.so.6": ("libstdc++6",),
    "libgcc_s.so.1": ("libgcc-s1",),
}

#: What ``make test`` needs on top: the X server the Xvfb test starts the real app on.
TEST_PACKAGES = ("xvfb",)
#: Platforms that need no X libraries (a user who chose one is not checked for xcb).
NON_XCB_PLATFORMS = ("offscreen", "minimal", "vnc", "linuxfb", "eglfs", "wayland", "vkkhrdisplay")


def xcb_plugin() -> Path:
    """The xcb platform plugin inside the installed PySide6 wheel (found without importing Qt)."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("PySide6 is not installed in this Python")
    return Path(list(spec.submodule_search_locations)[0]) / "Qt" / "plugins" / "platforms" / "libqxcb.so"


def ldd(path: Path) -> dict[str, str | None]:
    """soname -> resolved path (None when ldd says "not found") for everything ``path`` loads."""
    out = subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=True).stdout
    libs: dict[str, str | None] = {}
    for line in out.splitlines():
        name, sep, rest = line.strip().partition(" => ")
        if not sep:
            continue
        target = rest.split(" (")[0].strip()
        libs[name] = None if target == "not found" else target
    return libs


def missing_libraries(plugin: Path | None = None) -> list[str]:
    return sorted(name for name, where in ldd(plugin or xcb_plugin()).items() if where is None)


def apt_knows(package: str) -> bool:
    if not shutil.which("apt-cache"):
        return False
    r = subprocess.run(["apt-cache", "show", "--no-all-versions", package], capture_output=True, text=True)
    return r.returncode == 0 and bool(r.stdout.strip())


def packages_for(sonames, knows=apt_knows) -> tuple[list[str], list[str]]:
    """(Debian packages to install, sonames the table does not know), both sorted, no duplicates."""
    packages, unknown = set(), []
    for so in sonames:
        choices = SONAME_PACKAGES.get(so)
        if not choices:
            unknown.append(so)
            continue
        packages.add(next((p for p in choices if len(choices) == 1 or knows(p)), choices[-1]))
    return sorted(packages), sorted(unknown)


def install_command(packages, root: bool) -> list[str]:
    return ([] if root else ["sudo"]) + ["apt-get", "install", "-y", *packages]


def _apt_install(packages) -> bool:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = install_command(packages, root=True)
    print("dflash-studio: installing " + " ".join(packages), file=sys.stderr)
    if subprocess.run(cmd, env=env).returncode == 0:
        return True
    # a fresh machine (a container) may have no package lists yet
    subprocess.run(["apt-get", "update", "-qq"], env=env)
    return subprocess.run(cmd, env=env).returncode == 0


def needs_xcb(env=os.environ) -> bool:
    platform = env.get("QT_QPA_PLATFORM", "").split(":")[0].split(";")[0].strip().lower()
    return platform not in NON_XCB_PLATFORMS


def display_problem(env=os.environ) -> str | None:
    """Why the window cannot open here, or None."""
    if not needs_xcb(env) or env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"):
        return None
    return (
        "no display: DISPLAY and WAYLAND_DISPLAY are unset, so the window cannot open; start it from a "
        "desktop session (or ssh -X), or use the headless CLI (dflash-studio --help) or "
        "dflash-studio --screenshot out.png"
    )


def startup_problem(env=os.environ, plugin: Path | None = None) -> str | None:
    """Why the window cannot open here (no display, or xcb libraries missing), or None.

    The app's entry point asks this before it creates the QApplication: without it Qt aborts the
    process (exit 134) with a misleading "xcb-cursor0 is needed" even where that library is
    installed. Nothing is installed here; ``make run`` does that (``check``)."""
    problem = display_problem(env)
    if problem or not needs_xcb(env):
        return problem
    try:
        sonames = missing_libraries(plugin)
    except (OSError, subprocess.CalledProcessError):  # no ldd, no PySide6: let Qt speak for itself
        return None
    if not sonames:
        return None
    packages, unknown = packages_for(sonames)
    fix = (
        f"install them: {' '.join(install_command(packages, root=os.geteuid() == 0))}"
        if packages and not unknown
        else "install your distribution's packages for them (apt-file search NAME)"
    )
    return f"Qt's xcb plugin cannot load: missing system libraries {', '.join(sonames)}; {fix}"


def check(
    mode: str = "run",
    env=os.environ,
    root: bool | None = None,
    apt: bool | None = None,
    plugin: Path | None = None,
    have_xvfb: bool | None = None,
) -> int:
    """0 when the app can start here (after installing what was missing, as root with apt)."""
    root = os.geteuid() == 0 if root is None else root
    apt = shutil.which("apt-get") is not None if apt is None else apt
    have_xvfb = shutil.which("Xvfb") is not None if have_xvfb is None else have_xvfb
    sonames = missing_libraries(plugin) if (needs_xcb(env) or mode == "test") else []
    packages, unknown = packages_for(sonames)
    if mode == "test":
        packages += [p for p in TEST_PACKAGES if p not in packages and not have_xvfb]
    if unknown:
        print(
            f"dflash-studio: Qt's xcb plugin needs {', '.join(unknown)}, which no known package provides "
            "here; install the package that ships it (apt-file search NAME)",
            file=sys.stderr,
        )
        return 1
    if packages:
        if not apt:
            what = ", ".join(sonames) or ", ".join(packages)
            print(
                f"dflash-studio: missing system libraries for Qt's xcb plugin: {what}; install your "
                f"distribution's packages for them (Debian/Ubuntu: {' '.join(packages)})",
                file=sys.stderr,
            )
            return 1
        if not root:
            print(
                f"dflash-studio: missing system packages {' '.join(packages)}; run: "
                f"{' '.join(install_command(packages, root=False))}",
                file=sys.stderr,
            )
            return 1
        if not _apt_install(packages):
            print(
                f"dflash-studio: could not install {' '.join(packages)}; run: "
                f"{' '.join(install_command(packages, root=True))}",
                file=sys.stderr,
            )
            return 1
        still = missing_libraries(plugin) if sonames else []
        if still:
            print(f"dflash-studio: still missing after the install: {', '.join(still)}", file=sys.stderr)
            return 1
    if mode == "run":
        problem = display_problem(env)
        if problem:
            print(f"dflash-studio: {problem}", file=sys.stderr)
            return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.shell.qt_system_deps", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--for",
        dest="mode",
        choices=("run", "test"),
        default="run",
        help="run: the xcb libraries and a display; test: the xcb libraries and Xvfb",
    )
    return check(parser.parse_args(argv).mode)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
