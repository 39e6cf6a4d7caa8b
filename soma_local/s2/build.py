"""Build S2 from options: the one place every command and benchmark gets its S2 backend from.

``--s2`` chooses the runtime: ``llama_cpp`` (in-process, the default) or ``vllm:URL[,URL...]`` (an
OpenAI-compatible vLLM server, ``vllm.py``). ``--s2-model`` names the model in that runtime's terms: a
GGUF path or embedded name for llama.cpp; for vLLM the served model, whose Hugging Face folder (a
path, an embedded name converted by ``scripts/setup_vllm.sh``, or a hub id in the local cache) gives
the tokenizer and chat template. The CLIs add the same flags (``cli.args.add_s2_arguments``) and turn
them into ``S2Options``, so no command lacks an option another has.
"""

from __future__ import annotations

from pathlib import Path
from dataclasses import dataclass
from typing import Callable

from pydantic import BaseModel, ConfigDict

from soma_local.errors import ModelFileError, SomaError
from soma_local.s2.base import S2Backend, SamplingParams

class S2Options(BaseModel):
    """What builds an S2 backend. Sampling lives here too: it is part of what makes a run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    s2: str = "llama_cpp"
    s2_model: str | None = None
    chat_template: str | None = None  # a Jinja file for a model without a template
    n_ctx: int = 8192
    n_gpu_layers: int = 0
    threads: int | None = None
    flash_attn: bool = False
    temperature: float = 0.6
    top_p: float = 0.95
    top_k: int = 0
    seed: int = 0
    s2_timeout: float = 600.0

    @property
    def runtime(self) -> str:
        return parse_runtime(self.s2)[0]

    @property
    def targets(self) -> list[str]:
        """What the runtime runs on, from ``--s2 NAME:...`` (a server runtime's URLs)."""
        return parse_runtime(self.s2)[1]

    @property
    def sampling(self) -> SamplingParams:
        return SamplingParams(self.temperature, self.top_p, self.top_k, 0.0, self.seed)


@dataclass(frozen=True)
class Runtime:
    """One S2 runtime as ``--s2`` names it: how the rest of its spec is read, how a backend is built
    (``target``: one of the spec's targets, or None), and whether several sessions may run at once."""

    build: Callable[[S2Options, str | None], S2Backend]
    targets: Callable[[str], list[str]]
    concurrent: bool = False


def _no_targets(rest: str) -> list[str]:
    if rest:
        raise SomaError(f"--s2 llama_cpp takes nothing after the name, got ':{rest}'")
    return []


def _server_urls(rest: str) -> list[str]:
    urls = [u.strip().rstrip("/") for u in rest.split(",") if u.strip()]
    if not urls or any(not u.startswith(("http://", "https://")) for u in urls):
        raise SomaError(f"--s2 vllm:{rest}: vllm takes server URLs, as in vllm:http://127.0.0.1:8000[,http://...]")
    return urls


def _llama_cpp(options: S2Options, target: str | None) -> S2Backend:
    from soma_local.s2.llama_cpp import LlamaCppS2
    from soma_local.s2.model_files import resolve_gguf

    return LlamaCppS2(resolve_gguf(options.s2_model), n_ctx=options.n_ctx, n_gpu_layers=options.n_gpu_layers,
                      n_threads=options.threads, flash_attn=options.flash_attn,
                      chat_template=_chat_template(options), sampling=options.sampling)


def _vllm(options: S2Options, target: str | None) -> S2Backend:
    from soma_local.s2.vllm import VllmS2

    return VllmS2(target, options.s2_model, chat_template=_chat_template(options), sampling=options.sampling,
                  timeout=options.s2_timeout)


# The runtimes --s2 can name. A new runtime is its backend module plus one line here.
RUNTIMES: dict[str, Runtime] = {
    "llama_cpp": Runtime(_llama_cpp, _no_targets),
    "vllm": Runtime(_vllm, _server_urls, concurrent=True),
}


def parse_runtime(spec: str) -> tuple[str, list[str]]:
    """``NAME[:REST]`` -> (runtime name, its targets), e.g. ``vllm:URL[,URL...]`` -> server URLs."""
    kind, _, rest = spec.partition(":")
    kind = kind.replace("-", "_")
    if kind not in RUNTIMES:
        known = ", ".join(RUNTIMES)
        raise SomaError(f"--s2 {spec}: unknown S2 runtime (known: {known}; vllm takes :URL[,URL...])")
    return kind, RUNTIMES[kind].targets(rest)


def _chat_template(options: S2Options) -> str | None:
    if not options.chat_template:
        return None
    try:
        return Path(options.chat_template).read_text(encoding="utf-8")
    except OSError as exc:
        raise ModelFileError(f"--chat-template {options.chat_template}: {exc.strerror}") from None


def build_s2(options: S2Options, *, server: int = 0) -> S2Backend:
    """The backend the options describe. ``server`` picks one of several targets (question affinity:
    a caller keeps one backend per in-flight question, so a server's prefix cache is reused)."""
    name, targets = parse_runtime(options.s2)
    return RUNTIMES[name].build(options, targets[server % len(targets)] if targets else None)
