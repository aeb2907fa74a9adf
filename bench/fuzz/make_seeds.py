#!/usr/bin/env python3
"""Writes the committed seeds of bench/fuzz's targets (bench/fuzz/seeds/<target>/): small valid
inputs of each kind, a few near misses. Run from anywhere: bench/fuzz/make_seeds.py"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, "seeds", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8"))


# --- document: messages of <prefix>.docs
full = {"id": "feed:1", "source": "https://example.org/feed.xml", "url": "https://example.org/a",
        "title": "A title", "text": "Some text\twith tabs\nand lines; naïve café 東京",
        "lang": "en", "published_at": "2026-11-22T10:00:00Z",
        "fetched_at": "2026-11-22T10:00:05Z", "offset": 12345, "start": 12000}
write("document", "full.json", json.dumps(full, ensure_ascii=False))
write("document", "minimal.json", '{"id":"a:0","source":"stdin","text":"hello world"}')
write("document", "escapes.json",
      '{"id":"x","source":"s","text":"\\u00e9\\ud83d\\ude00 \\"q\\" \\\\ \\u0000 end","url":null}')
write("document", "repeated-key.json", '{"id":"1","id":"2","source":"s","text":"t","extra":[1,{}]}')
write("document", "bad-offset.json", '{"id":"1","source":"s","text":"t","offset":-3}')
write("document", "start-no-offset.json", '{"id":"1","source":"s","text":"t","start":4}')
write("document", "not-object.json", '["id","source","text"]')
write("document", "long-word.json",
      json.dumps({"id": "w", "source": "s", "text": "é" * 40 + " " + "x" * 70}))

# --- word2vec: text and binary vectors files
rows = [("king", [1.0, 0.5, -0.25, 3e-5]), ("queen", [0.9, 0.1, 0.0, -1.5e10]),
        ("naïve", [float("nan"), float("inf"), -0.0, 1.0])]


def text_file(rows, row_end="\n", sep=" "):
    out = "%d %d\n" % (len(rows), len(rows[0][1]))
    for w, v in rows:
        out += w + sep + sep.join(repr(x) for x in v) + row_end
    return out


def binary_file(rows, row_end=b"\n"):
    out = b"%d %d\n" % (len(rows), len(rows[0][1]))
    for w, v in rows:
        out += w.encode("utf-8") + b" " + struct.pack("<%df" % len(v), *v) + row_end
    return out


write("word2vec_text", "plain.txt", text_file(rows))
write("word2vec_text", "c-tool.txt", text_file(rows, row_end=" \n"))
write("word2vec_text", "crlf.txt", text_file(rows, row_end="\r\n", sep="\t"))
write("word2vec_text", "empty.txt", "0 7\n")
write("word2vec_text", "short-row.txt", "2 3\nking 1 2 3\nqueen 1 2\n")
write("word2vec_text", "plus-exp.txt", "1 2\nw +1e40 -1E-50\n")
write("word2vec_binary", "c-tool.bin", binary_file(rows))
write("word2vec_binary", "gensim.bin", binary_file(rows, row_end=b""))
write("word2vec_binary", "truncated.bin", binary_file(rows)[:-7])
write("word2vec_binary", "dim1.bin", binary_file([("a", [1.0]), ("b", [2.0])]))

# --- routes: byte 0 = method (bits 0-2: GET POST PUT DELETE OPTIONS TRACE PATCH HEAD) |
# authorization << 3 (0 none, 1 the token, 2 wrong, 3 garbage) | body_too_large << 5; then
# "<path>\n<query>\n<If-None-Match>\n<body>".
GET, POST, TRACE = 0, 1, 5


def call(name, method, path, query="", etag="", body="", auth=0):
    write("routes", name, bytes([method | auth << 3]) +
          ("%s\n%s\n%s\n%s" % (path, query, etag, body)).encode("utf-8"))


call("vector", GET, "/v1/vectors/king")
call("vector-pct", GET, "/v1/vectors/na%C3%AFve", "snapshot=1")
call("vectors", POST, "/v1/vectors", body='{"words": ["king", "queen", "nope"]}')
call("neighbors", GET, "/v1/neighbors", "word=king&k=2")
call("neighbors-vector", POST, "/v1/neighbors",
     body='{"vector": [1, 0.5, 1e200], "k": 3, "restrict_vocab": 2}')
call("most-similar", GET, "/v1/most_similar", "positive=king,queen&negative=zero&topn=3")
call("analogy", GET, "/v1/analogy", "a=king&b=queen&c=naïve&topn=2")
call("similarity", GET, "/v1/similarity", "w1=king&w2=queen")
call("doesnt-match", GET, "/v1/doesnt_match", "words=king,queen,zero,x")
call("n-similarity", GET, "/v1/n_similarity", "ws1=king,queen&ws2=zero")
call("cosmul", GET, "/v1/most_similar_cosmul", "positive=king&negative=queen&topn=2")
call("rank", GET, "/v1/rank", "w1=king&w2=queen")
call("words", GET, "/v1/words", "prefix=k&limit=2&offset=0")
call("word", GET, "/v1/words/queen")
call("history", GET, "/v1/words/king/history", "k=2")
call("snapshots", GET, "/v1/snapshots")
call("healthz", GET, "/healthz")
call("metrics", GET, "/metrics")
call("openapi", GET, "/openapi.json")
call("admin-snapshot", POST, "/v1/admin/snapshot", auth=1)
call("admin-pause", POST, "/v1/admin/ingest/pause", auth=2)
call("admin-resume", POST, "/v1/admin/ingest/resume", auth=1)
call("dashboard", GET, "/")
call("static", GET, "/static/dashboard.js")
call("static-dotdot", GET, "/static/..%2F..%2Fetc%2Fpasswd")
call("etag", GET, "/v1/vectors/king", etag='"2-0123456789abcdef", *')
call("trace", TRACE, "/v1/vectors/king", auth=1)
