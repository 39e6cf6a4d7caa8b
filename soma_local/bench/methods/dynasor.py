"""Dynasor-CoT (Fu et al., 2025), as a sweep: probe every ``interval`` thinking tokens, keep going.

Dynasor exits once the last k probe answers agree and none hesitates, and its exit writes a fixed
text around that answer (no generation). So one run that probes at a base interval and never exits
gives the outcome for every k and every multiple of the interval exactly; ``bench.score`` reads it
off, and the (interval, k) pair is chosen on the calibration sets.
"""

from __future__ import annotations

from soma_local.bench.methods.base import Harness, Method, Outcome, conclude, outcome_of, probe
from soma_local.engine.monitors import Monitor
from soma_local.engine.pauses import PauseRule

PROBE_SUFFIX = "... Oh, I suddenly got the answer to the whole problem, **Final Answer**\n\n\\[ \\boxed{"
UNCERTAIN_WORDS = ("wait", "hold", "but", "okay", "no", "hmm")
EXIT_CONCLUSION = "..."


def exit_prefill(answer: str) -> str:
    """Dynasor's exit text after thinking is closed, around the agreed answer."""
    return f"Oh, I have got the answer to the whole problem\n**Final Answer:**\n\\[\n \\boxed{{{answer}}}\n\\]"


def probe_answer(text: str) -> str:
    """The probe's answer: its text up to the first brace that closes the box."""
    depth = 0
    for i, ch in enumerate(text):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth < 0:
            return text[:i].strip()
    return text.strip()


def is_certain(text: str) -> bool:
    lower = text.lower()
    return not any(word in lower for word in UNCERTAIN_WORDS)


class DynasorSweep(Method):
    name = "dynasor"

    def __init__(self, interval: int = 64, probe_tokens: int = 20):
        self.interval = interval
        self.probe_tokens = probe_tokens

    def run(self, prompt: str, monitor: Monitor, harness: Harness) -> Outcome:
        session = harness.session(prompt)
        probes = []
        while True:
            stop = conclude(session, session.think_to_pause(PauseRule(interval=self.interval, slack=0)))
            if stop:
                return outcome_of(session, stop, probes=probes)
            before = session.tokens.probe
            text = probe(session, PROBE_SUFFIX, self.probe_tokens)
            probes.append(
                {
                    "thinking_tokens": session.tokens.thinking,
                    "answer": probe_answer(text),
                    "certain": is_certain(text),
                    "generated": session.tokens.probe - before,
                }
            )

    def settings(self) -> dict:
        return {"interval": self.interval, "probe_tokens": self.probe_tokens}
