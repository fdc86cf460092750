"""What a forgotten chat leaves in Honcho: the conclusions dreams derived from its conclusions (they
cite them, and live under no session or another one, so the session's delete leaves them) and the
card facts that match its text. Recorded before the delete, found after it, removed only when the
user confirms. docs/reference.md ("Forget a chat completely") says what the server cannot do.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..bounded import BoundedMap
from ..errors import HonchoRequestError, PermanentError
from ..gateway import queries
from ..gateway.gateway import HonchoGateway
from ..gateway.queries import PairConclusion
from ..safety.untrusted import inert_line

MAX_RECORDED = 200  # of the chat's own conclusions, read before the delete
MAX_OFFERED = 100  # derived conclusions offered at once
CITING_CHUNK = 50  # ids a listing asks about (one OR of containments)
ROUNDS = 3  # derived from derived: a bounded depth
MAX_PAIRS = 4  # cards read: one per observer and observed peer of the chat's conclusions
MATCH_SHARE = 0.8  # of a card fact's words that must be in one of the chat's conclusions
MAX_HELD = 32  # chats whose leftovers wait for a confirmation (the newest)
SHOWN_CHARS = 600  # of a conclusion or fact as the offer shows it (the tool's item)

_TAG = re.compile(r"^\s*[A-Z][A-Z _-]*:\s*")  # a card's "ATTRIBUTE: " and the like
_SAID = re.compile(r"^\s*\S+ said:\s*", re.IGNORECASE)  # "user said: " (the deriver's wording)
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an and are as at be been by for from had has have he her his i in is it its"
                  " me my of on or our s she that the their them they this to was we were with"
                  " you your".split())


@dataclass(frozen=True)
class CardFact:
    observer: str
    observed: str
    fact: str


@dataclass(frozen=True)
class Leftovers:
    """What survived a chat's forget and may be removed on confirmation."""

    recorded: int  # the chat's conclusions read before the delete
    conclusions: tuple[PairConclusion, ...] = ()
    card_facts: tuple[CardFact, ...] = ()
    more: bool = False  # a bound was reached: more may exist

    def offer(self) -> dict[str, Any]:
        """JSON-safe, for the report of the forget, which the sidebar lists: Honcho's text on one
        line, inert, redacted and cut to SHOWN_CHARS."""
        return {"recorded": self.recorded, "more": self.more,
                "conclusions": [{"id": c.id, "content": inert_line(c.content, SHOWN_CHARS),
                                 "level": c.level, "session_id": c.session_id}
                                for c in self.conclusions],
                "card_facts": [{"observer": f.observer, "observed": f.observed,
                                "fact": inert_line(f.fact, SHOWN_CHARS)} for f in self.card_facts]}


@dataclass(frozen=True)
class Recorded:
    conclusions: tuple[PairConclusion, ...]
    more: bool


def record(gw: HonchoGateway, session_ids: Iterable[str]) -> Recorded:
    """The chat's own conclusions, read before its sessions are deleted (their ids are what derived
    conclusions cite; their text is what card facts are matched against)."""
    found: list[PairConclusion] = []
    more = False
    for session_id in session_ids:
        if len(found) >= MAX_RECORDED:
            return Recorded(tuple(found), True)
        page, over = queries.session_conclusions(gw, session_id, MAX_RECORDED - len(found))
        found += page
        more = more or over
    return Recorded(tuple(found), more)


def find(gw: HonchoGateway, recorded: Recorded, forgotten: Iterable[str]) -> Leftovers:
    """What cites the recorded conclusions (and what cites those, ROUNDS deep), outside the
    forgotten sessions, and the card facts matching the recorded text."""
    forgotten = set(forgotten)
    seen = {c.id for c in recorded.conclusions}
    frontier, more = list(seen), recorded.more
    derived: list[PairConclusion] = []
    for _ in range(ROUNDS):
        next_round: list[str] = []
        for start in range(0, len(frontier), CITING_CHUNK):
            if len(derived) >= MAX_OFFERED:
                return Leftovers(len(recorded.conclusions), tuple(derived),
                                 _card_facts(gw, recorded), True)
            page, over = queries.citing_conclusions(gw, frontier[start:start + CITING_CHUNK],
                                                    MAX_OFFERED - len(derived))
            more = more or over
            fresh = [c for c in page if c.id not in seen and c.session_id not in forgotten]
            seen.update(c.id for c in page)
            derived += fresh
            next_round += [c.id for c in fresh]
        frontier = next_round
    return Leftovers(len(recorded.conclusions), tuple(derived[:MAX_OFFERED]),
                     _card_facts(gw, recorded), more or len(derived) > MAX_OFFERED)


