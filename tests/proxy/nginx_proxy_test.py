"""ctest proxy.nginx: Debian's nginx with the shipped configuration (docs/nginx/streamvec.conf,
then compose/nginx/streamvec.conf) in front of `streamvec serve` on 127.0.0.1.

Trains a small state (`train --stream` on tests/data/streaming/wiki-80k.txt), starts `serve`
on a free port of 127.0.0.1 and, for each configuration, nginx on another one (its `listen` and
upstream rewritten to those ports, nothing else changed), then over raw sockets:
  1. answers pass through: a vector (200), an unknown word (streamvec's own 404 JSON), a POST;
     nginx's own refusals are JSON too (TRACE: 405);
  2. request lines the bare listener answers without JSON or truncates (a malformed %-escape, a
     raw 0xFF, raw UTF-8, a raw NUL) get the API's 400 JSON from the proxy;
     the four requests the bare cpprestsdk listener mishandles (issue 24) get a 4xx or a closed
     connection through the proxy, which reads each request whole before passing it on (serve
     never sees them): two conflicting Content-Length
     headers, Content-Length: -1, a chunk size of 2^64-1 (each 20 times) and a 256 MiB
     unterminated header line (once; the sender stops when the server closes);
  3. serve's resident memory (VmRSS of /proc/PID/status) grows by less than 16 MiB over all of
     it (the bare cpprestsdk listener grew 279 MB on the 256 MiB header alone), and serve still
     answers.
Exit 77 (skipped) without nginx (scripts/install-deps installs Debian's `nginx`). Waits are
bounded; no timing is asserted. Network: 127.0.0.1 only.

Usage: nginx_proxy_test.py STREAMVEC_BINARY SOURCE_DIR WORK_DIR
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time

RSS_GROWTH_LIMIT_KB = 16 * 1024
HEADER_BYTES = 256 << 20


def find_nginx():
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/sbin/nginx") if os.access(p, os.X_OK)), None)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, what, proc):
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"FAIL: {what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"FAIL: {what} does not accept connections on 127.0.0.1:{port}")


def exchange(port, data, stream_bytes=0):
    """Sends data (then stream_bytes of 'a' while the server reads them), reads until the server
    closes. Returns (status or 0, head, body); status 0: closed or reset without an answer."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    out = b""
    try:
        s.sendall(data)
        block = b"a" * (1 << 20)
        sent = 0
        while sent < stream_bytes:
            s.sendall(block)
            sent += len(block)
    except OSError:
        pass  # the server closed while we sent: what it answered is read below
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except socket.timeout:
        s.close()
        raise SystemExit(f"FAIL: no answer and no close within 30 s for {data[:80]!r}")
    except OSError:
        pass  # reset
    s.close()
    head, _, body = out.partition(b"\r\n\r\n")
    m = re.match(rb"HTTP/1\.[01] (\d{3})", head)
    return (int(m.group(1)) if m else 0), head.decode("latin-1"), body


def request(port, method, path, body=None, ctype="application/json"):
    data = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    if body is not None:
        data += f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
    data = data.encode() + b"\r\n" + (body.encode() if body is not None else b"")
    return exchange(port, data)


def expect(cond, message):
    if not cond:
        raise SystemExit("FAIL: " + message)
    print("ok   " + message)


def json_error(status, head, body, what):
    expect("application/json" in head.lower(), f"{what}: {status} with a JSON body")
    return json.loads(body)["error"]


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1))


