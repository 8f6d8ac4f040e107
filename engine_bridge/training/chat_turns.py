"""The chat template's turn boundaries as token ids, so the GPU machine (no jinja2, no llama.cpp) can
extend a conversation: open a user turn for the target to write (Magpie-style prompts, follow-up
questions) and close it into an assistant turn.

The template is rendered here, on the CPU machine, around sentinel texts; the text between two
sentinels is a boundary, tokenized by llama.cpp as the app's chat path tokenizes a whole prompt
(``parse_special``). For ChatML:

* ``pre_query``: BOS + the default system turn (if the template adds one) + ``<|im_start|>user\\n``
  -- what a conversation starts with before the user's first words;
* ``after_query``: ``<|im_end|>\\n<|im_start|>assistant\\n`` -- from the end of a user's words to
  the first token of the answer;
* ``after_answer``: ``<|im_end|>\\n<|im_start|>user\\n`` -- from the end of an answer's words to
  the next user's words (an answer that ended with the end-of-turn token drops that token first,
  since this fragment starts with it).

Tokenizing a conversation piece by piece can split text at a boundary differently from tokenizing it
whole; the sentinels are chosen so that each boundary here ends and starts in special tokens or
newlines, where BPE merges do not cross (``check`` in the tests compares both ways).
"""

from __future__ import annotations

from typing import Callable

A, B, C = "Qzx1", "Qzx2", "Qzx3"  # sentinels: plain words no template rewrites


class TemplateTurnsError(ValueError):
    """The chat template does not render turns in an order these fragments can express."""


def fragments(
    render: Callable[[list[dict], bool], str], tokenize: Callable[[str, bool], list[int]], stop_ids: list[int]
) -> dict:
    """``render(messages, add_generation_prompt)`` -> text; ``tokenize(text, add_special)`` -> ids.

    Returns {"pre_query", "after_query", "after_answer": token ids, "answer_end": the end-of-turn id
    an answer ends with (or -1)}."""
    one = render([{"role": "user", "content": A}], True)
    two = render(
        [{"role": "user", "content": A}, {"role": "assistant", "content": B}, {"role": "user", "content": C}], True
    )
    if one.count(A) != 1 or two.count(B) != 1 or two.count(C) != 1:
        raise TemplateTurnsError("the chat template repeats or drops the user's text")
    pre = one[: one.index(A)]
    after_q = one[one.index(A) + len(A) :]
    between = two[two.index(B) + len(B) : two.index(C)]
    after_q2 = two[two.index(C) + len(C) :]
    if after_q2 != after_q:
        raise TemplateTurnsError("the template closes a later user turn differently from the first")
    pre_ids = tokenize(pre, True)
    after_q_ids = tokenize(after_q, False)
    between_ids = tokenize(between, False)
    stops = set(int(s) for s in stop_ids)
    end = int(between_ids[0]) if between_ids and int(between_ids[0]) in stops else -1
    return {
        "pre_query": [int(t) for t in pre_ids],
        "after_query": [int(t) for t in after_q_ids],
        "after_answer": [int(t) for t in between_ids],
        "answer_end": end,
    }


def close_answer(answer: list[int], frag: dict) -> list[int]:
    """An answer's ids followed by the boundary into the next user turn (the answer's own
    end-of-turn token is the fragment's first token, so it is not written twice)."""
    a = list(answer)
    if a and frag["answer_end"] >= 0 and a[-1] == frag["answer_end"]:
        a = a[:-1]
    return a + list(frag["after_answer"])


def close_query(query: list[int], frag: dict, stop_ids) -> list[int]:
    """A user's words as the target wrote them (ending in an end-of-turn token or not) followed by
    the boundary into the assistant's answer."""
    stops = set(int(s) for s in stop_ids)
    q = [int(t) for t in query]
    while q and q[-1] in stops:
        q.pop()
    return q + list(frag["after_query"])
