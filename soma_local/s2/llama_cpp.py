"""S2 in-process on llama.cpp (llama-cpp-python) with a hand-written decode/sample loop.

Why not ``create_completion``: it re-detokenizes the whole completion every step and rebuilds state
per call. Here the sampler chain is built once, each step is one ``llama_sampler_sample`` and one
``llama_decode`` of a one-token batch built once, through the raw bindings, and token pieces and
end-of-generation flags are cached by id: a generated token costs about 1.5 us of Python more than a
loop of those two C calls alone (``native_loop``, the baseline of ``benchmarks/s2_speed.py``). Rollback
removes the KV tail and re-decodes the last kept token, so the next-token logits are recomputed from
exactly the same cache layout as before the branch; the sampler is cloned for a branch, so its RNG is
untouched on the main line.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from soma_local.errors import ModelFileError
from soma_local.s2.base import S2Backend, SamplingParams
from soma_local.s2.model_files import GgufVocab
from soma_local.threads import default_threads, usable_cores

# Prompts longer than this report their loading progress (a CPU decodes a few hundred tokens a second).
_PROGRESS_FROM = 4096


def _wait_passively_if_every_core(n_threads: int) -> None:
    """When llama.cpp's threads take every core, make OpenMP threads sleep at barriers, not spin.

    With every core spinning, one preempted thread stalls the rest until it runs again: at 2 threads
    on 2 busy cores, spinning decoded 0.5-0.9 tok/s and passive waiting 13-20 (``benchmarks/threads.py``).
    OpenMP reads the policy once, when it loads, so this only acts before llama.cpp is first loaded
    in the process, and never overrides a policy the user set."""
    if n_threads > 1 and n_threads >= usable_cores():
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def extra_buffer_types_allowed() -> bool:
    """Whether llama.cpp may use its extra CPU buffer types (AMX matmul, repacked weights).

    On virtual machines whose CPU advertises AMX but whose hypervisor does not save the tile state, a
    native build's AMX kernels die with SIGILL on the first batched matmul (seen on this project's CI
    machines: a prompt of a few hundred tokens kills the process). Where the CPU advertises AMX they
    are off unless SOMA_LLAMA_EXTRA_BUFTS=1 says the machine runs them (bare-metal Sapphire Rapids and
    later); elsewhere they stay on, since the repacked kernels speed up Q4_0/Q4_K prompts on AVX2.
    """
    choice = os.environ.get("SOMA_LLAMA_EXTRA_BUFTS")
    if choice is not None:
        return choice.strip() not in ("", "0", "false", "no")
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True
    return " amx_tile" not in flags


def build_info() -> str:
    """The instruction sets this llama.cpp build was compiled for ("AVX AVX2 F16C FMA ..."): what decides
    whether two machines write the same text for a seed (``scripts/setup.sh``, ``SOMA_LLAMA_BUILD``)."""
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode(errors="replace")
    names = [part.split("=")[0].strip() for part in info.replace("CPU :", "|").split("|") if part.strip().endswith("= 1")]
    return " ".join(names) or info.strip()


@contextmanager
def _model_params(use_extra_bufts: bool) -> Iterator[None]:
    """llama-cpp-python's ``Llama`` takes no ``use_extra_bufts`` argument; it starts from
    ``llama_model_default_params()``, so that is where the choice goes, for the one load inside."""
    import llama_cpp.llama_cpp as raw

    default = raw.llama_model_default_params

    def params():
        p = default()
        p.use_extra_bufts = use_extra_bufts
        return p

    raw.llama_model_default_params = params
    try:
        yield
    finally:
        raw.llama_model_default_params = default


class LlamaCppS2(S2Backend):
    def __init__(
        self,
        model_path: str | Path,
        *,
        n_ctx: int = 8192,
        n_gpu_layers: int = 0,
        n_threads: int | None = None,
        n_batch: int = 512,
        flash_attn: bool = False,
        chat_template: str | None = None,
        sampling: SamplingParams | None = None,
    ):
        path = Path(model_path)
        if not path.is_file():
            raise ModelFileError(f"{path}: S2 model file not found")
        threads = n_threads or default_threads()
        _wait_passively_if_every_core(threads)
        import llama_cpp

        super().__init__()
        self._lib = llama_cpp
        self._ends: dict[int, bool] = {}
        try:
            with _model_params(extra_buffer_types_allowed()):
                self.llm = llama_cpp.Llama(
                    model_path=str(path),
                    n_ctx=n_ctx,
                    n_batch=n_batch,
                    n_gpu_layers=n_gpu_layers,
                    n_threads=threads,
                    n_threads_batch=threads,
                    flash_attn=flash_attn,
                    logits_all=False,
                    verbose=False,
                )
        except (ValueError, RuntimeError) as exc:
            raise ModelFileError(f"{path}: llama.cpp could not load it as a GGUF model: {exc}") from None
        self.name = path.name
        self.path = path
        self.n_ctx = self.llm.n_ctx()
        self.n_batch = n_batch
        self._ctx = self.llm._ctx.ctx
        self.vocab = GgufVocab(self.llm, self.name)
        self._mem = llama_cpp.llama_get_memory(self._ctx)
        self.chat_template = chat_template or self.llm.metadata.get("tokenizer.chat_template")
        self.bos_token = self._special_text(self.llm.token_bos())
        self.eos_token = self._special_text(self.llm.token_eos())
        self._one = (llama_cpp.llama_token * 1)()
        # The one-token batch every generated token is decoded in: built once, it points at ``_one``.
        self._one_batch = llama_cpp.llama_batch_get_one(self._one, 1)
        self._sampler = None
        self.set_sampling(sampling or SamplingParams())

    # ---- tokens ------------------------------------------------------------------------------
    def _special_text(self, token: int) -> str:
        return "" if token < 0 else self.piece(token).decode("utf-8", errors="replace")

    def tokenize(self, text: str, *, special: bool = False, add_bos: bool = False) -> list[int]:
        return self.vocab.tokenize(text, special=special, add_bos=add_bos)

    def piece(self, token: int) -> bytes:
        return self.vocab.piece(token)

    def is_end(self, token: int) -> bool:
        end = self._ends.get(token)  # asked once a generated token: remembered, not a C call each time
        if end is None:
            end = self._ends[token] = self.vocab.is_end(token)
        return end

    def next_logits(self) -> np.ndarray:
        """The next-token logits after the last decoded token (a numpy view; copy to keep)."""
        ptr = self._lib.llama_get_logits_ith(self._ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.llm.n_vocab(),))

    # ---- context -----------------------------------------------------------------------------
    @property
    def context_size(self) -> int:
        return self.n_ctx

    def _decode(self, ids: list[int], progress: Callable[[int, int], None] | None = None) -> None:
        lib = self._lib
        if len(self._ids) + len(ids) > self.n_ctx:
            raise ModelFileError(
                f"{self.name}: context of {self.n_ctx} tokens is full; raise --n-ctx"
            )
        for start in range(0, len(ids), self.n_batch):
            if progress is not None:
                progress(start, len(ids))
            part = ids[start : start + self.n_batch]
            if len(part) == 1:
                self._one[0] = part[0]
                batch = self._one_batch
            else:
                arr = (lib.llama_token * len(part))(*part)  # alive through the decode: the batch points at it
                batch = lib.llama_batch_get_one(arr, len(part))
            rc = lib.llama_decode(self._ctx, batch)
            if rc != 0:
                raise RuntimeError(f"llama_decode failed with code {rc} at position {len(self._ids)}")
            self._ids.extend(part)

    def _truncate(self, n: int) -> None:
        """Keep the first ``n`` tokens and recompute the logits of the last one."""
        if n <= 0:
            raise ValueError("cannot roll back to an empty context")
        last = self._ids[n - 1]
        self._lib.llama_memory_seq_rm(self._mem, -1, n - 1, -1)
        del self._ids[n - 1 :]
        self._decode([last])

    def _load(self, ids: list[int]) -> float:
        """Start a run: the prompt is always decoded from an empty context, in the same two steps.

        Reusing a shared prefix of the previous run would make the prompt's logits depend on that
        run: a batched decode and a shorter or single-token one differ in the last bits, which is
        enough to flip a sampled token. Then a question's output would depend on which method or
        question ran before it in the process (or on where a killed bench run resumed). The prompt
        is a few hundred tokens, so decoding it afresh costs little next to the run itself."""
        t0 = time.perf_counter()
        self._lib.llama_memory_seq_rm(self._mem, -1, 0, -1)
        self._ids.clear()
        report = self.prompt_progress if len(ids) > _PROGRESS_FROM else None
        self._decode(ids[:-1], report)
        self._decode(ids[-1:])  # the last token on its own, as after any rollback
        if report is not None:
            report(len(ids), len(ids))
        return time.perf_counter() - t0

    def _append(self, ids: list[int]) -> float:
        t0 = time.perf_counter()
        self._decode(ids)
        return time.perf_counter() - t0

    # ---- sampling ----------------------------------------------------------------------------
    def set_sampling(self, params: SamplingParams) -> None:
        lib = self._lib
        if self._sampler is not None:
            lib.llama_sampler_free(self._sampler)
        chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        if params.temperature <= 0:
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_greedy())
        else:
            if params.top_k > 0:
                lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_top_k(params.top_k))
            if params.top_p < 1.0:
                lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_top_p(params.top_p, 1))
            if params.min_p > 0:
                lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_min_p(params.min_p, 1))
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_temp(params.temperature))
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_dist(params.seed & 0xFFFFFFFF))
        self._sampler = chain
        self.sampling = params

    def _sample(self, max_tokens: int, stop_at_newline: bool) -> Iterator[int]:
        sample, ctx, sampler = self._lib.llama_sampler_sample, self._ctx, self._sampler
        for _ in range(max_tokens):
            yield sample(sampler, ctx, -1)

    def _keep(self, token: int) -> None:
        self._one[0] = token
        rc = self._lib.llama_decode(self._ctx, self._one_batch)
        if rc != 0:
            raise RuntimeError(f"llama_decode failed with code {rc} at position {len(self._ids)}")

    @contextmanager
    def _branch_sampler(self) -> Iterator[None]:
        main = self._sampler
        self._sampler = self._lib.llama_sampler_clone(main)
        try:
            yield
        finally:
            self._lib.llama_sampler_free(self._sampler)
            self._sampler = main

    def _rewind(self, n: int) -> None:
        # Always re-decode the last kept token: anything fed in the branch replaced the logits.
        self._truncate(n)

    # ---- measuring (benchmarks/s2_speed.py, benchmarks/threads.py) ----------------------------
    def set_threads(self, n_threads: int) -> None:
        """Decode with ``n_threads`` threads from now on: one loaded model measured at each count."""
        self._lib.llama_set_n_threads(self._ctx, n_threads, n_threads)

    def reset_decode_counters(self) -> None:
        """Zero llama.cpp's own decode counters (``decode_counters``)."""
        self._lib.llama_perf_context_reset(self._ctx)

    def decode_counters(self) -> tuple[float, int]:
        """(seconds, tokens) of single-token decodes since ``reset_decode_counters``, as llama.cpp's own
        perf counters give them: the C-side cost with no sampling and no Python, so the ceiling any
        decode loop can reach with this build."""
        data = self._lib.llama_perf_context(self._ctx)
        return data.t_eval_ms / 1000.0, data.n_eval

    def native_loop(self, n_tokens: int, *, timed: bool = False, sync: bool = True,
                    idle_after_decode: float = 0.0) -> tuple[list[int], float, float, float]:
        """Generate ``n_tokens`` from the context with nothing of ours per token: the baseline a Python
        loop is measured against (``benchmarks/s2_speed.py``). Per token, one ``llama_sampler_sample``
        (this runtime's sampler chain, so the same tokens as ``generate`` from the same seed) and one
        ``llama_decode`` of a prebuilt one-token batch through the raw bindings: no end-of-generation
        check (ends are decoded like any token), no pieces, no stop scan, no per-token allocation.

        Returns (ids, wall seconds, decode seconds, sample seconds). The split is measured only when
        ``timed`` (else both are 0): the clock is read around each call and, with ``sync``, a
        ``llama_synchronize`` ends each decode (on a GPU ``llama_decode`` returns before the work is
        done). ``idle_after_decode`` sleeps that long between a decode and the next sample, to show
        what llama.cpp's own eval counter (``decode_counters``) counts. The tokens are kept, as after
        ``generate``."""
        if n_tokens > self.context_left:
            raise ModelFileError(f"{self.name}: context of {self.n_ctx} tokens is full; raise --n-ctx")
        lib, ctx, sampler = self._lib, self._ctx, self._sampler
        sample, decode, synchronize = lib.llama_sampler_sample, lib.llama_decode, lib.llama_synchronize
        one = (lib.llama_token * 1)()
        batch = lib.llama_batch_get_one(one, 1)
        out = (lib.llama_token * n_tokens)()
        clock = time.perf_counter
        decode_s = sample_s = 0.0
        if timed or idle_after_decode:
            t0 = clock()
            for i in range(n_tokens):
                a = clock()
                one[0] = out[i] = sample(sampler, ctx, -1)
                b = clock()
                decode(ctx, batch)
                if timed and sync:
                    synchronize(ctx)
                c = clock()
                sample_s += b - a
                decode_s += c - b
                if idle_after_decode:
                    time.sleep(idle_after_decode)
            wall = clock() - t0
        else:
            t0 = clock()
            for i in range(n_tokens):
                one[0] = out[i] = sample(sampler, ctx, -1)
                decode(ctx, batch)
            wall = clock() - t0
        ids = list(out)
        self._ids.extend(ids)
        self._tail = b""
        return ids, wall, (decode_s if timed else 0.0), (sample_s if timed else 0.0)

    def clear_context(self) -> None:
        """Empty the context: no tokens here, none in llama-cpp-python's ``llm``, an empty KV cache. Lets
        ``llm``'s own generation paths run on this context, and the next ``load_prompt`` start clean."""
        self.llm.reset()
        self._ids.clear()
        self._lib.llama_memory_clear(self._mem, True)

    def close(self) -> None:
        if self._sampler is not None:
            self._lib.llama_sampler_free(self._sampler)
            self._sampler = None
        self.llm.close()
