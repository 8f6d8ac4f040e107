"""Turns committed tokens into text as they stream, without splitting multibyte characters."""

from __future__ import annotations

import codecs


class StreamingDetokenizer:
    """Feeds token pieces (bytes) through an incremental UTF-8 decoder.

    A token may end in the middle of a character (byte-level BPE does this); the decoder keeps
    the partial bytes and emits the character with the token that completes it.
    """

    def __init__(self, piece_of):
        self._piece_of = piece_of  # token -> bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token: int) -> str:
        return self._decoder.decode(self._piece_of(token))

    def flush(self) -> str:
        return self._decoder.decode(b"", final=True)
