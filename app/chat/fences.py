"""Where the code blocks of an answer are: ``` fences, balanced or not.

Models do not always balance their fences. Two cases matter in practice:

* a block that is never closed (the answer was cut off at max tokens, or is still streaming): as
  in CommonMark and common chat apps, the block runs to the end of the answer;
* a closing fence with no opening one: the model continued code the prompt had opened (or just
  forgot the opener) and then closed it. Its first fence carries no language tag and follows text,
  so it closes a block that began with the answer: the code before it is code, the prose after it
  is prose, and the fence itself is a marker, not content.

``fence_layout`` splits a finished answer into prose, code and fence-marker runs by these rules;
``FenceTracker`` follows fences through streamed pieces, where the future is not known yet.
"""

from __future__ import annotations

from typing import NamedTuple

FENCE = "```"
PROSE, CODE, MARKER = "prose", "code", "marker"


class Run(NamedTuple):
    start: int
    end: int
    kind: str  # PROSE | CODE | MARKER (a fence line, with its language tag and line break)


def _fence_lines(text: str) -> list[tuple[int, int, str]]:
    """(start, end, stripped text) of every fence line: a line that starts with ``` (indent allowed)."""
    out, pos = [], 0
    for line in text.splitlines(keepends=True):
        if line.lstrip(" \t").startswith(FENCE):
            out.append((pos, pos + len(line), line.strip()))
        pos += len(line)
    return out


def opens_implicitly(text: str) -> bool:
    """True when the answer's first fence closes a block that began with the answer (see above)."""
    fences = _fence_lines(text)
    if len(fences) % 2 == 0:
        return False
    start, _, line = fences[0]
    return line == FENCE and bool(text[:start].strip())


def fence_layout(text: str) -> list[Run]:
    """The answer as consecutive runs of prose, code and fence markers, covering all of ``text``."""
    fences = _fence_lines(text)
    runs: list[Run] = []
    pos, inside = 0, False
    if opens_implicitly(text):
        inside = True
    for start, end, _ in fences:
        if start > pos:
            runs.append(Run(pos, start, CODE if inside else PROSE))
        runs.append(Run(start, end, MARKER))
        inside = not inside
        pos = end
    if pos < len(text):
        runs.append(Run(pos, len(text), CODE if inside else PROSE))
    return runs


def balanced_markdown(text: str) -> str:
    """The answer as markdown a CommonMark renderer shows as meant: an implicit opener is added."""
    return f"{FENCE}\n{text}" if opens_implicitly(text) else text


class FenceTracker:
    """Follows ``` fences through streamed pieces: is the next piece inside a code block?"""

    def __init__(self):
        self.fences = 0
        self._tail = ""  # the last two characters: a fence may straddle two pieces

    def feed(self, piece: str) -> bool:
        """True when ``piece`` starts inside a code block; then counts the fences it adds."""
        inside = self.fences % 2 == 1
        joined = self._tail + piece
        self.fences += joined.count(FENCE) - self._tail.count(FENCE)
        self._tail = joined[-2:]
        return inside
