"""The memory pack: what Honcho returned, trimmed to a token budget and rendered as untrusted data.
Sections come in priority order, the dialectic's note first and within the budget, the agent's
self-model with a share of its own; empty sections are left out. Recalled text is neutralized
before it enters the block (safety/untrusted.py). The sections and their order:
docs/architecture.md ("Recall").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from ..safety.untrusted import neutralize

CHARS_PER_TOKEN = 4  # a conservative estimate for English text; Honcho counts with tiktoken
_PLACEHOLDER = "{{sections}}"
# A rendered block as a prompt holds it: from its opening tag (the last one before its end: the
# system prompt names the tag too) to its closing one.
_BLOCK = re.compile(r"<honcho_memory>(?:(?!<honcho_memory>).)*?</honcho_memory>", re.DOTALL)
REMOVED_BLOCK = "<honcho_memory>[removed: this chat was forgotten]</honcho_memory>"


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


def without_turn(data: ContextData, query: str, user_peer: str) -> ContextData:
    """`data` without the turn's own message: when the worker delivered the typed message before
    recall loaded, the session's newest message is that message, which the prompt already holds.
    Told by its words (`query`, the turn's one-line search query) and its peer; an earlier message
    with the same words, answered since, is not the newest and stays."""
    if not query or not data.messages:
        return data
    peer, content = data.messages[-1]
    if peer != user_peer or " ".join(content.split()) != query:
        return data
    return replace(data, messages=list(data.messages[:-1]))


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
