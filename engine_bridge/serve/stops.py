"""Stop strings over streamed text: what may be sent now, and whether a stop string was met.

Text that could still turn into a stop string (a suffix that is a prefix of one) is held back
until the next piece decides; the stop string itself and everything after it are never sent."""

from __future__ import annotations


class StopFilter:
    def __init__(self, stops: list[str]):
        self.stops = [s for s in stops if s]
        self.held = ""
        self.hit = False

    def feed(self, piece: str) -> str:
        """The text that is safe to send after ``piece``; sets ``hit`` when a stop string appears."""
        if self.hit:
            return ""
        if not self.stops:
            return piece
        text = self.held + piece
        cut = min((i for i in (text.find(s) for s in self.stops) if i >= 0), default=-1)
        if cut >= 0:
            self.hit, self.held = True, ""
            return text[:cut]
        keep = 0  # the longest tail of text that begins some stop string
        for s in self.stops:
            for n in range(min(len(s) - 1, len(text)), keep, -1):
                if text.endswith(s[:n]):
                    keep = n
                    break
        self.held = text[len(text) - keep :] if keep else ""
        return text[: len(text) - keep]

    def flush(self) -> str:
        """What was held back, once the generation ended without completing a stop string."""
        out, self.held = ("" if self.hit else self.held), ""
        return out
