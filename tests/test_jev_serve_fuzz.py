"""Fuzz ``soma serve`` (its default S1, minilm-reader, real sockets) with random and adversarial bodies: every
answer must be 2xx or 4xx in the official shape, never a 5xx, and a 200 answers exactly the ids sent.

The bodies are seeded (``SOMA_FUZZ_SEED``, default 13) and their number is ``SOMA_FUZZ_BODIES``
(default 300); the test prints how many it tried and how many got each status.
"""

import json
import os
import random
from collections import Counter

import httpx
import pytest
import zstandard

from soma_local.s1.factory import SERVE_DEFAULT_S1, load_s1
from soma_local.serve.app import REQUEST_ID_HEADER, Running, create_app

BODIES = int(os.environ.get("SOMA_FUZZ_BODIES", "300"))
SEED = int(os.environ.get("SOMA_FUZZ_SEED", "13"))
EDGE_STRINGS = [
    "", " ", "\x00", "a\x00b", "\ud800", "\udfff", "x\udc00y", "\ud83d\ude00", "\U0001f468\u200d\U0001f469\u200d\U0001f467",
    "\u202eevil", "\ufeff", "\uffff", "\ufffe", "e" + "\u0301" * 300, "\u0000\u0001\u001f", "ｆｕｌｌ", "𝔘𝔫𝔦", "ß" * 50,
    "\r\n\t", "\\", '"', "</script>", "{", "Task: x\n\nReasoning so far: ", "Task: \ud800\n\nReasoning so far: y \udfff",
    "null", "NaN", "日本語のテキスト" * 20, "word " * 3000, "\n" * 2000,
]
VALID = {
    "model": "jev-latest",
    "state": "My payouts have been failing for 3 days.",
    "questions": {
        "urgent": {"type": "noul", "instructions": "Does this convey urgency?", "criteria": {"true": "time-sensitive", "false": None}},
        "team": {"type": "choice", "instructions": "Which team?", "criteria": {"billing": "Payments", "technical": None}},
        "anger": {"type": "score", "instructions": "How angry?", "criteria": ["Calm", "Frustrated", "Very angry"]},
    },
}


def rand_value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(10 if depth < 4 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False, 0, -1, 2**63, 10**30, 1.5, -0.0, 1e308])
    if kind in (2, 3, 4, 5):
        return rng.choice(EDGE_STRINGS)
    if kind in (6, 7):
        return [rand_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(EDGE_STRINGS): rand_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def mutate(rng: random.Random, value, depth: int = 0):
    """``value`` with one random subtree replaced, dropped or retyped."""
    if isinstance(value, dict) and value and rng.random() < 0.75:
        key = rng.choice(list(value))
        out = dict(value)
        roll = rng.random()
        if roll < 0.15:
            del out[key]
        elif roll < 0.3:
            out[rng.choice(EDGE_STRINGS)] = out.pop(key)  # the same value under an edge-case key
        else:
            out[key] = mutate(rng, value[key], depth + 1)
        return out
    if isinstance(value, list) and value and rng.random() < 0.75:
        out = list(value)
        i = rng.randrange(len(out))
        out[i] = mutate(rng, out[i], depth + 1)
        return out
    if isinstance(value, str) and rng.random() < 0.5:
        return value + rng.choice(EDGE_STRINGS)
    return rand_value(rng, depth)


def nested(depth: int, leaf="x"):
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def huge(rng: random.Random) -> dict:
    kind = rng.randrange(7)
    q = {"type": "noul", "instructions": "Is it urgent?"}
    if kind == 0:
        return {**VALID, "questions": {f"q{i}": q for i in range(rng.choice([300, 5000, 20000]))}}
    if kind == 1:
        return {**VALID, "questions": {"c": {"type": "choice", "criteria": {f"o{i}": None for i in range(rng.choice([255, 256, 5000]))}}}}
    if kind == 2:
        return {**VALID, "questions": {"s": {"type": "score", "criteria": [f"l{i}" for i in range(rng.choice([1, 10, 11, 1000]))]}}}
    if kind == 3:
        return {**VALID, "state": ["item"] * rng.choice([1000, 50000])}
    if kind == 4:
        return {**VALID, "state": "long text " * rng.choice([1000, 5000, 90000])}
    if kind == 5:
        return {**VALID, "state": nested(rng.choice([50, 500, 900]))}
    return {**VALID, "questions": {"q": {"type": "noul", "instructions": "word " * rng.choice([100, 600, 5000])}}}


def raw_bodies() -> list[bytes]:
    plain = json.dumps(VALID).encode()
    return [
        b"", b"null", b"[]", b"{}", b"1", b'"x"', b"\xff\xfe\x00", b"\xc3\x28", plain[:-1], plain + b"garbage",
        b"\xef\xbb\xbf" + plain, json.dumps(VALID).encode("utf-16"), plain.replace(b'"jev-latest"', b"NaN"),
        plain.replace(b'"Calm"', b"1e999999"), plain.replace(b'"Calm"', b"9" * 5000), plain.replace(b"urgent", b"\\ud800"),
        b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
        b'{"model": "jev-latest", "model": 5, "state": "x", "questions": {"q": {"type": "noul", "instructions": "y"}}}',
        plain.replace(b"{", b"{ " * 1, 1) + b" " * 500_000,
    ]


def compressed(rng: random.Random) -> tuple[bytes, dict]:
    plain = json.dumps(VALID).encode()
    z = zstandard.ZstdCompressor()
    kind = rng.randrange(9)
    if kind == 0:  # a bomb: far over the body limit once decompressed
        return z.compress(json.dumps({**VALID, "state": " " * rng.choice([2 << 20, 64 << 20])}).encode()), {}
    if kind == 1:  # many frames
        step = rng.choice([1, 7, 100])
        return b"".join(z.compress(plain[i : i + step]) for i in range(0, len(plain), step)), {}
    if kind == 2:  # a bomb split over frames
        frame = z.compress(b" " * (1 << 20))
        return z.compress(plain[:-1]) + frame * 4 + z.compress(b"}"), {}
    if kind == 3:
        data = z.compress(plain)
        return data[: rng.randrange(1, len(data))], {}
    if kind == 4:  # a skippable frame, then the body
        return b"\x50\x2a\x4d\x18" + (8).to_bytes(4, "little") + b"12345678" + z.compress(plain), {}
    if kind == 5:  # a frame that asks for a 2 GiB window
        return zstandard.ZstdCompressor(compression_params=zstandard.ZstdCompressionParameters(window_log=31)).compress(plain), {}
    if kind == 6:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))), {}
    if kind == 7:
        return z.compress(plain), {"Content-Encoding": rng.choice(["ZSTD", " zstd ", "gzip", "zstd, zstd", "br", "identity"])}
    return z.compress(plain) + bytes(rng.randrange(256) for _ in range(8)), {}


