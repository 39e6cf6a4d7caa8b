"""Build S2 from options: the one place every command and benchmark gets its S2 backend from.

``--s2`` chooses the runtime: ``llama_cpp`` (in-process, the default) or ``vllm:URL[,URL...]`` (an
OpenAI-compatible vLLM server, ``vllm.py``). ``--s2-model`` names the model in that runtime's terms: a
GGUF path or embedded name for llama.cpp; for vLLM the served model, whose Hugging Face folder (a
path, an embedded name converted by ``scripts/setup_vllm.sh``, or a hub id in the local cache) gives
the tokenizer and chat template. The CLIs add the same flags with ``add_s2_arguments`` and turn them
into ``S2Options`` with ``s2_options``, so no command lacks an option another has.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from soma_local.errors import ModelFileError, SomaError
from soma_local.s2.base import S2Backend, SamplingParams

Runtime = Literal["llama_cpp", "vllm"]
THREADS_HELP = ("CPU threads for S2 and S1 (default: half the usable cores, at least 1; all cores make "
                "llama.cpp's spinning threads stall whenever anything else runs, see README)")


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
    def runtime(self) -> Runtime:
        return parse_runtime(self.s2)[0]

    @property
    def urls(self) -> list[str]:
        return parse_runtime(self.s2)[1]

    @property
    def sampling(self) -> SamplingParams:
        return SamplingParams(self.temperature, self.top_p, self.top_k, 0.0, self.seed)


def parse_runtime(spec: str) -> tuple[Runtime, list[str]]:
    """``llama_cpp`` or ``vllm:URL[,URL...]`` -> (runtime, server URLs)."""
    kind, _, rest = spec.partition(":")
    if kind in ("llama_cpp", "llama-cpp") and not rest:
        return "llama_cpp", []
    if kind == "vllm":
        urls = [u.strip().rstrip("/") for u in rest.split(",") if u.strip()]
        bad = [u for u in urls if not u.startswith(("http://", "https://"))]
        if not urls or bad:
            raise SomaError(f"--s2 {spec}: vllm takes server URLs, as in vllm:http://127.0.0.1:8000[,http://...]")
        return "vllm", urls
    raise SomaError(f"--s2 {spec}: unknown S2 runtime (known: llama_cpp, vllm:URL[,URL...])")


def add_s2_arguments(p: argparse.ArgumentParser, *, skip: tuple[str, ...] = ()) -> None:
    """The S2 flags; ``skip`` leaves out those a parser already defines differently."""
    flags = [
        ("--s2", dict(default="llama_cpp", help="S2 runtime: llama_cpp (in-process) or vllm:URL[,URL...] "
                      "(OpenAI-compatible vLLM servers; a question stays on one)")),
        ("--s2-model", dict(help="llama_cpp: GGUF path or embedded name (default: smollm2-135m); vllm: the served "
                            "model's Hugging Face folder, hub id or embedded name (tokenizer and chat template)")),
        ("--chat-template", dict(help="Jinja chat template file for a model without one")),
        ("--s2-timeout", dict(type=float, default=600.0, help="vllm: seconds one request may take")),
        ("--seed", dict(type=int, default=0, help="S2 sampling seed")),
        ("--temperature", dict(type=float, default=0.6, help="S2 sampling temperature (0: greedy)")),
        ("--top-p", dict(type=float, default=0.95, help="S2 nucleus sampling")),
        ("--top-k", dict(type=int, default=0, help="S2 top-k; 0 = off (use 20 for Qwen3)")),
        ("--n-ctx", dict(type=int, default=8192, help="llama_cpp: S2 context size in tokens (prompt + generation)")),
        ("--n-gpu-layers", dict(type=int, default=0, help="S2 layers on the GPU; -1 offloads all")),
        ("--threads", dict(type=int, help=THREADS_HELP)),
        ("--flash-attn", dict(action="store_true", help="flash attention in llama.cpp (GPU builds)")),
    ]
    for flag, kw in flags:
        if flag not in skip:
            p.add_argument(flag, **kw)


def s2_options(args: argparse.Namespace) -> S2Options:
    """Options from parsed flags; a flag a parser does not define keeps its default."""
    fields = S2Options.model_fields
    return S2Options(**{k: v for k, v in vars(args).items() if k in fields and v is not None})


def build_s2(options: S2Options, *, server: int = 0) -> S2Backend:
    """The backend the options describe. ``server`` picks one of several vLLM URLs (question
    affinity: a caller keeps one backend per in-flight question, so its prefix cache is reused)."""
    sampling = options.sampling
    template = None
    if options.chat_template:
        try:
            template = Path(options.chat_template).read_text(encoding="utf-8")
        except OSError as exc:
            raise ModelFileError(f"--chat-template {options.chat_template}: {exc.strerror}") from None
    if options.runtime == "vllm":
        from soma_local.s2.vllm import VllmS2

        urls = options.urls
        return VllmS2(urls[server % len(urls)], options.s2_model, chat_template=template, sampling=sampling,
                      timeout=options.s2_timeout)
    from soma_local.models import resolve_gguf
    from soma_local.s2.llama_cpp import LlamaCppS2

    return LlamaCppS2(
        resolve_gguf(options.s2_model),
        n_ctx=options.n_ctx,
        n_gpu_layers=options.n_gpu_layers,
        n_threads=options.threads,
        flash_attn=options.flash_attn,
        chat_template=template,
        sampling=sampling,
    )
