"""Training-free S1: a local LLM's P(Yes) against P(No) after a yes/no question, via llama.cpp.

The state comes before the statement in the prompt so that the monitors of one pause share the state's
KV prefix and only the statement tail is decoded again. z = log P(Yes) - log P(No) (each summed over
the usual spellings) and p = sigmoid(z / T), with T fitted like any other S1's temperature.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from soma_local.s1.base import S1, sigmoid
from soma_local.s2.formats import Prompt, ThinkingFormat, prompt_for, prompt_ids
from soma_local.s2.llama_cpp import LlamaCppS2

JUDGE_SYSTEM = (
    "You read a task and the reasoning written so far, and judge whether a statement about that "
    "reasoning holds. Judge only what is visible in the text. Answer Yes or No."
)
JUDGE_USER = "{state}\n\nStatement: {statement}\n\nDoes the statement hold for the reasoning so far? Answer Yes or No."

_YES = ("Yes", " Yes", "yes", " yes", "YES")
_NO = ("No", " No", "no", " no", "NO")


class LlmJudgeS1(S1):
    def __init__(
        self,
        model_path: str | Path,
        *,
        temperature: float = 1.0,
        input_limit: int = 2048,
        n_threads: int | None = None,
        n_gpu_layers: int = 0,
    ):
        if not temperature > 0:
            raise ValueError("readout temperature must be > 0")
        self.llm = LlamaCppS2(
            model_path,
            n_ctx=input_limit + 256,
            n_threads=n_threads,
            n_gpu_layers=n_gpu_layers,
        )
        self.name = f"readout:{self.llm.name}"
        self.temperature = temperature
        self.input_limit = input_limit
        self._yes = self._first_ids(_YES)
        self._no = self._first_ids(_NO)
        # Render once with placeholders to learn how many tokens the template adds.
        probe = self._prompt("", "")
        self.template_tokens = len(prompt_ids(self.llm, probe)) + 8

    def _first_ids(self, words: Sequence[str]) -> np.ndarray:
        ids = {self.llm.tokenize(w)[0] for w in words if self.llm.tokenize(w)}
        return np.array(sorted(ids), dtype=np.int64)

    def _prompt(self, statement: str, state: str) -> Prompt:
        prompt = prompt_for(
            self.llm,
            JUDGE_USER.format(state=state, statement=statement),
            fmt=ThinkingFormat("prompted"),
            system=JUDGE_SYSTEM,
        )
        # prompt_for pre-fills a thinking tag for S2; the judge answers directly.
        return prompt.without_suffix("<think>\n")

    @property
    def tokenizer(self) -> LlamaCppS2:
        return self.llm

    def logit(self, statement: str, state: str) -> float:
        self.llm.load_prompt(prompt_ids(self.llm, self._prompt(statement, state)))
        logits = self.llm.next_logits().astype(np.float64)
        top = logits.max()
        yes = np.log(np.exp(logits[self._yes] - top).sum()) + top
        no = np.log(np.exp(logits[self._no] - top).sum()) + top
        return float(yes - no)

    def score_states(self, pairs: Sequence[tuple[str, str]]) -> list[float | None]:
        return [sigmoid(self.logit(statement, state) / self.temperature) for statement, state in pairs]

    def close(self) -> None:
        self.llm.close()
