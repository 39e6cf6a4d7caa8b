"""S1 over HTTP: Jev (TypeSafe's ``/v1/systemone``, OpenRouter's TypeSafe-compatible route, or any
Jev-compatible server such as ``soma serve``).

Each monitor is one ``noul`` question whose instructions are the monitor statement, and the state is
the S1 state; all monitors of a pause go in one request. Timeouts, retries and backoff follow the
official SDK (10 s per attempt, 2 retries on 408/429/5xx and transport errors, 0.5 s doubling to 5 s
with 25 % jitter, ``retry-after-ms``/``retry-after`` honoured, 30 s budget), so the hosted service
sees the client it expects. A failed request is never an exception: its probabilities are ``None``,
``last_error`` says why, and the scan counts as missing. The API key is read from the environment
and lives only in the request header: never in ``name``, errors, logs or traces. Each endpoint has
its own key variable, so a hosted service's key never goes to a URL the user typed unless they put it
in that URL's variable themselves. Credentials inside a URL (``user:pass@``, ``?key=``) are redacted
wherever the URL is shown.
"""

from __future__ import annotations

import json
import math
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Mapping, Sequence
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import httpx

from soma_local.errors import S1Error
from soma_local.s1.jev_wire import NoulQuestion, SystemOneRequest, is_probability
from soma_local.s1.base import S1
from soma_local.s1.state import TokenCounter

SYSTEM_ONE_PATH = "/v1/systemone"
# name -> (base URL, environment variable holding the key). TYPESAFE_BASE_URL overrides TypeSafe's URL
# as it does for the SDK; OpenRouter serves the same body at /api/v1/systemone.
PRESETS = {
    "typesafe": ("https://api.typesafe.ai", "TYPESAFE_API_KEY"),
    "openrouter": ("https://openrouter.ai/api", "OPENROUTER_API_KEY"),
}
CUSTOM_KEY_ENV = "SOMA_JEV_API_KEY"  # the key sent to a Jev server given by URL (`jev:http://...`)
HOSTED = {"api.typesafe.ai", "openrouter.ai"}  # hosts that always need a key
MIN_COMPRESSED_BODY = 1024  # the SDK compresses bodies from 1 KiB


@dataclass(frozen=True)
class RetryPolicy:
    """The official SDK's retry rules (``typesafe_sdk/_core/retry.py``), as data."""

    max_retries: int = 2
    backoff_initial: float = 0.5
    backoff_max: float = 5.0
    jitter: float = 0.25
    budget: float = 30.0  # seconds per request, initial attempt and waits included
    statuses: frozenset[int] = field(default_factory=lambda: frozenset({408, 429, *range(500, 600)}))

    def backoff(self, attempt: int, rand: float) -> float:
        """Wait after failed attempt number ``attempt`` (1-based) when the server names no delay."""
        exponential = min(self.backoff_max, self.backoff_initial * 2 ** (attempt - 1))
        return exponential * (1 - rand * self.jitter)

    def delay(self, attempt: int, headers: Mapping[str, str], rand: float) -> float:
        named = retry_after(headers)
        return self.backoff(attempt, rand) if named is None else named


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms`` first, then ``retry-after``
    (seconds or an HTTP date); None when neither is usable."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            value = float(raw.strip() or "0")
        except ValueError:
            if name == "retry-after":
                try:
                    return max(0.0, parsedate_to_datetime(raw).timestamp() - time.time())
                except (TypeError, ValueError, OverflowError):
                    pass
            continue
        if math.isfinite(value) and value >= 0:
            return value * scale
    return None


class JevFailure(Exception):
    """One request that produced no answers; the message is what the trace records."""


@dataclass
class JevReply:
    probs: dict[str, float | None]  # None: this answer cannot be evidence
    problems: list[str]  # why, for each None
    input_tokens: int = 0


