"""``soma serve``: a local S1 behind a Jev-compatible ``/v1/systemone`` (FastAPI on uvicorn).

Any Jev client (the official SDK, our own ``jev`` S1 adapter) can then use the local S1, and no byte
leaves the machine. The wire format and error shapes are TypeSafe's as jevcompat checks them:
422 ``{"detail": [...]}`` for invalid bodies (FastAPI's own shape, which the official API uses),
``{"detail": {"error_type", "message"}}`` for everything else, never a 5xx for a bad request.

The S1 backend runs on one worker thread: llama.cpp contexts (and most model objects, tokenizers
included) are not thread-safe. Each request is a series of small work units on it: a plan
(tokenizing, state windows, limits; ``answers.plan_request``), then batches of at most
``unit_tokens`` S1 input tokens. Between units the worker goes to the request that has had the least
S1 work (``turns``), so a one-question request waits for at most the unit in progress, not for a
255-option one; a request whose client has gone is dropped at the next unit. One request may cost at
most ``Limits.max_request_tokens`` S1 tokens and a state at most ``Limits.max_state_tokens`` (413
beyond). Past ``max_pending`` requests in flight the server answers 529 (overloaded) with
``Retry-After`` so clients back off instead of timing out. Every response carries an
``x-typesafe-request-id``.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from contextlib import asynccontextmanager
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from typing import Any, Callable, Sequence

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from starlette.exceptions import HTTPException

from soma_local.serve.answers import Limits, Plan, S1Unavailable, StateTooLong, finish, plan_request
from soma_local.s1.jev_wire import MODEL_ALIASES, ErrorBody, ErrorDetail, ModelInfo, ModelList, SystemOneRequest
from soma_local.s1.base import S1
from soma_local.serve.gates import harden
from soma_local.serve.turns import Turns

DEFAULT_MAX_BODY = 1 << 20  # bytes, after decompression too
DEFAULT_MAX_PENDING = 64
DEFAULT_UNIT_TOKENS = 1024  # S1 input tokens per work unit: about 0.4 s of MiniLM on one busy core
REQUEST_ID_HEADER = "x-typesafe-request-id"


class JevHTTPError(Exception):
    def __init__(self, status: int, error_type: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.error_type, self.message, self.headers = status, error_type, message, headers


class JevJSONResponse(JSONResponse):
    """UTF-8 JSON; \\u escapes only when the content holds a lone surrogate (which UTF-8 cannot carry),
    so an id or option name sent as ``"\\ud800"`` comes back exactly as sent."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def error_response(status: int, error_type: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    body = ErrorBody(detail=ErrorDetail(error_type=error_type, message=message))
    return JevJSONResponse(body.model_dump(), status_code=status, headers=headers)


# The error types of the gates' refusals, by status, as the official API names them.
GATE_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 413: "request_too_large",
                    415: "invalid_request_error"}


def gate_error(status: int, message: str) -> JSONResponse:
    return error_response(status, GATE_ERROR_TYPES[status], message)


def _validation_error(errors: Sequence[dict]) -> RequestValidationError:
    """FastAPI's 422 for errors pydantic or the JSON parser found in the body."""
    return RequestValidationError([{**e, "loc": ("body", *e.get("loc", ()))} for e in errors])


def read_request(body: bytes, content_type: str) -> SystemOneRequest:
    """The request in ``body``, or the error the official API gives for it (422 validation shape)."""
    if content_type.split(";")[0].strip().lower().startswith("multipart/"):
        raise JevHTTPError(415, "unsupported_feature", "Image assets (multipart/form-data) are not supported: this "
                           "server answers text states only. Send the request as application/json.")
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, too deep
        where = getattr(exc, "pos", 0)
        raise _validation_error([{"loc": (where,), "msg": "JSON decode error", "type": "json_invalid"}]) from None
    if isinstance(data, dict) and data.get("assets"):
        raise JevHTTPError(422, "unsupported_feature", "Image assets are not supported: this server answers text "
                           "states only (remove 'assets').")
    questions = data.get("questions") if isinstance(data, dict) else None
    if isinstance(questions, dict) and any(isinstance(q, dict) and q.get("type") == "box" for q in questions.values()):
        raise JevHTTPError(422, "unsupported_feature", "'box' questions read images, which this server does not "
                           "support: it answers noul, choice and score questions about text.")
    try:
        return SystemOneRequest.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(exc.errors(include_url=False, include_input=False, include_context=False)) from None
    except RecursionError:
        raise _validation_error([{"loc": (), "msg": "Input is nested too deeply", "type": "recursion_loop"}]) from None


def batches(costs: Sequence[int], limit: int) -> list[range]:
    """Consecutive index ranges of at most ``limit`` total cost (one item at least)."""
    out, start, total = [], 0, 0
    for i, cost in enumerate(costs):
        if i > start and total + cost > limit:
            out.append(range(start, i))
            start, total = i, 0
        total += cost
    if start < len(costs):
        out.append(range(start, len(costs)))
    return out


