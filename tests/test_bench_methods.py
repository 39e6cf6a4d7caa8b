"""The baselines on the real embedded S2: sweeps read off exactly what a real run would produce."""

from soma_local.bench.methods.base import Harness
from soma_local.bench.methods.budget import FORCED_PREFILL, BudgetForcing
from soma_local.bench.methods.deer import Deer
from soma_local.bench.methods.dynasor import DynasorSweep
from soma_local.bench.methods.soma import SomaReadout
from soma_local.bench.methods.vanilla import Vanilla
from soma_local.engine.monitors import resolve_monitors
from soma_local.s2.base import SamplingParams
from soma_local.s2.formats import ThinkingFormat
from soma_local.engine.pauses import PauseRule

from conftest import ScriptedS1

PROMPT = "List the first twenty prime numbers and explain for each why it is prime."
# The embedded model rarely closes thinking; a stop text it never writes keeps it thinking.
FMT = ThinkingFormat("prompted", close="</never-closes>")
(OVERTHINKING,) = resolve_monitors(["overthinking"])


def harness(s2, **kw) -> Harness:
    base = dict(s2=s2, sampling=SamplingParams(0.8, 0.95, 0, 0.0, 21), max_tokens=160, thinking=FMT,
                pause=PauseRule(48, 16))
    base.update(kw)
    return Harness(**base)


def test_budget_sweep_equals_vanilla_and_a_real_forced_run(s2):
    e = harness(s2)
    vanilla = Vanilla().run(PROMPT, OVERTHINKING, e)
    sweep = BudgetForcing([40], answer_tokens=24).run(PROMPT, OVERTHINKING, e)
    # The main line is vanilla token for token: branches never touch the sampler.
    assert sweep.thinking == vanilla.thinking and sweep.answer == vanilla.answer
    (forced,) = sweep.extras["forced"]
    assert sweep.tokens.probe == forced["generated"] > 0
    # A real budget-forced run: think 40 tokens, then force the answer on the main line.
    session = e.session(PROMPT)
    session.think_to_pause(PauseRule(interval=40, slack=0))
    session.takeover("", FORCED_PREFILL, 24)
    assert session.tokens.thinking == 40 and forced["text"] == session.answer


def test_dynasor_probes_are_branches_and_count(s2):
    e = harness(s2)
    vanilla = Vanilla().run(PROMPT, OVERTHINKING, e)
    out = DynasorSweep(interval=32, probe_tokens=8).run(PROMPT, OVERTHINKING, e)
    assert out.thinking == vanilla.thinking
    probes = out.extras["probes"]
    assert [p["thinking_tokens"] for p in probes] == list(range(32, 32 * len(probes) + 1, 32)) and probes
    assert out.tokens.probe == sum(p["generated"] for p in probes)


def test_deer_peeks_at_wait_without_changing_the_run(s2):
    e = harness(s2)
    vanilla = Vanilla().run(PROMPT, OVERTHINKING, e)
    out = Deer(threshold=1.01).run(PROMPT, OVERTHINKING, e)  # never confident: runs to the end
    assert out.thinking == vanilla.thinking and out.tokens.probe > 0
    for check in out.extras["checks"]:  # a check happens only where S2 then writes "Wait"
        assert 0.0 <= check["confidence"] <= 1.0


def test_soma_readout_keeps_the_trace_for_read_off(s2):
    e = harness(s2, s1=ScriptedS1([0.9, 0.8, 0.8]))
    out = SomaReadout().run(PROMPT, OVERTHINKING, e)
    kinds = [r["type"] for r in out.records]
    assert kinds[0] == "run_start" and "reminder" in kinds and "branch" in kinds
    # The inserted paragraph is in the output and never in S2's own thinking. (S2 may write "<reminder>"
    # itself: SmolLM2 echoes the tag with words of its own on some CPUs, so the check is on what was inserted.)
    inserted = f"<reminder>{OVERTHINKING.reminder}</reminder>"
    assert inserted in out.extras["output"] and inserted not in out.thinking
