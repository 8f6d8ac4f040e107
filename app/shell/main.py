"""Starts DFlash Studio: ``dflash-studio`` (no subcommand) and ``dflash-studio --screenshot PATH``."""

from __future__ import annotations

import os
import sys

from .app_settings import APPLICATION, ORGANIZATION


def make_application(argv: list[str] | None = None):
    from PySide6.QtGui import QIcon
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(argv if argv is not None else sys.argv[:1])
    app.setOrganizationName(ORGANIZATION)
    app.setApplicationName(APPLICATION)
    app.setDesktopFileName("dflash-studio")  # ties the window to the installed .desktop entry
    from .main_window import ICON

    if ICON.exists():
        app.setWindowIcon(QIcon(str(ICON)))
    return app


#: The exit code when the window cannot open here (no display, xcb libraries missing).
EXIT_NO_DISPLAY = 2


def main(screenshot: str | None = None, argv: list[str] | None = None) -> int:
    if screenshot:
        # the screenshot run never needs a display; a platform named explicitly (the Xvfb test's xcb) is kept
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    else:
        # asked before Qt starts: Qt itself aborts the process with a misleading message
        from .qt_system_deps import startup_problem

        problem = startup_problem()
        if problem:
            print(f"dflash-studio: {problem}", file=sys.stderr)
            return EXIT_NO_DISPLAY
    from .qt_messages import install_quiet_handler

    install_quiet_handler()
    app = make_application(argv)
    if screenshot:
        from .screenshot import run_screenshot

        return run_screenshot(app, screenshot)
    from .main_window import MainWindow

    window = MainWindow()
    window.show()
    return int(app.exec())


if __name__ == "__main__":  # pragma: no cover
    import argparse

    parser = argparse.ArgumentParser(prog="python -m app.shell.main")
    parser.add_argument("--screenshot", metavar="PATH")
    args = parser.parse_args()
    sys.exit(main(screenshot=args.screenshot))