async def _client_gone(request: Request) -> None:
    """Returns when the client disconnects (the body has been read, so only that can arrive)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def create_app(
    s1: S1,
    *,
    api_key: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY,
    max_pending: int = DEFAULT_MAX_PENDING,
    limits: Limits = Limits(),
    unit_tokens: int = DEFAULT_UNIT_TOKENS,
) -> FastAPI:
    """The Jev-compatible app for ``s1``. The model it answers as is the S1's name; the SDKs'
    default aliases (``jev-latest``, ``jev-preview``) resolve to it."""
    model = s1.name
    accepted = {model, *MODEL_ALIASES}
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="s1")
    turns = Turns()
    pending = 0
    released = date.today().isoformat()

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        yield
        worker.shutdown(wait=False)

    app = FastAPI(
        title="soma-local S1 (Jev-compatible)", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan,
        default_response_class=JevJSONResponse,
    )

    @app.exception_handler(JevHTTPError)
    async def _jev_error(_: Request, exc: JevHTTPError) -> JSONResponse:
        return error_response(exc.status, exc.error_type, exc.message, exc.headers)

    @app.exception_handler(HTTPException)
    async def _http_error(_: Request, exc: HTTPException) -> JSONResponse:
        kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid_request_error")
        return error_response(exc.status_code, kind, str(exc.detail), getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's HTTPValidationError shape, without echoing inputs (a state can be large).
        errors = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
        return JevJSONResponse({"detail": errors}, status_code=422)

    @app.exception_handler(Exception)
    async def _internal(_: Request, exc: Exception) -> JSONResponse:
        return error_response(500, "internal_error", f"{type(exc).__name__} in the S1 server")

    @app.get("/v1/models")
    async def models() -> JSONResponse:
        entries = [ModelInfo(name=model, description=f"soma-local S1 ({model})", release_date=released)]
        entries += [ModelInfo(name=alias, description=f"alias of {model}", release_date=released) for alias in MODEL_ALIASES]
        return JevJSONResponse(ModelList(models=entries).model_dump())

    async def on_worker(job, fn: Callable[[], Any]) -> Any:
        async with turns.turn(job):
            return await asyncio.get_running_loop().run_in_executor(worker, fn)

    def score(plan: Plan, unit: range) -> list[float | None]:
        return s1.score_states([plan.pairs[i] for i in unit])

    def start(body: SystemOneRequest) -> tuple[Plan, list[range], list[float | None]]:
        """The first unit: the plan, and the scores too when they fit one unit (a light request)."""
        plan = plan_request(s1, body, model, limits)
        units = batches(plan.costs, unit_tokens)
        return plan, units, score(plan, units[0]) if len(units) == 1 else []

    async def answer(body: SystemOneRequest) -> JSONResponse:
        job = turns.job()
        plan, units, probs = await on_worker(job, lambda: start(body))
        job.done += 1  # planned: from here on, requests not yet planned go first
        rest = units if len(units) > 1 else []  # one unit: scored with the plan already
        for unit in rest:
            probs += await on_worker(job, lambda: score(plan, unit))
            job.done += sum(plan.costs[i] for i in unit)
        return JevJSONResponse(finish(plan, probs, s1).model_dump())

    @app.post("/v1/systemone")
    async def systemone(request: Request) -> Response:
        nonlocal pending
        body = read_request(await request.body(), request.headers.get("content-type", ""))
        if body.model not in accepted:
            raise JevHTTPError(400, "api_usage_error", f"Unknown model {body.model!r}; this server answers {sorted(accepted)}.")
        if pending >= max_pending:
            raise JevHTTPError(529, "overloaded_error", "The S1 is busy; retry shortly.", {"Retry-After": "1"})
        pending += 1
        work, gone = asyncio.ensure_future(answer(body)), asyncio.ensure_future(_client_gone(request))
        try:
            await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not work.done():  # the client has gone: stop at the next unit
                work.cancel()
                return Response(status_code=499)
            return work.result()
        except StateTooLong as exc:
            raise JevHTTPError(413, "request_too_large", str(exc)) from None
        except S1Unavailable as exc:
            raise JevHTTPError(503, "s1_unavailable", str(exc), {"Retry-After": "1"}) from None
        finally:
            gone.cancel()
            pending -= 1

    harden(app, error=gate_error, request_id_header=REQUEST_ID_HEADER, api_key=api_key, max_body_bytes=max_body_bytes)
    return app


def serve(s1: S1, *, host: str = "127.0.0.1", port: int = 8000, log_level: str = "warning", **options) -> None:
    import uvicorn

    uvicorn.run(create_app(s1, **options), host=host, port=port, log_level=log_level)


class Running:
    """Context manager: ``app`` served by uvicorn on a free loopback port in a background thread
    (tests and benchmarks talk to a real server, sockets and all). ``url`` is the server root."""

    def __init__(self, app: FastAPI, host: str = "127.0.0.1"):
        import socket

        import uvicorn

        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, 0))
        self.url = f"http://{host}:{self._sock.getsockname()[1]}"
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    def __enter__(self) -> "Running":
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"soma serve did not start on {self.url}")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self._sock.close()
