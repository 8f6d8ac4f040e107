"""Qt's own messages, kept off the user's terminal where they mean nothing to a user.

The offscreen platform (``--screenshot``, tests) answers every window-manager request it cannot
honour with a warning such as "This plugin does not support propagateSizeHints()": the docks and
the window ask several times per run, and the user cannot act on any of it. Those capability
notices are dropped; every other Qt message still reaches stderr, prefixed so its origin is clear.
"""

from __future__ import annotations

import sys

from PySide6.QtCore import QtMsgType, qInstallMessageHandler

#: Messages a platform plugin prints about what it cannot do (QPlatformWindow's defaults).
PLATFORM_NOTICES = ("This plugin does not support",)


def is_noise(text: str) -> bool:
    return text.startswith(PLATFORM_NOTICES)


def _handler(kind, context, text: str) -> None:
    if kind in (QtMsgType.QtDebugMsg, QtMsgType.QtInfoMsg) or is_noise(text):
        return
    print(f"dflash-studio: Qt: {text}", file=sys.stderr)


def install_quiet_handler() -> None:
    """Route Qt's messages through ``_handler`` for the rest of the process."""
    qInstallMessageHandler(_handler)
