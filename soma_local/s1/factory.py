"""Build an S1 backend from a short spec string, as the CLI and the benchmarks take it.

``classifier`` or ``classifier:<name in s1_models/ or folder>``: the local trained classifier (default:
``classifier``, the statement reader ``minilm-statements``; ``soma serve`` defaults to ``SERVE_DEFAULT_S1``).
``readout`` or ``readout:<gguf path or embedded name>``: the training-free LLM judge (its yes/no token probabilities read out as p).
``jev``, ``jev:openrouter`` or ``jev:<base URL>``: Jev over HTTP (TypeSafe by default, honouring
TYPESAFE_BASE_URL; any Jev-compatible server, ``soma serve`` included). Its 2,048-token input limit is
measured with ``tokenizer`` (the S2's, when the caller has one) or the embedded S2's tokenizer.
``none``: no S1 (a vanilla run).
"""

from __future__ import annotations

from soma_local.errors import S1Error
from soma_local.s2.model_files import GgufVocab, resolve_gguf
from soma_local.s1.base import S1
from soma_local.s1.model_folders import DEFAULT_S1_MODEL
from soma_local.s1.state import TokenCounter

DEFAULT_S1 = "classifier"  # the classifier in s1_models/DEFAULT_S1_MODEL
DEFAULT_S1_HELP = f"classifier, i.e. classifier:{DEFAULT_S1_MODEL}"
# soma serve answers states that are not reasoning (messages, logs, tickets). There minilm-statements obeys the
# negation and text-vs-JSON rules better but the option-set rule worse beyond noise (its two-option complements
# sum to 0.49; python -m benchmarks.serve_rules), and choice answers are built from those option statements, so
# serve keeps minilm-reader until a statement reader is no worse on every rule.
SERVE_DEFAULT_S1 = "classifier:minilm-reader"
KNOWN = "classifier[:NAME|FOLDER], readout[:GGUF], jev[:openrouter|BASE_URL], none"


def check_spec(spec: str | None) -> None:
    """Reject an unknown S1 kind before anything loads."""
    if (spec or DEFAULT_S1).partition(":")[0] not in ("classifier", "readout", "jev", "none"):
        raise S1Error(f"unknown S1 '{spec}' (known: {KNOWN})")


def load_s1(
    spec: str | None,
    *,
    temperature: float | None = None,
    input_limit: int | None = None,
    n_threads: int | None = None,
    n_gpu_layers: int = 0,
    tokenizer: TokenCounter | None = None,
) -> S1 | None:
    check_spec(spec)
    spec = spec or DEFAULT_S1
    kind, _, arg = spec.partition(":")
    if kind == "none":
        return None
    if kind == "classifier":
        from soma_local.s1.classifier import ClassifierS1

        import torch

        from soma_local.threads import default_threads

        # torch's pool is per process; left alone it would use every core beside llama.cpp's threads.
        torch.set_num_threads(n_threads or default_threads())
        return ClassifierS1(arg or None, input_limit=input_limit, temperature=temperature)
    if kind == "readout":
        from soma_local.s1.llm_judge import LlmJudgeS1

        return LlmJudgeS1(
            resolve_gguf(arg or None),
            temperature=temperature or 1.0,
            input_limit=input_limit or 2048,
            n_threads=n_threads,
            n_gpu_layers=n_gpu_layers,
        )
    if kind == "jev":
        from soma_local.s1.jev import JevS1, resolve_endpoint

        base_url, key_env = resolve_endpoint(arg)
        return JevS1(
            base_url,
            tokenizer or GgufVocab.from_path(resolve_gguf(None)),
            key_env=key_env,
            input_limit=input_limit or 2048,
        )
    raise AssertionError(f"check_spec let an unhandled S1 kind through: {kind}")