def _card_facts(gw: HonchoGateway, recorded: Recorded) -> tuple[CardFact, ...]:
    pairs = list(dict.fromkeys((c.observer, c.observed) for c in recorded.conclusions))
    facts: list[CardFact] = []
    for observer, observed in pairs[:MAX_PAIRS]:
        said = [c.content for c in recorded.conclusions if c.observed == observed]
        facts += [CardFact(observer, observed, fact)
                  for fact in queries.read_card(gw, observer, observed)
                  if card_fact_matches(fact, said, ignored={observer, observed})]
    return tuple(facts)


def card_fact_matches(fact: str, said: Iterable[str], ignored: Iterable[str] = ()) -> bool:
    """Whether a card fact restates one of the chat's conclusions: at least MATCH_SHARE of its
    words (tags such as "ATTRIBUTE:", "<peer> said:", short words and the peers' own names left
    out; a plural's s too) are in one conclusion. A one-word fact matches only a conclusion saying
    just that word."""
    skip = {w.lower() for w in ignored}
    words = _words(fact, skip)
    if not words:
        return False
    for text in said:
        theirs = _words(text, skip)
        if len(words) == 1:
            if theirs == words:
                return True
        elif len(words & theirs) >= MATCH_SHARE * len(words):
            return True
    return False


def _words(text: str, skip: set[str]) -> set[str]:
    text = _SAID.sub("", _TAG.sub("", str(text)))
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w
            for w in _WORD.findall(text.lower()) if w not in _STOP and w not in skip}


def remove(gw: HonchoGateway, leftovers: Leftovers) -> dict[str, Any]:
    """Delete the offered conclusions and take the offered facts out of their cards (each card
    read again, the other facts kept); what could not be removed, with its error code."""
    removed = gone = facts_removed = 0
    not_removed: list[dict[str, Any]] = []
    for conclusion in leftovers.conclusions:
        try:
            queries.delete_conclusion(gw, conclusion.observer, conclusion.observed, conclusion.id)
            removed += 1
        except PermanentError as exc:
            if exc.code != "http_404":
                not_removed.append({"conclusion": conclusion.id, "code": exc.code})
            else:
                gone += 1  # deleted meanwhile
        except HonchoRequestError as exc:
            not_removed.append({"conclusion": conclusion.id, "code": exc.code})
    cards: dict[tuple[str, str], set[str]] = {}
    for fact in leftovers.card_facts:
        cards.setdefault((fact.observer, fact.observed), set()).add(fact.fact)
    for (observer, observed), facts in cards.items():
        try:
            card = queries.read_card(gw, observer, observed)
            kept = [fact for fact in card if fact not in facts]
            if len(kept) != len(card):
                queries.set_card(gw, observer, observed, kept)
            facts_removed += len(card) - len(kept)
        except HonchoRequestError as exc:
            not_removed.append({"card": f"{observer} about {observed}", "facts": len(facts),
                                "code": exc.code})
    return {"conclusions_removed": removed, "conclusions_gone": gone,
            "card_facts_removed": facts_removed, "not_removed": not_removed}


class Held:
    """Leftovers waiting for the user's confirmation, by destination and chat (removed only where
    they were found): the newest MAX_HELD, in this process only (the chat's conclusion ids are gone
    from Honcho once it is forgotten, so a restart cannot find them again; the report lists
    them)."""

    def __init__(self, limit: int = MAX_HELD) -> None:
        self._lock = threading.Lock()
        self._held: BoundedMap[tuple[str, str], Leftovers] = BoundedMap(limit)

    def put(self, destination: str, chat_id: str, leftovers: Leftovers) -> None:
        with self._lock:
            self._held.put((destination, chat_id), leftovers)

    def take(self, destination: str, chat_id: str) -> Leftovers | None:
        with self._lock:
            return self._held.pop((destination, chat_id), None)


HELD = Held()
