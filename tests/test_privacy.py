"""Privacy, tested: a supervised run with the local S1 opens no network connection.

Python's audit hooks see every socket connect, datagram send and name lookup made from Python in any
thread, including sockets created before the guard and calls from libraries that hold their own
reference to ``socket.create_connection``. While the guard is active each such inet attempt is
recorded and refused (as an ``OSError``, so code that falls back when offline does). The test then
asserts that nothing was recorded: a library that swallows the refusal still fails the test. Unix
sockets stay allowed. C code that opens sockets itself is out of the hook's sight (llama.cpp is built
without its downloader); a network namespace would cover it but needs privileges CI may not have.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import urllib.request
from contextlib import contextmanager
from typing import Iterator

import pytest

from soma_local.cli.main import main

_INET = (socket.AF_INET, socket.AF_INET6)
_LOOKUPS = {"socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex", "socket.gethostbyaddr",
            "socket.getnameinfo"}
_SENDS = {"socket.connect", "socket.sendto", "socket.sendmsg"}


class NetworkBlocked(OSError):
    pass


class _Guard:
    """One audit hook per process (hooks cannot be removed); ``active`` switches it on and off."""

    def __init__(self) -> None:
        self.active = False
        self.attempts: list[str] = []

    def __call__(self, event: str, args: tuple) -> None:
        if not self.active:
            return
        if event in _LOOKUPS:
            what = f"{event}{args[:2]}"
        elif event in _SENDS and getattr(args[0], "family", None) in _INET:
            what = f"{event} {args[-1]!r}"
        else:
            return
        self.attempts.append(what)
        raise NetworkBlocked(f"network access during a privacy test: {what}")


_guard = _Guard()
sys.addaudithook(_guard)


@contextmanager
def no_inet() -> Iterator[list[str]]:
    """Refuse and record every inet connection attempt inside the block; yields the record."""
    _guard.attempts = []
    _guard.active = True
    try:
        yield _guard.attempts
    finally:
        _guard.active = False


# ---- the guard itself: it must see a dial wherever it happens ------------------------------------------

def test_guard_records_a_dial_even_when_the_caller_swallows_the_error():
    def dial() -> None:
        try:
            socket.create_connection(("127.0.0.1", 9), timeout=1)
        except OSError:
            pass  # as a library that "works offline" would

    with no_inet() as attempts:
        worker = threading.Thread(target=dial)
        worker.start()
        worker.join()
    assert attempts and "127.0.0.1" in attempts[0]


def test_guard_records_name_lookups_and_socket_made_before_it():
    early = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    with no_inet() as attempts:
        with pytest.raises(OSError):
            urllib.request.urlopen("http://example.invalid/", timeout=1)
        with pytest.raises(NetworkBlocked):
            early.sendto(b"x", ("::1", 9))
    early.close()
    assert [a.split("(")[0].split(" ")[0] for a in attempts] == ["socket.getaddrinfo", "socket.sendto"]


def test_guard_leaves_unix_sockets_alone(tmp_path):
    with no_inet() as attempts:
        a, b = socket.socketpair()
        a.sendall(b"ok")
        assert b.recv(2) == b"ok"
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(tmp_path / "s"))
        server.listen()
        client = socket.socket(socket.AF_UNIX)
        client.connect(str(tmp_path / "s"))
        for s in (a, b, server, client):
            s.close()
    assert attempts == []


# ---- the claim: a supervised run with the local S1 stays on the machine -------------------------------

def test_supervised_run_with_local_s1_opens_no_network_connection(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # our loading code must set it, not the caller
    monkeypatch.delenv("SOMA_CALIBRATION", raising=False)
    monkeypatch.chdir(tmp_path)  # no calibration file here: the monitors' default thresholds
    trace = tmp_path / "run.jsonl"
    argv = [
        "run", "Tom has 3 apples and buys 4 more. How many apples does he have now?",
        "--s1", "classifier", "--max-tokens", "200", "--scan-interval", "16", "--line-break-slack", "8",
        "--threads", "1", "--seed", "0", "--trace", str(trace),
    ]
    with no_inet() as attempts:  # model loading included
        rc = main(argv)
    assert rc == 0, capsys.readouterr().err
    assert attempts == [], f"the run tried to reach the network: {attempts}"
    records = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    scans = [r for r in records if r["type"] == "scan"]
    assert records[0]["s1"].startswith("classifier:")
    assert scans and all(m["p"] is not None for s in scans for m in s["monitors"].values())  # S1 really ran
