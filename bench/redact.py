"""Redaction benchmark: prints one JSON line.

Runs the generated corpus (tests/redact_corpus.py) through `redact`: how many secret shapes it holds
and how many of them left a secret part in the output (`survivors`), how many look-alikes it holds
and how many came out changed (`mangled`). Then timings: the p50 of `redact` on a realistic
400-character message without a secret (`p50_us_400_chars`, the common case) and with one API key in
it (`p50_us_400_chars_with_secret`) or with a connection URL whose password holds `#` and a space
(`p50_us_400_chars_with_url`), and the median of `redact_long` on a 1 MB paste mixing Latin,
CJK, Cyrillic, emoji and code, none of it a secret (`ms_1mb_mixed_scripts`).

Each timing has a same-run baseline (issue 27): a bare pass over the same text, `str.lower()`,
timed turn about with it (bench/baseline.py), printed as `<key>_baseline`, and the difference as
`<key>_over_baseline` (what redaction adds to touching every character once); and the machine's
load at the start and the end (`load_avg_start`, `load_avg`).

    python bench/redact.py [--runs 20000] [--mb-runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

from baseline import alternated, beside  # noqa: E402
from capture import MESSAGE  # noqa: E402  (bench/capture.py: the same 400-character message)
from load import load_avg  # noqa: E402
from redact_corpus import lookalikes, secret_cases  # noqa: E402

from honcho_hub.safety.redact import redact, redact_long  # noqa: E402

KEY = "sk-proj-" + "Q7wErTy9UiOp3AsDfGh5JkLzXcVbNm12" * 2
WITH_SECRET = (
    MESSAGE[:200] + f" The key for the test account is {KEY} if you need it. " + MESSAGE[200:]
)[:400]
WITH_URL = (
    MESSAGE[:200]
    + "\nDATABASE_URL=postgres://svc:Kp4x#Qm9z wd7@db.internal:5432/app\n"
    + MESSAGE[200:]
)[:400]

_PIECES = (
    "Der Bericht über die Änderungen im Straßenverkehr erscheint nächste Woche, à bientôt. ",
    "今天的会议改到下午三点，请大家准时参加。我们会讨论新的设计方案（第二版）以及预算。",
    "Привет! Напомни мне завтра купить молоко, хлеб и яблоки — и позвонить маме в 18:00. ",
    "Great job 🎉🚀 the release is out 👨\u200d👩\u200d👧 family trip photos 📸 next 🌍✨ ",
    "def load(path):\n    with open(path) as f:\n        return json.load(f)  # max_tokens=500\n",
    "const url = `https://api.example.com/v1/items?page=${page}&sort=asc`;\n"
    "fetch(url).then(r => r.json());\n",
    "東京都の天気：晴れ、最高気温は２５度です。ＡＢＣ１２３のコードを確認してください。\n",
    "SELECT id, name FROM users WHERE created_at > '2024-01-01' ORDER BY id LIMIT 100;\n",
    "كان الاجتماع مفيدا جدا، شكرا لكم. ",
    "commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39 fixed the parser; "
    "uuid 123e4567-e89b-12d3-a456-426614174000\n",
)


def mixed_paste(size: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    parts, total = [], 0
    while total < size:
        piece = rng.choice(_PIECES)
        if rng.random() < 0.2:
            piece += "\n"
        parts.append(piece)
        total += len(piece)
    return "".join(parts)[:size]


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def p50_us(key: str, text: str, runs: int) -> dict[str, float]:
    """`redact(text)`'s p50 beside a bare `text.lower()`'s, turn about."""
    for _ in range(200):
        redact(text)
    ours, bare = alternated(lambda: redact(text), text.lower, runs)
    return beside(key, percentile(ours, 0.5), percentile(bare, 0.5), digits=2)


def corpus() -> dict:
    cases, looks = secret_cases(), lookalikes()
    survivors = sum(
        1 for case in cases if any(part in redact(case.text, case.host) for part in case.parts)
    )
    mangled = sum(1 for text in looks if redact(text) != text)
    return {
        "shapes": len(cases), "survivors": survivors, "lookalikes": len(looks), "mangled": mangled
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--mb-runs", type=int, default=5)
    args = parser.parse_args()
    load_start = load_avg()
    figures = corpus()
    figures.update(p50_us("p50_us_400_chars", MESSAGE, args.runs))
    figures.update(p50_us("p50_us_400_chars_with_secret", WITH_SECRET, args.runs))
    figures.update(p50_us("p50_us_400_chars_with_url", WITH_URL, args.runs))
    paste = mixed_paste(1_000_000)
    redact_long(paste)  # warm-up
    ours_us, bare_us = alternated(lambda: redact_long(paste), paste.lower, args.mb_runs)
    figures.update(beside("ms_1mb_mixed_scripts", percentile(ours_us, 0.5) / 1000,
                          percentile(bare_us, 0.5) / 1000))
    figures.update(load_avg_start=load_start, load_avg=load_avg())
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
