"""S2 on a vLLM server: the ``S2Backend`` primitives over the OpenAI-compatible ``/v1/completions``.

Token ids are the transcript: the prompt goes out as ids and the generated ids come back
(``return_token_ids``), never a round trip through text. The backend keeps the run's ids locally; each
``generate`` is one request on the whole context, and vLLM's prefix cache makes the repeated prefix
nearly free. So a pause is ``max_tokens``, the +128 run-on stops on every vocabulary id that holds a
line break (``stop_token_ids``: exactly on a token boundary), reminders and takeovers append ids, and a
branch is a request on the same prefix followed by forgetting its ids.

Sampling is reproducible per request: each request's seed derives from the run's seed and the
context length it starts at. The same seed and the same pauses give the same tokens, and a readout
branch (another request at another length) never changes the main line. A close text such as
``</think>`` is found in the returned ids' bytes and the ids after it are dropped, as in-process.

A server that fails, times out or restarts is retried a few times (a request is a pure function of
its ids and seed, so a retry gives the same tokens); after that the run stops with one clear error.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from typing import Iterator

from soma_local.errors import ModelFileError, SomaError
from soma_local.s2.base import END, S2Backend, SamplingParams
from soma_local.s2.hf_tokens import load_hf_tokenizer


class S2ServerError(SomaError):
    pass


def request_seed(seed: int, position: int) -> int:
    """A request's seed from the run's seed and where in the context the request starts."""
    digest = hashlib.blake2b(f"{seed}:{position}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & 0x7FFFFFFF


@dataclass
class ServerStats:
    """What the requests of one backend cost the server (the throughput benchmark reads these)."""

    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    generated_tokens: int = 0
    retries: int = 0

    def add(self, other: "ServerStats") -> None:
        for k in vars(self):
            setattr(self, k, getattr(self, k) + getattr(other, k))


_clients: dict[str, object] = {}
_clients_lock = threading.Lock()


def _client(base_url: str, timeout: float):
    """One connection pool per server, shared by every in-flight run of the process."""
    import httpx

    with _clients_lock:
        client = _clients.get(base_url)
        if client is None:
            client = httpx.Client(base_url=base_url, timeout=httpx.Timeout(timeout, connect=10.0),
                                  limits=httpx.Limits(max_connections=256, max_keepalive_connections=256))
            _clients[base_url] = client
        return client


class VllmS2(S2Backend):
    def __init__(
        self,
        base_url: str,
        model: str | None,
        *,
        chat_template: str | None = None,
        sampling: SamplingParams | None = None,
        timeout: float = 600.0,
        retries: int = 3,
        backoff: float = 2.0,
    ):
        from soma_local.s2.model_files import hf_folder

        super().__init__()
        self.base_url = base_url.rstrip("/")
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self.http = _client(self.base_url, timeout)
        self.stats = ServerStats()
        self.served, self.max_model_len = self._served_model(model)
        self.tok = load_hf_tokenizer(str(hf_folder(model or self.served)))
        self.name = model or self.served
        self.chat_template = chat_template or self.tok.chat_template
        self.bos_token = self.tok.bos_token
        self.eos_token = self.tok.eos_token
        self.set_sampling(sampling or SamplingParams())

    # ---- server ------------------------------------------------------------------------------
    def _served_model(self, model: str | None) -> tuple[str, int]:
        """The served model id to ask for and its context length, from ``/v1/models``."""
        data = self._call("GET", "/v1/models")["data"]
        ids = [m["id"] for m in data]
        if model in ids:
            chosen = next(m for m in data if m["id"] == model)
        elif len(data) == 1:  # one model served (often under its path): that one
            chosen = data[0]
        else:
            raise S2ServerError(f"{self.base_url}: serves {ids}, not '{model}'; pass one of them as --s2-model")
        return chosen["id"], int(chosen.get("max_model_len") or 2048)

    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        import httpx

        error = ""
        for attempt in range(self.retries + 1):
            if attempt:
                self.stats.retries += 1
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                response = self.http.request(method, path, json=body)
            except httpx.TimeoutException:
                error = f"no answer within {self.timeout:g} s"
                continue
            except httpx.TransportError as exc:
                error = f"{type(exc).__name__}: {exc}"
                continue
            if response.status_code >= 500:
                error = f"HTTP {response.status_code}: {response.text[:200]}"
                continue
            if response.status_code >= 400:  # our request is wrong: retrying cannot help
                raise S2ServerError(f"vLLM at {self.base_url}{path} refused the request: "
                                    f"HTTP {response.status_code}: {response.text[:300]}")
            try:
                return response.json()
            except ValueError:
                error = "the answer was not JSON"
        raise S2ServerError(f"vLLM at {self.base_url}{path} failed after {self.retries + 1} tries: {error}")

    # ---- tokens ------------------------------------------------------------------------------
    def tokenize(self, text: str, *, special: bool = False, add_bos: bool = False) -> list[int]:
        return self.tok.encode(text, special=special, add_bos=add_bos)

    def piece(self, token: int) -> bytes:
        return self.tok.pieces[token]

    def is_end(self, token: int) -> bool:
        return token in self.tok.eog_ids

    def decode(self, ids) -> str:
        return self.tok.decode(ids)

    # ---- context -----------------------------------------------------------------------------
    @property
    def context_size(self) -> int:
        return self.max_model_len

    @property
    def ids(self) -> list[int]:
        return list(self._ids)

    def _load(self, ids: list[int]) -> float:
        """Only remembered: the server prefills it with the first request (its time counts there)."""
        if len(ids) >= self.max_model_len:
            raise ModelFileError(f"{self.name}: a prompt of {len(ids)} tokens does not fit the server's "
                                 f"context of {self.max_model_len}; raise vLLM's --max-model-len")
        self._ids = list(ids)
        return 0.0

    def _append(self, ids: list[int]) -> float:
        if len(self._ids) + len(ids) > self.max_model_len:
            raise ModelFileError(f"{self.name}: context of {self.max_model_len} tokens is full; "
                                 "raise vLLM's --max-model-len")
        self._ids.extend(ids)
        return 0.0

    # ---- sampling ----------------------------------------------------------------------------
    def set_sampling(self, params: SamplingParams) -> None:
        self.sampling = params

    def _request(self, max_tokens: int, stop_at_newline: bool) -> dict:
        p = self.sampling
        body: dict = {
            "model": self.served,
            "prompt": self._ids,
            "max_tokens": max_tokens,
            "return_token_ids": True,
            "skip_special_tokens": False,
        }
        if p.temperature <= 0:
            body["temperature"] = 0.0
        else:
            body.update(temperature=p.temperature, top_p=p.top_p, seed=request_seed(p.seed, len(self._ids)))
            if p.top_k > 0:
                body["top_k"] = p.top_k
            if p.min_p > 0:
                body["min_p"] = p.min_p
        if stop_at_newline:
            body["stop_token_ids"] = self.tok.newline_ids
        return body

    def _sample(self, max_tokens: int, stop_at_newline: bool) -> Iterator[int]:
        """One request for the whole stretch; its tokens are then taken one by one."""
        answer = self._call("POST", "/v1/completions", self._request(max_tokens, stop_at_newline))
        try:
            choice = answer["choices"][0]
            returned = [int(t) for t in choice["token_ids"]]
        except (KeyError, IndexError, TypeError, ValueError):
            raise S2ServerError(f"vLLM at {self.base_url} returned no token ids (a vLLM with "
                                "`return_token_ids` is needed)") from None
        if len(returned) > max_tokens or (choice.get("finish_reason") == "length" and len(returned) != max_tokens):
            raise S2ServerError(f"vLLM at {self.base_url} returned {len(returned)} tokens for max_tokens="
                                f"{max_tokens} (finish_reason {choice.get('finish_reason')})")
        self._count(answer, len(returned))
        yield from returned
        if choice.get("finish_reason") == "stop":
            # The server stopped for a reason of its own (an end-of-sequence id that the tokenizer
            # files do not name, for example): the run cannot go on from here.
            yield END

    def _count(self, answer: dict, generated: int) -> None:
        usage = answer.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        self.stats.requests += 1
        self.stats.prompt_tokens += int(usage.get("prompt_tokens") or 0)
        self.stats.cached_tokens += int(details.get("cached_tokens") or 0)
        self.stats.generated_tokens += generated
