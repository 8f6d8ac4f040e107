"""``make install-desktop``: a launcher entry and an icon, so the app starts from a file manager.

Writes ``$XDG_DATA_HOME/applications/dflash-studio.desktop`` (default ~/.local/share) from
``resources/desktop/dflash-studio.desktop.in`` with the absolute path of this venv's
``dflash-studio`` (of the one-file bundle: ``./dflash-studio-….run -m app.shell.desktop_entry install``),
and copies the SVG icon into the hicolor theme. ``uninstall`` removes both.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from engine_bridge.common.resources import resource

APP_ID = "dflash-studio"


def data_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")


def launcher() -> Path:
    """The venv's console script, next to the running interpreter (not resolved: a venv's python is a link);
    in the one-file bundle, the bundle file itself (its header exports DFLASH_BUNDLE), not the copy it
    unpacked into the cache, which a newer bundle replaces."""
    bundle = os.environ.get("DFLASH_BUNDLE")
    if getattr(sys, "frozen", False) and bundle:
        return Path(bundle)
    exe = Path(sys.executable).parent / APP_ID
    return exe.absolute()


def desktop_path() -> Path:
    return data_home() / "applications" / f"{APP_ID}.desktop"


def icon_path() -> Path:
    return data_home() / "icons" / "hicolor" / "scalable" / "apps" / f"{APP_ID}.svg"


def render_entry(exec_path: Path) -> str:
    template = resource("desktop", f"{APP_ID}.desktop.in").read_text()
    # the Exec key quotes paths with spaces (Desktop Entry spec, "The Exec key")
    quoted = f'"{exec_path}"' if " " in str(exec_path) else str(exec_path)
    return template.replace("@EXEC@", quoted)


def install(exec_path: Path | None = None) -> tuple[Path, Path]:
    exec_path = exec_path or launcher()
    if not exec_path.exists():
        raise FileNotFoundError(f"{exec_path} does not exist; run `make setup` first")
    entry, icon = desktop_path(), icon_path()
    entry.parent.mkdir(parents=True, exist_ok=True)
    icon.parent.mkdir(parents=True, exist_ok=True)
    entry.write_text(render_entry(exec_path))
    entry.chmod(0o755)  # some file managers only launch executable entries
    shutil.copyfile(resource("icons", f"{APP_ID}.svg"), icon)
    _refresh_caches(entry.parent, icon.parents[2])
    return entry, icon


def uninstall() -> list[Path]:
    removed = []
    for p in (desktop_path(), icon_path()):
        if p.exists():
            p.unlink()
            removed.append(p)
    return removed


def _refresh_caches(applications: Path, hicolor: Path) -> None:
    """Best effort: launchers pick the entry up sooner when the caches know it."""
    for cmd in (["update-desktop-database", str(applications)], ["gtk-update-icon-cache", "-q", "-t", str(hicolor)]):
        if shutil.which(cmd[0]):
            subprocess.run(cmd, check=False, capture_output=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.shell.desktop_entry")
    parser.add_argument("action", choices=("install", "uninstall"))
    args = parser.parse_args(argv)
    if args.action == "install":
        try:
            entry, icon = install()
        except FileNotFoundError as exc:
            print(f"install-desktop: {exc}", file=sys.stderr)
            return 1
        print(f"installed {entry}\ninstalled {icon}")
    else:
        for p in uninstall():
            print(f"removed {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
