"""The hardening in front of every soma server's routes: a request id, a Bearer key, a body limit.

They are plain ASGI middlewares, so they run before FastAPI reads anything, and they know nothing of
a wire format: each server passes ``error(status, message)``, which renders a refusal in its own
shape (Jev's ``{"detail": ...}`` for ``soma serve``, OpenAI's ``{"error": ...}`` for ``soma
serve-chat``). The statuses they answer are 400 (a zstd body that does not decompress), 401 (no or
wrong key), 413 (too large) and 415 (an unknown ``Content-Encoding``).
"""

from __future__ import annotations

import hmac
import io
import secrets
from typing import Callable

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Renders a refusal in the server's own error shape.
ErrorResponse = Callable[[int, str], Response]
# Where the request id is kept in the ASGI scope, for routes that name things after it (a trace file).
REQUEST_ID_KEY = "soma.request_id"


def request_id(scope: Scope) -> str:
    """The id ``RequestId`` gave this request."""
    return scope[REQUEST_ID_KEY]


class RequestId:
    """A fresh random id on every response, under ``header`` (clients put it in their error messages).
    The server makes it, never the client, so it is safe to use in a file name."""

    def __init__(self, app: ASGIApp, *, header: str):
        self.app, self.header = app, header

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        rid = "req_" + secrets.token_hex(12)
        scope = {**scope, REQUEST_ID_KEY: rid}

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)[self.header] = rid
            await send(message)

        await self.app(scope, receive, send_with_id)


class AuthGate:
    """Bearer-key check before anything else is read (so an unauthenticated client learns nothing
    about its body). With no key configured every request passes, ``Authorization`` or not."""

    def __init__(self, app: ASGIApp, *, key: str | None, error: ErrorResponse):
        self.app, self.key, self.error = app, key, error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.key is None or scope["type"] != "http" or not scope["path"].startswith("/v1/"):
            return await self.app(scope, receive, send)
        header = Headers(scope=scope).get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            response = self.error(401, "Must supply an API key as Authorization: Bearer <key>.")
        elif not hmac.compare_digest(given.strip().encode(), self.key.encode()):
            response = self.error(401, "Cannot authenticate with the given API key.")
        else:
            return await self.app(scope, receive, send)
        response.headers["WWW-Authenticate"] = "Bearer"
        await response(scope, receive, send)


class BodyGate:
    """Request-size limit (declared, received and decompressed) and ``Content-Encoding: zstd``, which
    the Jev SDK uses for bodies from 1 KiB. The app downstream always sees the plain body."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, error: ErrorResponse):
        self.app, self.max_bytes, self.error = app, max_bytes, error

    def _too_large(self) -> Response:
        return self.error(413, f"Request body is larger than {self.max_bytes} bytes.")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        headers = Headers(scope=scope)
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            return await self._too_large()(scope, receive, send)
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                return await self._too_large()(scope, receive, send)
            if not message.get("more_body", False):
                break
        encoding = headers.get("content-encoding", "identity").strip().lower()
        if encoding == "zstd":
            try:
                body = bytearray(self._unzstd(bytes(body)))
            except ValueError as exc:
                return await self.error(400, f"Body is not valid zstd: {exc}")(scope, receive, send)
            if len(body) > self.max_bytes:
                return await self._too_large()(scope, receive, send)
        elif encoding not in ("", "identity"):
            response = self.error(415, f"Content-Encoding {encoding!r} is not supported; use zstd or none.")
            return await response(scope, receive, send)
        plain = bytes(body)
        scope = dict(scope)
        scope["headers"] = [
            (k, v) for k, v in scope["headers"] if k not in (b"content-encoding", b"content-length")
        ] + [(b"content-length", str(len(plain)).encode())]
        delivered = False

        async def replay() -> dict:
            nonlocal delivered
            if delivered:
                return await receive()
            delivered = True
            return {"type": "http.request", "body": plain, "more_body": False}

        await self.app(scope, replay, send)

    def _unzstd(self, data: bytes) -> bytes:
        """Every frame, decompressed, but at most ``max_bytes + 1`` bytes and a window no larger than a
        body may be, so a small bomb cannot fill memory."""
        import zstandard

        window = 1 << max(20, (self.max_bytes - 1).bit_length())  # a power of two, at least 1 MiB
        out = bytearray()
        try:
            decompressor = zstandard.ZstdDecompressor(max_window_size=window)
            with decompressor.stream_reader(io.BytesIO(data), read_across_frames=True) as reader:
                while len(out) <= self.max_bytes:
                    chunk = reader.read(self.max_bytes + 1 - len(out))
                    if not chunk:
                        break
                    out += chunk
        except zstandard.ZstdError as exc:
            raise ValueError(str(exc)) from None
        if not out and data:
            raise ValueError("no zstd frame holds any data")
        return bytes(out)


def harden(app, *, error: ErrorResponse, request_id_header: str, api_key: str | None, max_body_bytes: int) -> None:
    """Put the three gates in front of ``app`` (a FastAPI app), in the order they must run: request id
    first (so every refusal carries one), then the key, then the body limit."""
    app.add_middleware(BodyGate, max_bytes=max_body_bytes, error=error)
    app.add_middleware(AuthGate, key=api_key, error=error)
    app.add_middleware(RequestId, header=request_id_header)  # added last: runs first
