"""``soma serve-chat``: an OpenAI-compatible ``/v1/chat/completions`` whose answers are supervised.

Every request is one supervised run of the server's ``Supervisor`` (S2 under S1's monitors): chat UIs,
agent frameworks and the ``openai`` client reach a SOMA-supervised model exactly as they reach
llama-server, vLLM or Ollama. Thinking streams as ``reasoning_content`` (and ``reasoning``), the answer
as ``content``; scans, reminders and a takeover ride along in a ``soma`` field plain clients ignore
(``chat_events``). Errors have OpenAI's shape ``{"error": {"message", "type", "param", "code"}}``, a
bad request is always a 4xx, and the server keeps serving.

Its own app, not routes on ``soma serve``'s: that app answers Jev's shapes (its own ``/v1/models``, its
error handlers), and OpenAI clients need OpenAI's. The hardening is the same code (``gates``).

Serving: runs take S2 in arrival order (``slots``: ``Supervisor.concurrency`` at once, one on an
in-process llama.cpp S2), at most ``max_queue`` wait, and a request past that gets 429 with
``Retry-After``. Each run has its own thread (the Supervisor is thread-safe); its events reach the
event loop through a ``Feed``. A client that disconnects sets the run's cancel event, so S2 stops within
a few tokens instead of finishing an answer nobody reads. A request waits for its run's first event
before the response starts, so what the Supervisor refuses at the start is still a 400, not a broken stream.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator, Awaitable, Callable, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException

from soma_local.errors import PromptTooLong, SomaError
from soma_local.serve.app import DEFAULT_MAX_BODY
from soma_local.serve.chat_events import Transcript
from soma_local.serve.chat_request import ChatError, check_context, check_request, read_chat_request, run_messages
from soma_local.serve.chat_wire import ChatRequest, ErrorBody, ErrorInfo, ModelCard, ModelList
from soma_local.serve.gates import harden, request_id
from soma_local.serve.slots import QueueFull, Slots
from soma_local.supervisor import Supervisor

DEFAULT_MAX_QUEUE = 8
REQUEST_ID_HEADER = "x-request-id"
ERROR_TYPES = {401: "authentication_error", 404: "not_found_error", 429: "rate_limit_error"}
GATE_CODES = {400: "invalid_body", 401: "invalid_api_key", 413: "request_too_large", 415: "unsupported_encoding"}
T = TypeVar("T")


def openai_error(status: int, message: str, *, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None) -> JSONResponse:
    kind = ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    body = ErrorBody(error=ErrorInfo(message=message, type=kind, param=param, code=code))
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


def gate_error(status: int, message: str) -> JSONResponse:
    return openai_error(status, message, code=GATE_CODES.get(status))


class ClientGone(Exception):
    pass


async def _until_disconnect(request: Request) -> None:
    """Returns when the client disconnects (the body has been read, so only that can arrive)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def unless_gone(request: Request, work: Awaitable[T]) -> T:
    """``work``'s result, or ``ClientGone`` (``work`` cancelled) as soon as the client disconnects."""
    task, gone = asyncio.ensure_future(work), asyncio.ensure_future(_until_disconnect(request))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            task.cancel()
            raise ClientGone
        return task.result()
    finally:
        gone.cancel()


_DONE = object()


class Feed:
    """One run's events, from its thread to the event loop, in order: each event as the run's listener
    hears it, then the result, or the exception the run raised. ``cancel`` is the run's cancel event."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.events: asyncio.Queue = asyncio.Queue()
        self.cancel = threading.Event()

    def push(self, item: object) -> None:
        self.loop.call_soon_threadsafe(self.events.put_nowait, item)

    def pump(self, run: Callable[[Callable[[object], None]], object]) -> None:
        """Runs on the run's thread: ``run(listener)`` is the whole run."""
        try:
            self.push(run(self.push))
        except Exception as exc:  # noqa: BLE001 - handed to the request, which answers it
            self.push(exc)
        finally:
            self.push(_DONE)

    async def items(self) -> AsyncIterator[object]:
        while (item := await self.events.get()) is not _DONE:
            if isinstance(item, Exception):
                raise item
            yield item


def _sse(data: str) -> bytes:
    return f"data: {data}\n\n".encode()


def _stream_error(exc: Exception) -> bytes:
    """The error event of a run that failed after its stream began (the status has gone out already)."""
    if isinstance(exc, SomaError):
        info = ErrorInfo(message=f"{exc}.", type="invalid_request_error")
    else:
        info = ErrorInfo(message=f"{type(exc).__name__} while the run was streaming", type="server_error")
    return _sse(ErrorBody(error=info).model_dump_json())


