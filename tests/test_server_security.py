"""The request gate of server.py over real HTTP on loopback, on every route (/mcp too): foreign Host
(DNS rebinding) and Origin refused with 403, bodies must be JSON (415) and at most 1 MiB, declared or
streamed (413), an optional bearer token, 405 with Allow; also when bound to 0.0.0.0."""

from __future__ import annotations

import json
import shutil
import socket

import pytest

from pipeline.envdir import write_env_dir
from tests.fixtures.library import library_env
from tests.fixtures.server import request, running_server

ENV = library_env()
MCP_INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}}
MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def env_dir(tmp_path_factory):
    return write_env_dir(ENV, tmp_path_factory.mktemp("security") / "library")


def serve(env_dir, tmp_path, *args: str, env: dict[str, str] | None = None):
    db = tmp_path / f"live{len(list(tmp_path.iterdir()))}.db"
    shutil.copyfile(env_dir / "initial.db", db)
    return running_server(env_dir, db, args=args, env=env)


@pytest.fixture(scope="module")
def base(env_dir, tmp_path_factory):
    with serve(env_dir, tmp_path_factory.mktemp("db"), "--allow-host", "example.test", "--allow-host", "api.test:9",
               "--allow-origin", "https://app.example.test") as url:
        yield url


ROUTES = [("GET", "/health", None), ("GET", "/openapi.json", None), ("GET", "/tools", None), ("POST", "/reset", None),
          ("POST", "/tools/get_book", {"book_id": 1}), ("POST", "/mcp", MCP_INIT)]


@pytest.mark.parametrize(("method", "path", "body"), ROUTES, ids=[r[1] for r in ROUTES])
def test_foreign_host_and_origin_are_refused_on_every_route(base, method, path, body):
    port = base.rsplit(":", 1)[1]
    extra = MCP_ACCEPT if path == "/mcp" else {}
    for host in ("evil.test", f"evil.test:{port}", "127.0.0.1.evil.test", "api.test:10", "localhost.:1"):
        status, out, _ = request(method, base + path, body, headers={"Host": host, **extra})
        assert status == 403 and out["kind"] == "request" and "DNS rebinding" in out["error"], (host, status, out)
    for origin in ("http://evil.test", "https://evil.test:443", "null", "http://app.example.test"):
        status, out, _ = request(method, base + path, body, headers={"Origin": origin, **extra})
        assert status == 403 and "Origin" in out["error"], (origin, status, out)
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "example.test", "example.test:8443", "api.test:9"):
        assert request(method, base + path, body, headers={"Host": host, **extra})[0] == 200, host
    for origin in (f"http://localhost:{port}", "http://127.0.0.1:5173", "https://app.example.test", "https://app.example.test:443"):
        assert request(method, base + path, body, headers={"Origin": origin, **extra})[0] == 200, origin


def test_request_bodies_must_be_json(base):
    for path, body in (("/tools/get_book", b'{"book_id": 1}'), ("/reset", b"{}"), ("/mcp", json.dumps(MCP_INIT).encode())):
        for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
            status, out, _ = request("POST", base + path, raw=body, headers={"Content-Type": ctype, **MCP_ACCEPT})
            assert status == 415 and "application/json" in out["error"], (path, ctype, status, out)
    assert request("POST", base + "/reset", raw=b"", headers={"Content-Type": ""})[0] == 200  # no body, no type: fine


def raw_exchange(base: str, head: bytes, chunks: list[bytes]) -> tuple[int, dict]:
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(head)
        try:
            for chunk in chunks:
                sock.sendall(chunk)
        except OSError:
            pass  # the server answered and closed before reading everything: expected
        reply = b""
        while True:
            try:
                part = sock.recv(65536)
            except OSError:
                break
            if not part:
                break
            reply += part
    head_part, _, body = reply.partition(b"\r\n\r\n")
    return int(head_part.split()[1]), json.loads(body) if body.startswith(b"{") else {}


@pytest.mark.parametrize("path", ["/tools/search_books", "/mcp", "/reset"])
def test_bodies_over_1_mib_are_413_declared_or_streamed(base, path):
    declared = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Accept: application/json, text/event-stream\r\nContent-Length: {2 << 20}\r\nConnection: close\r\n\r\n").encode()
    status, out = raw_exchange(base, declared, [b"{"])
    assert status == 413 and "larger than 1048576 bytes" in out["error"]
    streamed = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                "Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n").encode()
    piece = b'"' + b"x" * 65534 + b'"'
    chunks = [b"%x\r\n%s\r\n" % (len(piece), piece) for _ in range(20)] + [b"0\r\n\r\n"]
    status, out = raw_exchange(base, streamed, chunks)
    assert status == 413 and "larger than 1048576 bytes" in out["error"]


def test_405_carries_allow(base):
    for method, path, allowed in (("GET", "/tools/get_book", "POST"), ("DELETE", "/health", "GET"),
                                  ("PUT", "/reset", "POST"), ("PUT", "/mcp", "GET, POST, DELETE")):
        status, _, headers = request(method, base + path, headers=MCP_ACCEPT)
        assert status == 405 and headers.get("allow") == allowed, (method, path, status, headers)


def test_bearer_token_is_required_on_every_route_when_set(env_dir, tmp_path):
    with serve(env_dir, tmp_path, env={"ENVFOUNDRY_TOKEN": "s3cret-token"}) as url:
        for method, path, body in ROUTES:
            extra = MCP_ACCEPT if path == "/mcp" else {}
            for auth in (None, "Bearer wrong", "Basic s3cret-token", "Bearer s3cret-token-and-more"):
                headers = {**extra, **({"Authorization": auth} if auth else {})}
                status, out, got = request(method, url + path, body, headers=headers)
                assert status == 401 and got["www-authenticate"].startswith("Bearer"), (path, auth, status)
            status, _, _ = request(method, url + path, body, headers={"Authorization": "Bearer s3cret-token", **extra})
            assert status == 200, path
    with serve(env_dir, tmp_path, "--token", "flag-token") as url:
        assert request("GET", url + "/health")[0] == 401
        assert request("GET", url + "/health", headers={"Authorization": "bearer flag-token"})[0] == 200


def test_bound_to_all_interfaces_the_host_check_still_holds(env_dir, tmp_path):
    with serve(env_dir, tmp_path, "--host", "0.0.0.0") as url:
        port = url.rsplit(":", 1)[1]
        status, out, _ = request("POST", url + "/tools/get_book", {"book_id": 1}, headers={"Host": f"192.168.1.20:{port}"})
        assert status == 403 and "--allow-host 192.168.1.20" in out["error"]
        status, _, _ = request("POST", url + "/mcp", MCP_INIT, headers={"Host": f"192.168.1.20:{port}", **MCP_ACCEPT})
        assert status == 403
        assert request("POST", url + "/tools/get_book", {"book_id": 1})[0] == 200


def test_check_envs_style_client_without_origin_passes(base):
    # the independent checker sends Content-Type: application/json on every request, GET included, and no Origin
    status, out, _ = request("GET", base + "/openapi.json", headers={"Content-Type": "application/json"})
    assert status == 200 and out["openapi"].startswith("3.")
