"""S1 scores kept on disk: a rerun, a different threshold grid or a second replay costs no S1 call."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Sequence

from soma_local.s1.base import S1, S1Query
from soma_local.s1.wrap import WrappedS1


class ScoreCache:
    """S1 probabilities per (S1 name, statement, task, reasoning), appended to one JSONL file per S1,
    so a rerun or a different threshold grid costs no S1 call."""

    def __init__(self, directory: str | Path, s1_name: str):
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in s1_name)
        self.path = Path(directory) / f"{safe}.jsonl"
        self.s1_name = s1_name
        self._scores: dict[str, float] = {}
        if self.path.is_file():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    row = json.loads(line)
                    self._scores[row["key"]] = row["p"]

    def key(self, query: S1Query) -> str:
        raw = "\0".join((self.s1_name, query.statement, query.task, query.reasoning))
        return hashlib.sha256(raw.encode()).hexdigest()

    def get(self, query: S1Query) -> float | None:
        return self._scores.get(self.key(query))

    def put(self, query: S1Query, p: float) -> None:
        k = self.key(query)
        self._scores[k] = p
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"key": k, "p": p}) + "\n")


class CachedS1(WrappedS1):
    """An S1 that answers from a ``ScoreCache`` and asks the wrapped S1 only for new queries.

    Also what makes two runs of one question comparable: the same state always gets the same p,
    whatever the wrapped model's numerics do with a different KV-cache history."""

    def __init__(self, inner: S1, cache: ScoreCache):
        super().__init__(inner)
        self.cache = cache

    def score(self, queries: Sequence[S1Query]) -> list[float | None]:
        missing = [q for q in queries if self.cache.get(q) is None]
        if missing:
            for q, p in zip(missing, self.inner.score(missing)):
                if p is not None:
                    self.cache.put(q, p)
        return [self.cache.get(q) for q in queries]