def read_nouls(body: bytes, ids: Sequence[str]) -> JevReply:
    """P(true) for each asked id from a 200 body, and what was wrong with the others.

    Lenient about the envelope (extra fields, missing or float usage), strict about what becomes
    evidence: a noul answer must have type ``noul`` and a finite probability in [0, 1].
    """
    try:
        data = json.loads(body)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        raise JevFailure(f"response is not JSON ({exc})") from None
    answers = data.get("answers") if isinstance(data, dict) else None
    if not isinstance(answers, dict):
        raise JevFailure("response has no 'answers' object")
    reply = JevReply({}, [])
    for qid in ids:
        answer = answers.get(qid)
        p = answer.get("noul") if isinstance(answer, dict) else None
        if not isinstance(answer, dict):
            reply.problems.append(f"no answer for {qid!r}")
        elif answer.get("type") != "noul":
            reply.problems.append(f"answer {qid!r} has type {answer.get('type')!r}, not 'noul'")
        elif not is_probability(p):
            reply.problems.append(f"answer {qid!r} has noul {p!r}, not a probability")
        else:
            reply.probs[qid] = float(p)
            continue
        reply.probs[qid] = None
    usage = data.get("usage")
    tokens = usage.get("input_tokens") if isinstance(usage, dict) else None
    if isinstance(tokens, (int, float)) and not isinstance(tokens, bool) and math.isfinite(tokens):
        reply.input_tokens = max(0, int(tokens))
    return reply


def error_text(body: object) -> str | None:
    """What an error body says, in the shapes the official SDK reads: ``detail`` (an object with
    ``error_type``/``message``, a validation list or a string), ``error`` (a string or an object
    with ``message``/``type``/``code``) or a bare ``message``. None when it says nothing we know."""
    if not isinstance(body, dict):
        return None
    detail, error, message = body.get("detail"), body.get("error"), body.get("message")
    if isinstance(detail, dict):
        return f"{detail.get('error_type', '')}: {detail.get('message', '')}"
    if isinstance(detail, list) and detail and isinstance(detail[0], dict):
        return f"validation: {detail[0].get('msg')} at {detail[0].get('loc')}"
    if isinstance(detail, str):
        return detail
    if isinstance(error, dict):
        kind = error.get("type") or error.get("code") or ""
        return f"{kind}: {error.get('message', '')}" if kind else str(error.get("message", error))
    if isinstance(error, str):
        return error if not isinstance(message, str) else f"{error}: {message}"
    if isinstance(message, str):
        return message
    return None


def _error_text(response: httpx.Response) -> str:
    """The server's error, short; never the request (which carries the key)."""
    try:
        said = error_text(response.json())
    except ValueError:
        said = None
    return (response.text if said is None else said)[:160]