def create_chat_app(
    supervisor: Supervisor,
    *,
    model: str | None = None,
    api_key: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY,
    max_queue: int = DEFAULT_MAX_QUEUE,
    trace_dir: Path | None = None,
) -> FastAPI:
    """The chat app for ``supervisor``. ``model`` is the name it serves under (default: S2's name); a
    request naming another model gets 404, one naming none gets this one. ``trace_dir``: one trace
    file per request, ``<x-request-id>.jsonl``."""
    served = model or supervisor.s2_name
    slots = Slots(supervisor.concurrency, max_queue)
    pool = ThreadPoolExecutor(max_workers=supervisor.concurrency, thread_name_prefix="soma-chat")
    live: set[threading.Event] = set()
    started = int(time.time())

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        yield
        for cancel in list(live):  # runs still going when the server stops: end them, then their threads
            cancel.set()
        await asyncio.to_thread(pool.shutdown)

    app = FastAPI(title="soma-local chat (OpenAI-compatible)", docs_url=None, redoc_url=None, openapi_url=None,
                  lifespan=lifespan)

    @app.exception_handler(ChatError)
    async def _refused(_: Request, exc: ChatError) -> JSONResponse:
        return openai_error(exc.status, exc.message, param=exc.param, code=exc.code, headers=exc.headers)

    @app.exception_handler(SomaError)
    async def _supervisor_refused(_: Request, exc: SomaError) -> JSONResponse:
        """What the Supervisor refuses (it checks every run's arguments too) is the request's to fix."""
        if isinstance(exc, PromptTooLong):
            return openai_error(400, f"{exc}.", param="messages", code="context_length_exceeded")
        return openai_error(400, f"{exc}.")

    @app.exception_handler(HTTPException)
    async def _http_error(_: Request, exc: HTTPException) -> JSONResponse:
        return openai_error(exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _internal(_: Request, exc: Exception) -> JSONResponse:
        return openai_error(500, f"{type(exc).__name__} in the chat server")

    card = ModelCard(id=served, created=started)

    @app.get("/v1/models")
    async def models() -> JSONResponse:
        return JSONResponse(ModelList(data=[card]).model_dump())

    @app.get("/v1/models/{name:path}")
    async def one_model(name: str) -> JSONResponse:
        if name != served:
            raise ChatError(404, f"The model {name!r} does not exist.", param="model", code="model_not_found")
        return JSONResponse(card.model_dump())

    async def plan(body: ChatRequest, rid: str, cancel: threading.Event) -> dict:
        """The run's arguments, once every check has passed (counting the prompt's tokens off the loop)."""
        monitors = check_request(body, models=[served], monitors=supervisor.monitor_names)
        messages = run_messages(body)
        prompt = await asyncio.to_thread(supervisor.prompt_tokens, messages=messages, monitors=monitors)
        check_context(prompt, body.limit, supervisor.context_size)
        options = body.soma
        return dict(
            messages=messages, seed=body.seed, temperature=body.temperature, top_p=body.top_p,
            max_tokens=body.limit, stop=body.stops, monitors=monitors,
            thresholds=options.thresholds if options else None, mode=options.mode if options else None,
            trace=trace_dir / f"{rid}.jsonl" if trace_dir else None, cancel=cancel,
        )

    async def start(feed: Feed, run: dict) -> None:
        """Take a place in the queue, then start the run on its own thread; the slot is freed when that
        thread ends."""
        try:
            await slots.acquire()
        except QueueFull as exc:
            raise ChatError(429, f"The server is busy: {exc}; retry after {exc.retry_after} s.",
                            code="queue_full", headers={"Retry-After": str(exc.retry_after)}) from None
        began = time.monotonic()
        live.add(feed.cancel)

        def finished(_) -> None:
            live.discard(feed.cancel)
            slots.release(time.monotonic() - began)

        asyncio.get_running_loop().run_in_executor(
            pool, feed.pump, lambda listen: supervisor.run(**run, on_event=listen)).add_done_callback(finished)

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body = read_chat_request(await request.body())
        rid = request_id(request.scope)
        feed = Feed()
        run = await plan(body, rid, feed.cancel)
        transcript = Transcript(
            id="chatcmpl-" + rid.removeprefix("req_"), model=served, created=int(time.time()), limit=body.limit,
            include_usage=bool(body.stream_options and body.stream_options.include_usage),
            ignored_fields=body.ignored, trace=run["trace"].name if run["trace"] else None,
        )
        events = feed.items()
        try:
            await unless_gone(request, start(feed, run))
            first = await unless_gone(request, events.__anext__())
        except ClientGone:
            feed.cancel.set()
            return Response(status_code=499)
        if body.stream:
            return StreamingResponse(_sse_stream(transcript, first, events, feed.cancel),
                                     media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

        async def collect() -> Response:
            transcript.chunks(first)
            async for event in events:
                transcript.chunks(event)
            # Serialised by pydantic as the stream's chunks are: an h of inf (a mode that never takes
            # over) is "Infinity" there, where JSONResponse's json.dumps refuses it.
            return Response(transcript.completion().model_dump_json(exclude_none=True), media_type="application/json")

        try:
            return await unless_gone(request, collect())
        except ClientGone:
            feed.cancel.set()
            return Response(status_code=499)

    harden(app, error=gate_error, request_id_header=REQUEST_ID_HEADER, api_key=api_key, max_body_bytes=max_body_bytes)
    return app


async def _sse_stream(transcript: Transcript, first: object, events: AsyncIterator[object],
                      cancel: threading.Event) -> AsyncIterator[bytes]:
    """The chunks as server-sent events, ending with ``[DONE]`` (after an error event if the run failed).
    Leaving early (the client went away: Starlette cancels this generator) cancels the run."""

    def encode(event: object) -> list[bytes]:
        return [_sse(c.model_dump_json(exclude_none=True)) for c in transcript.chunks(event)]

    try:
        for data in encode(first):
            yield data
        try:
            async for event in events:
                for data in encode(event):
                    yield data
        except Exception as exc:  # noqa: BLE001 - the status is sent; the error goes in the stream
            yield _stream_error(exc)
        yield _sse("[DONE]")
    finally:
        cancel.set()  # a no-op once the run has ended