BAD_REQUESTS = [
    ("two conflicting Content-Length headers",
     b"POST /v1/vectors HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
     b"Content-Length: 18\r\nContent-Length: 3\r\n\r\n{\"words\":[\"the\"]}", 20, 0),
    ("Content-Length: -1",
     b"POST /v1/vectors HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n{\"words\":[]}", 20, 0),
    ("a chunk size of 2^64-1",
     b"POST /v1/vectors HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"ffffffffffffffff\r\n{\"words\":[\"the\"]}\r\n", 20, 0),
    ("a 256 MiB unterminated header line",
     b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ", 1, HEADER_BYTES),
]


# Request lines the bare listener answers with a 400 without JSON (cpprestsdk refuses them
# before streamvec sees them) or, for a NUL, truncates ("GET /v1/vectors/the\\0x" answered as
# "the"): through the proxy each is a 400 with the API's JSON error.
MALFORMED_LINES = [
    ("a malformed percent-escape in the path", b"GET /v1/vectors/bad%zzescape HTTP/1.1"),
    ("a malformed percent-escape in the query", b"GET /v1/neighbors?word=bad%zz HTTP/1.1"),
    ("a raw 0xFF byte in the path", b"GET /v1/vectors/the\xffx HTTP/1.1"),
    ("raw UTF-8 in the path", "GET /v1/vectors/naïve HTTP/1.1".encode()),
    ("a raw NUL in the path", b"GET /v1/vectors/the\x00x HTTP/1.1"),
]


def malformed_lines(port, where):
    # A well-formed escape of UTF-8 still reaches streamvec (its own 404 for an unknown word).
    status, head, body = request(port, "GET", "/v1/vectors/na%C3%AFve%2Fqqq")
    error = json_error(status, head, body, f"{where}: percent-encoded UTF-8")
    expect(status == 404 and "naïve/qqq" in error,
           f"{where}: a well-formed escape passes through to streamvec: {error}")
    for name, line in MALFORMED_LINES:
        status, head, body = exchange(port, line + b"\r\nHost: x\r\nConnection: close\r\n\r\n")
        error = json_error(status, head, body, f"{where}: {name}")
        expect(status == 400, f"{where}: {name}: 400 JSON: {error}")


def hostile_cases(port, where):
    for name, data, times, stream in BAD_REQUESTS:
        for _ in range(times):
            status, head, body = exchange(port, data, stream)
            if not (status == 0 or 400 <= status < 500):
                raise SystemExit(f"FAIL: {where}: {name}: HTTP {status}\n{head}\n{body[:200]}")
        print(f"ok   {where}: {name}: 4xx or closed ({times}x; last HTTP {status or 'closed'})")


def main():
    binary, source, work = sys.argv[1], sys.argv[2], sys.argv[3]
    nginx = find_nginx()
    if nginx is None:
        print("SKIP: nginx is missing (scripts/install-deps installs Debian's nginx)")
        return 77
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    state = os.path.join(work, "state")
    corpus = os.path.join(source, "tests/data/streaming/wiki-80k.txt")
    with open(corpus, "rb") as f:
        train = subprocess.run([binary, "train", "--input", "-", "--stream", "--state", state,
                                "--min-count", "2"], stdin=f, capture_output=True, timeout=300)
    expect(train.returncode == 0, "train --stream wrote a state: " + train.stderr.decode()[-200:])

    serve_port = free_port()
    serve_log = open(os.path.join(work, "serve.log"), "w")
    serve = subprocess.Popen([binary, "serve", "--state", state, "--http",
                              f"127.0.0.1:{serve_port}"], stdout=serve_log, stderr=serve_log)
    procs = [serve]
    try:
        wait_for_port(serve_port, "streamvec serve", serve)
        deadline = time.time() + 60
        while request(serve_port, "GET", "/healthz")[0] != 200:
            expect(time.time() < deadline, "serve loads the snapshot within 60 s")
            time.sleep(0.2)
        # Warm up (thread pool, allocator arenas) before the baseline.
        for _ in range(50):
            request(serve_port, "GET", "/v1/vectors/the")
        rss_before = rss_kb(serve.pid)

        for conf in ("docs/nginx/streamvec.conf", "compose/nginx/streamvec.conf"):
            port = free_port()
            d = os.path.join(work, conf.split("/")[0] + "-nginx")
            os.makedirs(d)
            text = open(os.path.join(source, conf)).read()
            text, n_listen = re.subn(r"listen 80;", f"listen 127.0.0.1:{port};", text)
            text, n_up = re.subn(r"(upstream streamvec \{\s*server )\S+;",
                                 rf"\g<1>127.0.0.1:{serve_port};", text)
            expect(n_listen == 1 and n_up == 1, f"{conf}: one listen and one upstream rewritten")
            open(os.path.join(d, "site.conf"), "w").write(text)
            user = "user root;\n" if os.geteuid() == 0 else ""
            temp = " ".join(f"{k}_temp_path {d}/{k};"
                            for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
            open(os.path.join(d, "nginx.conf"), "w").write(
                f"{user}worker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n"
                f"events {{ worker_connections 512; }}\n"
                f"http {{ access_log off; {temp}\n  include {d}/site.conf;\n}}\n")
            args = [nginx, "-p", d, "-e", f"{d}/error.log", "-c", f"{d}/nginx.conf"]
            check = subprocess.run(args + ["-t"], capture_output=True, text=True)
            expect(check.returncode == 0, f"{conf}: nginx -t accepts it " + check.stderr[-300:])
            proxy = subprocess.Popen(args + ["-g", "daemon off;"])
            procs.append(proxy)
            wait_for_port(port, "nginx", proxy)

            status, head, body = request(port, "GET", "/v1/vectors/the")
            expect(status == 200 and json.loads(body)["word"] == "the",
                   f"{conf}: GET /v1/vectors/the through the proxy: 200")
            status, head, body = request(port, "GET", "/v1/vectors/qqqzzzxx")
            error = json_error(status, head, body, "unknown word")
            expect(status == 404 and "not in the vocabulary" in error,
                   f"{conf}: streamvec's own 404 passes through: {error}")
            status, head, body = request(port, "POST", "/v1/vectors", '{"words":["the"]}')
            expect(status == 200, f"{conf}: POST /v1/vectors through the proxy: 200")
            status, head, body = request(port, "TRACE", "/v1/vectors/the")
            error = json_error(status, head, body, "TRACE")
            expect(status == 405, f"{conf}: TRACE refused by nginx: {error}")
            malformed_lines(port, conf)
            hostile_cases(port, conf)
            proxy.terminate()
            proxy.wait(timeout=30)
            procs.remove(proxy)

        status, _, _ = request(serve_port, "GET", "/v1/vectors/the")
        expect(status == 200 and serve.poll() is None, "serve still answers")
        rss_after = rss_kb(serve.pid)
        growth = rss_after - rss_before
        expect(growth < RSS_GROWTH_LIMIT_KB,
               f"serve's RSS {rss_before} kB -> {rss_after} kB (+{growth} kB, limit "
               f"{RSS_GROWTH_LIMIT_KB} kB)")
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