def redact_url(url: str) -> str:
    """``url`` as it may be shown or stored: a password in it and every query value become ``***``."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user = userinfo.partition(":")[0]
        netloc = f"{user}:***@{host}" if ":" in userinfo else f"***@{host}"
    query = urlencode([(k, "***") for k, _ in parse_qsl(parts.query, keep_blank_values=True)], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def resolve_endpoint(arg: str) -> tuple[str, str]:
    """(base URL, key variable) for ``jev[:typesafe|openrouter|BASE_URL]``.

    TypeSafe's key goes to TypeSafe's URL (or to TYPESAFE_BASE_URL, as the SDK does), OpenRouter's
    to OpenRouter; a URL typed after ``jev:`` gets ``SOMA_JEV_API_KEY`` only, never a hosted key.
    """
    if arg in ("", "typesafe"):
        return os.environ.get("TYPESAFE_BASE_URL") or PRESETS["typesafe"][0], PRESETS["typesafe"][1]
    if arg in PRESETS:
        return PRESETS[arg]
    try:
        parts = urlsplit(arg)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and (parts.port or 0) >= 0
    except ValueError:  # e.g. a port that is not a number
        ok = False
    if ok:
        return arg, CUSTOM_KEY_ENV
    raise S1Error(f"jev: '{redact_url(arg)}' is neither typesafe, openrouter nor an http(s) base URL")


class JevS1(S1):
    """Jev over HTTP. ``max_concurrency`` caps requests in flight from this client (a batch of
    states, as replay sends, goes out in parallel up to the cap)."""

    def __init__(
        self,
        base_url: str,
        tokenizer: TokenCounter,
        *,
        api_key: str | None = None,
        key_env: str = CUSTOM_KEY_ENV,
        model: str = "jev-latest",
        input_limit: int = 2048,
        timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        max_concurrency: int = 4,
        compress: bool = False,
    ):
        parts = urlsplit(base_url.rstrip("/"))
        self._post_url = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2], path=parts.path + SYSTEM_ONE_PATH))
        self.base_url = redact_url(base_url.rstrip("/"))  # for display and traces
        self.url = redact_url(self._post_url)
        key = api_key or os.environ.get(key_env) or None
        if key is None and parts.hostname in HOSTED:
            raise S1Error(f"jev: {self.base_url} needs an API key; set {key_env}")
        # A user and password in the URL travel as HTTP basic auth (unless a key is sent), so the URL
        # this object keeps holds neither.
        auth = None
        if "@" in parts.netloc and key is None:
            auth = httpx.BasicAuth(unquote(parts.username or ""), unquote(parts.password or ""))
        self.name = f"jev:{self.base_url}"
        self.model = model
        self.input_limit = input_limit
        self.retry = retry or RetryPolicy()
        self.compress = compress
        self._tokenizer = tokenizer
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._pool = ThreadPoolExecutor(max_concurrency, thread_name_prefix="jev")
        self._rng = random.Random()
        self._lock = threading.Lock()
        headers = {"Accept": "application/json", "Content-Type": "application/json", "User-Agent": "soma-local"}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        self._http = httpx.Client(
            headers=headers,
            auth=auth,
            timeout=timeout,
            limits=httpx.Limits(max_connections=max_concurrency),
            follow_redirects=False,
        )
        self.requests = 0
        self.failed_requests = 0
        self.input_tokens = 0

    @property
    def tokenizer(self) -> TokenCounter:
        return self._tokenizer

    # ---- one request -----------------------------------------------------------------------
    def _body(self, state: str, statements: Sequence[str]) -> tuple[bytes, dict[str, str]]:
        request = SystemOneRequest(
            model=self.model,
            state=state,
            questions={f"m{i}": NoulQuestion(type="noul", instructions=s) for i, s in enumerate(statements)},
        )
        body = request.model_dump_json(exclude_none=True).encode("utf-8")
        if self.compress and len(body) >= MIN_COMPRESSED_BODY:
            import zstandard

            return zstandard.ZstdCompressor().compress(body), {"Content-Encoding": "zstd"}
        return body, {}

    def _send(self, body: bytes, headers: dict[str, str]) -> httpx.Response:
        """POST with the SDK's retries; raises JevFailure when no answer came back in time."""
        started, attempt = time.monotonic(), 0
        while True:
            attempt += 1
            retry_headers = {"X-TypeSafe-Retry-Count": str(attempt - 1)} if attempt > 1 else {}
            try:
                with self._slots:
                    response = self._http.post(self._post_url, content=body, headers={**headers, **retry_headers})
            except httpx.TimeoutException:
                why, named = f"timed out after {self._http.timeout.read:g}s", {}
            except httpx.TransportError as exc:
                why, named = f"connection failed ({type(exc).__name__})", {}
            else:
                if response.status_code == 200:
                    return response
                why = f"HTTP {response.status_code} {_error_text(response)}".rstrip()
                if response.status_code not in self.retry.statuses:
                    raise JevFailure(why)
                named = response.headers
            with self._lock:
                wait = self.retry.delay(attempt, named, self._rng.random())
            if attempt > self.retry.max_retries or time.monotonic() - started + wait >= self.retry.budget:
                raise JevFailure(f"{why} (after {attempt} attempts)")
            time.sleep(wait)

    def _ask(self, state: str, statements: list[str]) -> tuple[list[float | None], str | None]:
        ids = [f"m{i}" for i in range(len(statements))]
        try:
            reply = read_nouls(self._send(*self._body(state, statements)).content, ids)
            probs, error = reply.probs, "; ".join(reply.problems) or None
            with self._lock:
                self.input_tokens += reply.input_tokens
        except JevFailure as exc:
            probs, error = dict.fromkeys(ids), str(exc)
        with self._lock:
            self.requests += 1
            self.failed_requests += error is not None
        return [probs[i] for i in ids], None if error is None else f"jev {self.base_url}: {error}"

    # ---- the S1 interface --------------------------------------------------------------------
    def score_states(self, pairs: Sequence[tuple[str, str]]) -> list[float | None]:
        """One request per distinct state, with that state's distinct statements as questions."""
        groups: dict[str, list[str]] = {}
        for statement, state in pairs:
            sts = groups.setdefault(state, [])
            if statement not in sts:
                sts.append(statement)
        items = list(groups.items())
        if len(items) == 1:
            results = [self._ask(*items[0])]
        else:
            results = list(self._pool.map(lambda item: self._ask(*item), items))
        found = {
            (statement, state): p
            for (state, sts), (probs, _) in zip(items, results)
            for statement, p in zip(sts, probs)
        }
        self.last_error = next((err for _, err in results if err), None)
        return [found[(statement, state)] for statement, state in pairs]

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        self._http.close()