def bodies(n: int, seed: int):
    """(bytes, extra headers) pairs; JSON ones also give the parsed object they were made from."""
    rng = random.Random(seed)
    fixed = raw_bodies()
    for i in range(n):
        if i < len(fixed):
            yield fixed[i], {}, None
            continue
        roll = rng.random()
        if roll < 0.08:
            data, headers = compressed(rng)
            yield data, {"Content-Encoding": "zstd", **headers}, None
        elif roll < 0.14:
            obj = huge(rng)
            yield json.dumps(obj).encode(), {}, obj
        elif roll < 0.2:
            yield json.dumps(rand_value(rng)).encode(), {}, None
        else:
            obj = mutate(rng, mutate(rng, VALID) if rng.random() < 0.3 else VALID)
            headers = {"Content-Type": rng.choice(["application/json", "text/plain", "application/x-www-form-urlencoded"])}
            yield json.dumps(obj).encode("utf-8", "surrogatepass") if rng.random() < 0.05 else json.dumps(obj).encode(), headers, obj


def shape_problem(status: int, body) -> str | None:
    if status >= 500:
        return f"{status} for a client body"
    if not isinstance(body, dict):
        return "body is not a JSON object"
    if status == 200:
        return None if isinstance(body.get("answers"), dict) else "200 without answers"
    detail = body.get("detail")
    if isinstance(detail, list):
        ok = detail and all(isinstance(d, dict) and d.get("loc", [None])[0] == "body" and d.get("msg") and d.get("type") for d in detail)
        return None if ok and status == 422 else f"validation shape wrong: {status} {detail}"[:300]
    if isinstance(detail, dict) and set(detail) == {"error_type", "message"}:
        return None
    return f"error shape wrong: {status} {body}"[:300]


@pytest.fixture(scope="module")
def server():
    s1 = load_s1(SERVE_DEFAULT_S1, n_threads=1)  # what soma serve serves by default
    with Running(create_app(s1)) as srv, httpx.Client(base_url=srv.url, timeout=120) as client:
        yield client
    s1.close()


def test_no_body_gets_a_5xx_and_every_answer_has_the_official_shape(server):
    statuses: Counter = Counter()
    problems = []
    for data, headers, obj in bodies(BODIES, SEED):
        r = server.post("/v1/systemone", content=data, headers={"Content-Type": "application/json", **headers})
        statuses[r.status_code] += 1
        try:
            body = json.loads(r.content)
        except ValueError:
            body = None
        problem = shape_problem(r.status_code, body)
        if problem is None and r.status_code == 200 and obj is not None:
            sent = list(json.loads(data)["questions"])  # as JSON reads them: an escaped pair is one character
            if list(body["answers"]) != sent:
                problem = f"ids {list(body['answers'])[:5]} != sent {sent[:5]}"
        if problem is None and not r.headers.get(REQUEST_ID_HEADER):
            problem = "no request id"
        if problem:
            problems.append(f"{data[:120]!r}: {problem}")
    fives = sum(n for s, n in statuses.items() if s >= 500)
    print(f"\nfuzz: {sum(statuses.values())} bodies, statuses {dict(sorted(statuses.items()))}, 5xx: {fives}")
    assert sum(statuses.values()) == BODIES and fives == 0 and problems == [], problems[:10]
    assert statuses[200] > BODIES // 10 and statuses[422] > BODIES // 10  # both valid and invalid bodies were tried
