"""The memory pack: what Honcho returned, trimmed to a token budget and rendered as untrusted data.
Sections come in priority order, the dialectic's note first and within the budget, the agent's
self-model with a share of its own; empty sections are left out. Recalled text is neutralized
before it enters the block (safety/untrusted.py). The sections and their order:
docs/architecture.md ("Recall").
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field, replace

from ..safety.untrusted import neutralize

CHARS_PER_TOKEN = 4  # a conservative estimate for English text; Honcho counts with tiktoken
_PLACEHOLDER = "{{sections}}"
# A rendered block as a prompt holds it: from its opening tag (the last one before its end: the
# system prompt names the tag too) to its closing one.
_BLOCK = re.compile(r"<honcho_memory>(?:(?!<honcho_memory>).)*?</honcho_memory>", re.DOTALL)
REMOVED_BLOCK = "<honcho_memory>[removed: this chat was forgotten]</honcho_memory>"
# What Honcho writes before an observation's text: its id, when asked for, and its time
# (src/utils/representation.py, format_as_markdown), which differ between repeats.
_OBSERVATION_PREFIX = re.compile(r"^(?:\[id:[^\]]*\]\s*)?(?:\[\d{4}-\d\d-\d\d[ T][\d:]+\]\s*)?")


@dataclass
class ContextData:
    """The pack's input: a session's context as the gateway returned it, or the base pack's view of
    the user."""

    representation: str | None = None
    card: list[str] = field(default_factory=list)
    summary: str | None = None
    # (peer id, content), oldest first
    messages: list[tuple[str, str]] = field(default_factory=list)
    agent_representation: str | None = None  # the agent's model of itself
    agent_card: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class MemoryPack:
    sections: tuple[tuple[str, str], ...] = ()  # (title, text)

    @property
    def empty(self) -> bool:
        return not self.sections


def estimate_tokens(text: str) -> int:
    """Tokens of `text`, estimated from its length (rounded up)."""
    return -(-len(text) // CHARS_PER_TOKEN)


NOTE_TITLE = "What matters now (Honcho's synthesis)"
AGENT_TITLE = "What the agent knows about itself"


def without_turn(data: ContextData, words: str, user_peer: str, cut: bool = False) -> ContextData:
    """`data` without the turn's own message: when the worker delivered the typed message before
    recall loaded, the session's newest message is that message, which the prompt already holds.
    Told by its peer and its words (the turn's message on one line, redacted, as its query is
    made; `cut`: only its start, the message being longer); an earlier message with the same
    words, answered since, is not the newest and stays."""
    if not words or not data.messages:
        return data
    peer, content = data.messages[-1]
    said = " ".join(content.split())
    if peer != user_peer or not (said == words or (cut and said.startswith(words))):
        return data
    return replace(data, messages=list(data.messages[:-1]))


def without_repeats(data: ContextData) -> ContextData:
    """`data` with each conclusion and card fact once: Honcho derives a conclusion again in every
    chat it is said in. The first one in pack order stays (the conclusions come before the card),
    a repeated deduction goes with its premises, a heading left with nothing under it goes too.
    Repeats are told by their text (_text_key). The agent's self-model is matched only against
    itself (the same words about another peer say something else); messages are not matched (a
    conversation says things twice)."""
    user_seen: set[str] = set()
    agent_seen: set[str] = set()
    return replace(
        data,
        representation=_distinct_lines(data.representation, user_seen),
        card=_distinct_facts(data.card, user_seen),
        agent_representation=_distinct_lines(data.agent_representation, agent_seen),
        agent_card=_distinct_facts(data.agent_card, agent_seen))


def _text_key(line: str) -> str:
    """What two lines must share to be one conclusion: the text after Honcho's id and time, NFKC
    (a fullwidth letter is the letter), case-folded, its runs of whitespace one space. Who said
    it ("user said: ") is part of the text; punctuation is not folded."""
    text = unicodedata.normalize("NFKC", _OBSERVATION_PREFIX.sub("", line.strip()))
    return " ".join(text.casefold().split())


def _first_time(key: str, seen: set[str]) -> bool:
    if not key or key in seen:
        return False
    seen.add(key)
    return True


def _distinct_facts(facts: list[str], seen: set[str]) -> list[str]:
    return [fact for fact in facts if fact and _first_time(_text_key(fact), seen)]


def _distinct_lines(text: str | None, seen: set[str]) -> str | None:
    """A representation without its repeated entries. An entry is a line at the margin; indented
    lines under it (premises, sources) are its own; a line starting with '#' is a heading, kept
    once an entry under it is."""
    if not text:
        return text
    lines: list[str] = []
    heading: list[str] = []  # a heading and the blank lines after it, until an entry is kept
    keep = True  # whether the entry above (and so its indented lines) is kept
    for line in text.split("\n"):
        if line.startswith("#"):
            heading, keep = [line], True
        elif not line.strip():
            if heading:
                heading.append(line)
            elif lines and lines[-1].strip():
                lines.append(line)
        elif line[0].isspace() or _first_time(_text_key(line), seen):
            if line[0].isspace() and not keep:
                continue
            keep = True
            lines += heading
            heading = []
            lines.append(line)
        else:
            keep = False
    return "\n".join(lines)


def build_pack(data: ContextData, budget_tokens: int, include_messages: bool = True,
               user_peer: str = "user", agent_share: float = 0.0,
               note: str | None = None) -> MemoryPack:
    """The sections that fit the budget, in priority order; a section that does not fit is cut.

    `agent_share` of the budget is kept for the agent's self-model when `data` holds one; `note`
    (the dialectic's, already cut to its own limit) comes first and counts against the budget like
    the rest."""
    agent_text = "\n\n".join(part for part in ((data.agent_representation or "").strip(),
                                               _facts(data.agent_card))
                             if part)
    agent_budget = int(budget_tokens * agent_share) if agent_text and agent_share > 0 else 0
    candidates = [
        (NOTE_TITLE, (note or "").strip()),
        ("Relevant conclusions about the user", (data.representation or "").strip()),
        ("The user's card", _facts(data.card)),
        ("Summary of this conversation", (data.summary or "").strip()),
    ]
    if include_messages:
        candidates.append(("Relevant recent messages", _messages_text(data.messages, user_peer)))
    sections = _fitted(candidates, budget_tokens - agent_budget)
    if agent_budget:
        sections += _fitted([(AGENT_TITLE, agent_text)], agent_budget)
    return MemoryPack(tuple(sections))


def _fitted(candidates: list[tuple[str, str]], budget_tokens: int) -> list[tuple[str, str]]:
    """The candidates that fit `budget_tokens`, in order, each cut to what is left."""
    sections, left = [], budget_tokens
    for title, text in candidates:
        text = _clean(text)
        room = left - estimate_tokens(title) - 2
        if not text or room <= 0:
            continue
        fitted = _fit(text, room, keep_end=title.startswith("Relevant recent"))
        if fitted:
            sections.append((title, fitted))
            left -= estimate_tokens(title) + estimate_tokens(fitted) + 2
    return sections


def _facts(card: list[str]) -> str:
    return "\n".join(f"- {fact.strip()}" for fact in card if fact and fact.strip())


def render_block(pack: MemoryPack, template: str) -> str:
    """The pack inside the template's block; '' for an empty pack."""
    if pack.empty:
        return ""
    body = "\n\n".join(f"## {title}\n{text}" for title, text in pack.sections)
    return template.replace(_PLACEHOLDER, body).strip()


def without_blocks(text: str) -> tuple[str, int]:
    """`text` with every rendered block in it replaced by a note that it was removed; how many."""
    return _BLOCK.subn(REMOVED_BLOCK, text)


def _clean(text: str) -> str:
    return neutralize(text).strip() if text else ""


def _messages_text(messages: list[tuple[str, str]], user_peer: str) -> str:
    lines = [f"{'User' if peer == user_peer else 'Assistant'}: {' '.join(content.split())}"
             for peer, content in messages if content and content.strip()]
    return "\n".join(lines)


def _fit(text: str, room_tokens: int, keep_end: bool) -> str:
    """Cut `text` to `room_tokens` at a line (else word) boundary; messages keep their newest
    end."""
    limit = room_tokens * CHARS_PER_TOKEN
    if len(text) <= limit:
        return text
    lines = text.split("\n")
    kept: list[str] = []
    used = 0
    for line in (reversed(lines) if keep_end else lines):
        if used + len(line) + 1 > limit:
            break
        kept.append(line)
        used += len(line) + 1
    if kept:
        return "\n".join(reversed(kept) if keep_end else kept)
    cut = text[-limit:] if keep_end else text[:limit]  # one long line: cut at a word
    cut = cut.split(" ", 1)[-1] if keep_end else cut.rsplit(" ", 1)[0]
    return ("…" + cut) if keep_end else (cut + "…")
