#!/usr/bin/python3
"""Pipeline benchmark: ingest -> embedded Kafka broker -> trainer -> RocksDB -> REST.

Four measurements (`--only e2e|freshness|kill|wrk`, repeatable or comma-separated; all by default),
each driving the `streamvec` binary as separate processes on 127.0.0.1:

  e2e        the corpus through `ingest` -> `broker` -> `train --bootstrap-file` (trainer started
             first) vs `train --stream` on the same corpus from stdin, same learner flags,
             alternating A B A B (--reps). Words/s end to end, the ratio kafka/stream (bar >= 0.8),
             and "every document trained": documents produced by ingest == trainer/counters
             documents in the final state.
  freshness  `streamvec run` follows a data dir; N times a line holding a brand-new word 10 times is
             appended, and GET /v1/vectors/<word> is polled every 50 ms until 200 (bar: median <= 5 s).
  kill       `train --bootstrap-file` killed with SIGKILL after its first snapshot while ingest
             runs, restarted with --max-idle: documents produced vs documents in the final state.
  wrk        wrk on /v1/vectors/<w>, /v1/neighbors?word=<w>&k=10 and /v1/most_similar?positive=<w>
             while `streamvec run` trains (--wrk-data: a corpus kept flowing; --wrk-min-words: the
             vocabulary and index size to reach first), and again with ingestion paused and
             training idle: req/s, p50, p99, non-2xx, snapshots swapped and words trained during.

Standard library only. Every wait is bounded in time; every process started here is stopped here.
See bench/README.md.
"""

import argparse
import datetime as dt
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
DATA = REPO.parent / "shared" / "data"  # ../shared/data from the repository root
DEFAULT_CORPUS = DATA / "corpus" / "enwiki-text8style-100m.txt"
SMALL_CORPUS = DATA / "corpus" / "enwiki-text8style-small-5m.txt"
FRESH_SOURCE = REPO / "data" / "demo" / "enwiki-small-5m.txt"
PARTS = ("e2e", "run", "freshness", "kill", "wrk")


def log(msg: str):
    print(f"[pipeline-bench] {msg}", file=sys.stderr, flush=True)


def fmt(v, spec, none="-"):
    return none if v is None else format(v, spec)


def load() -> float:
    return os.getloadavg()[0]


# ---------------------------------------------------------------------------------------------
# processes (all started in their own session; stopped by their own id only)

class Proc:
    """A child process whose stdout/stderr go to files under the run folder."""

    live: list["Proc"] = []

    def __init__(self, name: str, cmd: list[str], work: Path, stdin_path: Path | None = None):
        self.name, self.cmd = name, cmd
        self.out = work / f"{name}.stdout"
        self.err = work / f"{name}.stderr"
        self.stdin_path = stdin_path
        stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
        with open(self.out, "wb") as o, open(self.err, "wb") as e:
            self.t0 = time.monotonic()
            self.p = subprocess.Popen(cmd, stdin=stdin, stdout=o, stderr=e, start_new_session=True)
        if stdin_path:
            stdin.close()
        self.t_exit = None
        Proc.live.append(self)

    def shell(self) -> str:
        s = shlex.join(self.cmd)
        return s + (f" < {shlex.quote(str(self.stdin_path))}" if self.stdin_path else "")

    def poll(self):
        rc = self.p.poll()
        if rc is not None and self.t_exit is None:
            self.t_exit = time.monotonic()
        return rc

    def wait(self, timeout: float):
        """Exit status, or None if still running after timeout seconds."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            rc = self.poll()
            if rc is not None:
                return rc
            time.sleep(0.02)
        return self.poll()

    def signal(self, sig):
        if self.poll() is None:
            try:
                os.kill(self.p.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self, timeout: float = 30.0):
        """SIGTERM, then SIGKILL after timeout. Returns the exit status."""
        if self.poll() is None:
            self.signal(signal.SIGTERM)
            if self.wait(timeout) is None:
                self.signal(signal.SIGKILL)
                self.wait(10)
        return self.poll()

    def text(self) -> str:
        try:
            return self.out.read_text(errors="replace") + self.err.read_text(errors="replace")
        except OSError:
            return ""

    def wait_for(self, regex: str, timeout: float):
        """First match of regex in stdout+stderr, or None (timeout or exit)."""
        end = time.monotonic() + timeout
        rx = re.compile(regex)
        while time.monotonic() < end:
            m = rx.search(self.text())
            if m:
                return m
            if self.poll() is not None:
                return rx.search(self.text())
            time.sleep(0.05)
        return None


def stop_all():
    for p in reversed(Proc.live):
        if p.poll() is None:
            log(f"stopping {p.name} (pid {p.p.pid})")
            p.stop(10)


# ---------------------------------------------------------------------------------------------
# HTTP and state

def http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (urllib.error.URLError, OSError, TimeoutError):
        return 0, b""


def snapshots(base: str) -> list[dict]:
    code, body = http_get(base + "/v1/snapshots")
    if code != 200:
        return []
    try:
        return json.loads(body).get("snapshots", [])
    except ValueError:
        return []


def newest(snaps: list[dict]) -> dict | None:
    return max(snaps, key=lambda s: s.get("version", -1)) if snaps else None


def state_info(sv: Path, state: Path, work: Path, name: str) -> dict:
    """Newest snapshot's metadata of a state, read by `streamvec serve` (read-only)."""
    p = Proc(name, [str(sv), "serve", "--state", str(state), "--http", "127.0.0.1:0"], work)
    try:
        m = p.wait_for(r"serving (http://127\.0\.0\.1:\d+)", 60)
        if not m:
            return {"error": "serve did not start: " + p.text()[-300:]}
        end = time.monotonic() + 30
        while time.monotonic() < end:
            s = newest(snapshots(m.group(1)))
            if s:
                offs = (s.get("offsets") or {}).get("partitions") or {}
                return {"version": s.get("version"), "documents": s.get("documents"),
                        "words_seen": s.get("words_seen"), "offsets_sum": sum(offs.values()),
                        "partitions_used": len(offs), "command": p.shell()}
            time.sleep(0.2)
        return {"error": "no snapshot in " + str(state)}
    finally:
        p.stop(10)


SCALE = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9}
INGEST_RE = re.compile(r"ingest: (\d+) documents \((\d+) delivered\), (\d+) rejected.*?"
                       r"([0-9.]+) s, [0-9.]+ MB/s, throttled ([0-9.]+) s")
KTRAIN_RE = re.compile(r"streamvec train: kafka .*?(\d+) documents \((\d+) rejected\), (\d+) words "
                       r"\((\d+) trained\).*?([0-9.]+)([kMG]?) words/s.*?snapshot (\d+)")
STRAIN_RE = re.compile(r"streamvec train: stream.*?(\d+) words \((\d+) in total\).*?"
                       r"([0-9.]+)([kMG]?) words/s.*?total ([0-9.]+) s")


def parse_ingest(text: str) -> dict:
    m = INGEST_RE.search(text)
    if not m:
        return {}
    return {"produced": int(m.group(1)), "delivered": int(m.group(2)),
            "ingest_rejected": int(m.group(3)), "ingest_s": float(m.group(4)),
            "throttled_s": float(m.group(5))}


def parse_ktrain(text: str) -> dict:
    m = KTRAIN_RE.search(text)
    if not m:
        return {}
    phases = re.search(r"total [0-9.]+ s \((consume [^)]*)\)", text)
    return {"trainer_documents": int(m.group(1)), "words": int(m.group(3)),
            "own_words_per_s": float(m.group(5)) * SCALE[m.group(6)],
            "summary": m.group(0), "phases": phases.group(1) if phases else None}


def parse_strain(text: str) -> dict:
    m = STRAIN_RE.search(text)
    if not m:
        return {}
    return {"words": int(m.group(1)), "own_words_per_s": float(m.group(3)) * SCALE[m.group(4)],
            "summary": m.group(0)}


def learner_flags(a) -> list[str]:
    return ["--vocab-capacity", str(a.vocab_capacity), "--threads", str(a.threads)]


# ---------------------------------------------------------------------------------------------
# e2e

def start_broker(sv: Path, work: Path, tag: str, a, hold_group: bool = True) -> tuple[Proc, Path]:
    """`streamvec broker`, holding the trainers' group (--hold-trainers) unless hold_group is
    False (a trainer with --assign: a held group refuses commits from outside it)."""
    bs = work / f"{tag}.bootstrap"
    bs.unlink(missing_ok=True)
    broker = Proc(f"{tag}-broker", [str(sv), "broker", "--bootstrap-file", str(bs),
                                    "--partitions", str(a.partitions)]
                  + (["--hold-trainers"] if hold_group else []) + a.broker_arg, work)
    end = time.monotonic() + 30
    while time.monotonic() < end and not (bs.exists() and bs.read_text().strip()):
        if broker.poll() is not None:
            break
        time.sleep(0.05)
    if not (bs.exists() and bs.read_text().strip()):
        raise RuntimeError("broker wrote no bootstrap file: " + broker.text()[-300:])
    return broker, bs


def kafka_trainer(sv: Path, work: Path, name: str, bs: Path, state: Path, max_idle: float, a,
                  extra: list[str] | None = None) -> Proc:
    return Proc(name, [str(sv), "train", "--bootstrap-file", str(bs), "--state", str(state),
                       "--max-idle", f"{max_idle:g}"] + learner_flags(a)
                + (extra or []) + a.train_arg, work)


def ingest_proc(sv: Path, work: Path, name: str, bs: Path, corpus: Path, a) -> Proc:
    return Proc(name, [str(sv), "ingest", "--from", str(corpus), "--bootstrap-file", str(bs)]
                + a.ingest_arg, work)


def wait_pair(ingest: Proc, trainer: Proc, timeout: float, grace: float) -> str | None:
    """Waits for both to exit. An ingest still running `grace` s after the trainer exited would
    wait for a consumer forever: it is stopped and reported."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        ri, rt = ingest.poll(), trainer.poll()
        if ri is not None and rt is not None:
            return None
        if rt is not None and ri is None and time.monotonic() - trainer.t_exit > grace:
            ingest.stop(10)
            return (f"trainer exited (rc {rt}) {grace:.0f} s before ingest finished: "
                    "ingest stopped, its remaining documents were never consumed")
        time.sleep(0.05)
    ingest.stop(10)
    trainer.stop(30)
    return f"timed out after {timeout:.0f} s"


FIRST_RE = re.compile(r"first message ([0-9.]+) s after the start")


def run_e2e_kafka(sv: Path, work: Path, rep: int, corpus: Path, a, peer: str = "kafka") -> dict:
    """Trainer and ingest started together, as a user would: the wall runs from the trainer's
    start to its exit (less --max-idle), so the group join (peer "kafka", subscribe) or the
    manual assignment (peer "kafka-assign", `train --assign all`) is included."""
    tag = f"e2e-{peer}-{rep}"
    state = work / f"{tag}.state"
    shutil.rmtree(state, ignore_errors=True)
    row = {"peer": peer, "run": rep}
    broker, bs = start_broker(sv, work, tag, a, hold_group=peer != "kafka-assign")
    try:
        extra = ["--assign", "all"] if peer == "kafka-assign" else []
        trainer = kafka_trainer(sv, work, f"{tag}-train", bs, state, a.max_idle, a, extra)
        t0 = trainer.t0
        ingest = ingest_proc(sv, work, f"{tag}-ingest", bs, corpus, a)
        err = wait_pair(ingest, trainer, a.timeout, grace=max(30.0, 3 * a.max_idle))
        row["commands"] = [broker.shell(), trainer.shell(), ingest.shell()]
        row.update(parse_ingest(ingest.text()))
        row.update(parse_ktrain(trainer.text()))
        m = re.search(r"partition\(s\) of \S+ assigned", trainer.text())
        first = FIRST_RE.search(trainer.text())
        if first:
            row["join_s"] = float(first.group(1))  # start -> first message (join included)
        row["ingest_wall_s"] = (ingest.t_exit - ingest.t0) if ingest.t_exit else None
        if trainer.t_exit:
            row["wall_s"] = trainer.t_exit - t0 - a.max_idle
        row["rc"] = {"trainer": trainer.poll(), "ingest": ingest.poll()}
        if err:
            row["error"] = err
        elif not m:
            row["error"] = "trainer got no partitions: " + trainer.text()[-300:]
        elif trainer.poll() != 0 or ingest.poll() != 0:
            row["error"] = f"exit status trainer {trainer.poll()}, ingest {ingest.poll()}"
    finally:
        broker.stop(10)
    info = state_info(sv, state, work, f"{tag}-serve")
    row["state"] = info
    row["state_documents"] = info.get("documents")
    if row.get("words") and row.get("wall_s"):
        row["words_per_s"] = row["words"] / row["wall_s"]
    if row.get("produced") is not None and row.get("state_documents") is not None:
        row["all_trained"] = row["produced"] == row["state_documents"]
    if not a.keep_state:
        shutil.rmtree(state, ignore_errors=True)
    return row


def run_e2e_stream(sv: Path, work: Path, rep: int, corpus: Path, a) -> dict:
    tag = f"e2e-stream-{rep}"
    state = work / f"{tag}.state"
    shutil.rmtree(state, ignore_errors=True)
    row = {"peer": "stream", "run": rep}
    p = Proc(f"{tag}-train", [str(sv), "train", "--input", "-", "--stream", "--state", str(state)]
             + learner_flags(a) + a.train_arg_stream, work, stdin_path=corpus)
    rc = p.wait(a.timeout)
    if rc is None:
        p.stop(30)
        row["error"] = f"timed out after {a.timeout:.0f} s"
    row["commands"] = [p.shell()]
    row["rc"] = p.poll()
    if p.t_exit:
        row["wall_s"] = p.t_exit - p.t0
    row.update(parse_strain(p.text()))
    if row["rc"] != 0 and "error" not in row:
        row["error"] = f"exit status {row['rc']}: " + p.text()[-300:]
    if row.get("words") and row.get("wall_s"):
        row["words_per_s"] = row["words"] / row["wall_s"]
    if not a.keep_state:
        shutil.rmtree(state, ignore_errors=True)
    return row


E2E_BAR = 0.9  # issue 25: Kafka e2e words/s >= 0.9x train --stream, join included
KAFKA_PEERS = ("kafka", "kafka-assign")


def bench_e2e(sv: Path, work: Path, a) -> dict:
    rows = []
    peers = [p for p in ("kafka", "kafka-assign", "stream") if p in a.e2e_peers]
    for rep in range(1, a.reps + 1):
        for peer in peers:
            log(f"e2e run {rep}/{a.reps} {peer} on {a.corpus} (load {load():.1f}) ...")
            try:
                if peer == "stream":
                    r = run_e2e_stream(sv, work, rep, a.corpus, a)
                else:
                    r = run_e2e_kafka(sv, work, rep, a.corpus, a, peer)
            except RuntimeError as e:
                r = {"peer": peer, "run": rep, "error": str(e)}
            rows.append(r)
            log(f"  {peer}: wall {fmt(r.get('wall_s'), '.2f')} s, words {r.get('words')}, "
                f"words/s {fmt(r.get('words_per_s'), '.0f')}"
                + (f", first message {fmt(r.get('join_s'), '.2f')} s, produced {r.get('produced')}, "
                   f"state documents {r.get('state_documents')}" if peer in KAFKA_PEERS else "")
                + (f"  ERROR {r['error']}" if r.get("error") else ""))
    med = {}
    for peer in peers:
        ok = [r["words_per_s"] for r in rows if r["peer"] == peer and r.get("words_per_s")
              and not r.get("error")]
        med[peer] = statistics.median(ok) if ok else None
    ratios = {p: (med[p] / med["stream"] if med.get(p) and med.get("stream") else None)
              for p in peers if p in KAFKA_PEERS}
    kafka_rows = [r for r in rows if r["peer"] in KAFKA_PEERS]
    all_trained = bool(kafka_rows) and all(r.get("all_trained") for r in kafka_rows)
    return {"rows": rows, "median_words_per_s": med, "ratios": ratios,
            "bar_ratio_met": {p: (v is not None and v >= E2E_BAR) for p, v in ratios.items()},
            "every_document_trained": all_trained}


def e2e_text(res: dict, a) -> str:
    head = (f"{'peer':<12} {'run':>3} {'wall s':>7} {'words':>10} {'words/s':>9} {'own w/s':>9} "
            f"{'1st msg s':>9} {'produced':>8} {'state docs':>10} {'throttled s':>11}")
    lines = [f"e2e: {a.corpus}; learner flags {' '.join(learner_flags(a) + a.train_arg)}; "
             f"kafka wall = trainer start (ingest started with it) -> trainer exit - max-idle "
             f"({a.max_idle:g} s), the join included; stream wall = whole process",
             head, "-" * len(head)]
    for r in res["rows"]:
        lines.append(
            f"{r['peer']:<12} {r['run']:>3} {fmt(r.get('wall_s'), '.2f'):>7} {fmt(r.get('words'), 'd'):>10} "
            f"{fmt(r.get('words_per_s') and r['words_per_s'] / 1e3, '.0f') + 'k':>9} "
            f"{fmt(r.get('own_words_per_s') and r['own_words_per_s'] / 1e3, '.0f') + 'k':>9} "
            f"{fmt(r.get('join_s'), '.2f'):>9} {fmt(r.get('produced'), 'd'):>8} "
            f"{fmt(r.get('state_documents'), 'd'):>10} {fmt(r.get('throttled_s'), '.1f'):>11}"
            + (f"  FAILED: {r['error']}" if r.get("error") else ""))
    m = res["median_words_per_s"]
    lines.append("median words/s: " + ", ".join(f"{p} {fmt(v, ',.0f')}" for p, v in m.items()))
    for p, ratio in res["ratios"].items():
        lines.append(f"ratio {p}/stream {fmt(ratio, '.3f')} (bar >= {E2E_BAR}: "
                     f"{'MET' if res['bar_ratio_met'][p] else 'NOT MET'})")
    lines.append(f"every document trained: {'yes' if res['every_document_trained'] else 'NO'}")
    lines.append("trainer phases (kafka peers): " + "; ".join(
        f"{r['peer']} {r['run']}: {r['phases']}" for r in res["rows"] if r.get("phases")))
    lines.append("commands (rep 1):")
    for r in res["rows"]:
        if r["run"] == 1:
            lines.extend("  " + c for c in r.get("commands", []))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# run: the whole single-process pipeline against train --stream

RUN_RE = re.compile(r"streamvec run: .*?(\d+) words trained in ([0-9.]+) s")
RUN_BAR = 0.7  # issue 25: streamvec run trains at >= 0.7x train --stream's words/s


def bench_run(sv: Path, work: Path, a) -> dict:
    """`streamvec run --data <dir holding the corpus> --no-crawl --no-follow --max-idle 2` (REST
    server idle; snapshots, their preparation and index builds included) alternating with
    `train --stream` on the same corpus and learner flags. run's words/s: words trained over
    the seconds from the trainer's start to its last micro-batch (its summary line)."""
    data = work / "run-data"
    data.mkdir(exist_ok=True)
    link = data / a.corpus.name
    if not link.exists():
        link.symlink_to(a.corpus.resolve())
    rows = []
    for rep in range(1, a.reps + 1):
        for peer in ("run", "stream"):
            log(f"run part {rep}/{a.reps} {peer} (load {load():.1f}) ...")
            if peer == "stream":
                r = run_e2e_stream(sv, work, rep, a.corpus, a)
                r["peer"] = "stream"
            else:
                state = work / f"run-{rep}.state"
                shutil.rmtree(state, ignore_errors=True)
                p = Proc(f"run-{rep}", [str(sv), "run", "--data", str(data), "--no-crawl",
                                        "--no-follow", "--max-idle", "2", "--state", str(state),
                                        "--http", "127.0.0.1:0"] + learner_flags(a), work)
                rc = p.wait(a.timeout)
                r = {"peer": "run", "run": rep, "rc": rc, "commands": [p.shell()]}
                m = RUN_RE.search(p.text())
                if rc != 0 or not m:
                    r["error"] = f"exit status {rc}: " + p.text()[-300:]
                else:
                    r["words"], r["wall_s"] = int(m.group(1)), float(m.group(2))
                    r["words_per_s"] = r["words"] / r["wall_s"]
                if not a.keep_state:
                    shutil.rmtree(state, ignore_errors=True)
            rows.append(r)
            log(f"  {peer}: {fmt(r.get('wall_s'), '.2f')} s, words/s {fmt(r.get('words_per_s'), '.0f')}"
                + (f"  ERROR {r['error']}" if r.get("error") else ""))
    med = {}
    for peer in ("run", "stream"):
        ok = [r["words_per_s"] for r in rows if r["peer"] == peer and r.get("words_per_s")
              and not r.get("error")]
        med[peer] = statistics.median(ok) if ok else None
    ratio = med["run"] / med["stream"] if med["run"] and med["stream"] else None
    return {"rows": rows, "median_words_per_s": med, "ratio": ratio,
            "bar_met": ratio is not None and ratio >= RUN_BAR}


def run_text(res: dict, a) -> str:
    lines = [f"run: streamvec run on a folder holding {a.corpus} (--no-crawl --no-follow "
             f"--max-idle 2 {' '.join(learner_flags(a))}) vs train --stream; run: words over the "
             f"seconds from the trainer's start to its last micro-batch; stream: whole process"]
    for r in res["rows"]:
        lines.append(f"  {r['peer']:<7} {r['run']:>2} {fmt(r.get('wall_s'), '.2f'):>6} s "
                     f"{fmt(r.get('words_per_s'), ',.0f'):>12} words/s"
                     + (f"  FAILED: {r['error']}" if r.get("error") else ""))
    m = res["median_words_per_s"]
    lines.append(f"median words/s: run {fmt(m['run'], ',.0f')}, stream {fmt(m['stream'], ',.0f')}; "
                 f"ratio {fmt(res['ratio'], '.3f')} (bar >= {RUN_BAR}: "
                 f"{'MET' if res['bar_met'] else 'NOT MET'})")
    lines.append("commands (rep 1): " + " ; ".join(
        c for r in res["rows"] if r["run"] == 1 for c in r.get("commands", [])))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# freshness

def start_run(sv: Path, work: Path, name: str, state: Path, data: Path | None, extra: list[str]) -> tuple[Proc, str]:
    cmd = [str(sv), "run", "--state", str(state), "--http", "127.0.0.1:0"]
    if data is not None:
        cmd += ["--data", str(data)]
    p = Proc(name, cmd + extra, work)
    m = p.wait_for(r"serving (http://127\.0\.0\.1:\d+)", 90)
    if not m:
        p.stop(30)
        raise RuntimeError(f"{name}: no 'serving' line in 90 s: " + p.text()[-300:])
    return p, m.group(1)


def wait_documents(base: str, at_least: int, timeout: float) -> int | None:
    end = time.monotonic() + timeout
    docs = None
    while time.monotonic() < end:
        s = newest(snapshots(base))
        docs = s.get("documents") if s else None
        if docs is not None and docs >= at_least:
            return docs
        time.sleep(0.25)
    return docs


def letters(i: int) -> str:
    s = ""
    i += 26 * 26
    while i:
        i, r = divmod(i, 26)
        s = chr(ord("a") + r) + s
    return s


def bench_freshness(sv: Path, work: Path, a) -> dict:
    data = work / "fresh.data"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir()
    text_file = data / "stream.txt"
    with open(FRESH_SOURCE, "rb") as src, open(text_file, "wb") as dst:
        for i, line in enumerate(src):
            if i >= a.fresh_lines:
                break
            dst.write(line)
    state = work / "fresh.state"
    shutil.rmtree(state, ignore_errors=True)
    res = {"lines": a.fresh_lines, "samples": []}
    run, base = start_run(sv, work, "fresh-run", state, data, [])
    res["command"] = run.shell()
    try:
        docs = wait_documents(base, a.fresh_lines, 120)
        res["initial_documents"] = docs
        log(f"freshness: {base} serving, {docs} documents trained before the first probe")
        tag = letters(os.getpid() % 17576)
        for i in range(a.fresh_n):
            if run.poll() is not None:
                res["error"] = f"run exited (rc {run.poll()})"
                break
            word = f"zqfresh{tag}{letters(i)}"
            code, _ = http_get(f"{base}/v1/vectors/{word}")
            if code == 200:
                res["error"] = f"{word} known before it was written"
                break
            with open(text_file, "a") as f:
                f.write(" ".join([word] * 10) + "\n")
            t = time.monotonic()
            dt_s, end = None, t + a.fresh_timeout
            while time.monotonic() < end:
                code, _ = http_get(f"{base}/v1/vectors/{word}", timeout=2)
                if code == 200:
                    dt_s = time.monotonic() - t
                    break
                time.sleep(0.05)
            res["samples"].append({"word": word, "seconds": dt_s})
            log(f"  {word}: {fmt(dt_s, '.2f', f'> {a.fresh_timeout:g}')} s")
    finally:
        res["run_rc"] = run.stop(60)
    got = [s["seconds"] for s in res["samples"] if s["seconds"] is not None]
    res["missed"] = sum(1 for s in res["samples"] if s["seconds"] is None)
    res["median_s"] = statistics.median(got) if got else None
    res["max_s"] = max(got) if got else None
    res["bar_met"] = bool(got) and res["missed"] == 0 and res["median_s"] <= 5.0
    if not a.keep_state:
        shutil.rmtree(state, ignore_errors=True)
    return res


def freshness_text(res: dict, a) -> str:
    return "\n".join([
        f"freshness: {res['lines']} lines of {FRESH_SOURCE} then {len(res['samples'])} appended lines "
        f"(a new word x10; run's --min-count default 5), poll GET /v1/vectors/<word> every 50 ms",
        f"  median {fmt(res.get('median_s'), '.2f')} s, max {fmt(res.get('max_s'), '.2f')} s, "
        f"missed (> {a.fresh_timeout:g} s) {res.get('missed')}; bar median <= 5 s: "
        f"{'MET' if res.get('bar_met') else 'NOT MET'}"
        + (f"  FAILED: {res['error']}" if res.get("error") else ""),
        "  samples: " + " ".join(fmt(s["seconds"], ".2f", "miss") for s in res["samples"]),
        f"  command: {res.get('command')}"])


# ---------------------------------------------------------------------------------------------
# kill -9 of the trainer

def bench_kill(sv: Path, work: Path, a) -> dict:
    corpus = a.kill_corpus
    state = work / "kill.state"
    shutil.rmtree(state, ignore_errors=True)
    res = {"corpus": str(corpus)}
    broker, bs = start_broker(sv, work, "kill", a)
    try:
        t1 = kafka_trainer(sv, work, "kill-train1", bs, state, 600, a)
        if not t1.wait_for(r"partition\(s\) of \S+ assigned", 60):
            t1.stop(10)
            res["error"] = "trainer 1 got no partition assignment: " + t1.text()[-300:]
            return res
        ingest = ingest_proc(sv, work, "kill-ingest", bs, corpus, a)
        ckpt = state / "checkpoints"
        end = time.monotonic() + 120
        first = None
        while time.monotonic() < end and first is None:
            if ckpt.is_dir():
                first = next((d for d in ckpt.iterdir() if d.name.isdigit()), None)
            if t1.poll() is not None:
                break
            if first is None:
                time.sleep(0.02)
        if first is None:
            res["error"] = "no snapshot appeared within 120 s (or trainer 1 exited)"
            ingest.stop(10)
            t1.stop(10)
            return res
        t1.signal(signal.SIGKILL)
        t1.wait(10)
        res["killed_after_checkpoint"] = first.name
        res["trainer1_rc"] = t1.poll()
        res["ingest_running_at_kill"] = ingest.poll() is None
        log(f"kill: trainer 1 SIGKILLed after checkpoint {first.name}; ingest "
            f"{'still running' if res['ingest_running_at_kill'] else 'done'}")
        before = state_info(sv, state, work, "kill-serve-before")
        res["state_before_restart"] = before
        t2 = kafka_trainer(sv, work, "kill-train2", bs, state, a.max_idle, a)
        err = wait_pair(ingest, t2, a.timeout, grace=max(30.0, 3 * a.max_idle))
        if err:
            res["error"] = err
        res.update(parse_ingest(ingest.text()))
        res["trainer2"] = parse_ktrain(t2.text())
        res["rc"] = {"ingest": ingest.poll(), "trainer2": t2.poll()}
        res["commands"] = [broker.shell(), t1.shell() + "   # SIGKILL after the first snapshot",
                           ingest.shell(), t2.shell()]
    finally:
        broker.stop(10)
    after = state_info(sv, state, work, "kill-serve-after")
    res["state_after"] = after
    produced, final = res.get("produced"), after.get("documents")
    if produced is not None and final is not None:
        res["final_documents"] = final
        res["duplicates"] = final - produced
        res["lost"] = max(0, produced - final)
        res["bar_met"] = final >= produced and not res.get("error")
    if not a.keep_state:
        shutil.rmtree(state, ignore_errors=True)
    return res


def kill_text(res: dict) -> str:
    b = res.get("state_before_restart") or {}
    t2 = res.get("trainer2") or {}
    lines = [f"kill: {res['corpus']}; trainer SIGKILLed right after checkpoint "
             f"{res.get('killed_after_checkpoint')} appeared, restarted with --max-idle",
             f"  produced {fmt(res.get('produced'), 'd')}, in the snapshot before restart "
             f"{fmt(b.get('documents'), 'd')} (offsets sum {fmt(b.get('offsets_sum'), 'd')}), "
             f"consumed by the restarted trainer {fmt(t2.get('trainer_documents'), 'd')}, "
             f"final state {fmt(res.get('final_documents'), 'd')} "
             f"(offsets sum {fmt((res.get('state_after') or {}).get('offsets_sum'), 'd')}); "
             f"duplicates (final - produced) {fmt(res.get('duplicates'), 'd')}, "
             f"lost {fmt(res.get('lost'), 'd')}; bar no loss: {'MET' if res.get('bar_met') else 'NOT MET'}"
             + (f"  FAILED: {res['error']}" if res.get("error") else "")]
    lines.extend("  " + c for c in res.get("commands", []))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# wrk

UNIT = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}


def parse_wrk(text: str) -> dict:
    out = {}
    m = re.search(r"Requests/sec:\s+([0-9.]+)", text)
    if m:
        out["rps"] = float(m.group(1))
    m = re.search(r"^\s*99%\s+([0-9.]+)(us|ms|s|m)\s*$", text, re.M)
    if m:
        out["p99_ms"] = float(m.group(1)) * UNIT[m.group(2)] * 1e3
    m = re.search(r"^\s*50%\s+([0-9.]+)(us|ms|s|m)\s*$", text, re.M)
    if m:
        out["p50_ms"] = float(m.group(1)) * UNIT[m.group(2)] * 1e3
    m = re.search(r"(\d+) requests in", text)
    if m:
        out["requests"] = int(m.group(1))
    m = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    out["non2xx"] = int(m.group(1)) if m else 0
    m = re.search(r"Socket errors:(.*)", text)
    out["socket_errors"] = m.group(1).strip() if m else None
    return out


def wrk_once(base: str, path: str, a, work: Path, name: str) -> dict:
    cmd = [a.wrk, f"-t{a.wrk_threads}", f"-c{a.wrk_connections}", f"-d{a.wrk_duration}s",
           "--latency", base + path]
    before = newest(snapshots(base)) or {}
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.wrk_duration + 60)
        text = p.stdout + p.stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"path": path, "command": shlex.join(cmd), "error": str(e)}
    after = newest(snapshots(base)) or {}
    (work / f"{name}.wrk.txt").write_text(text)
    r = {"path": path, "command": shlex.join(cmd), **parse_wrk(text),
         "docs_before": before.get("documents"), "docs_after": after.get("documents"),
         "snap_before": before.get("version"), "snap_after": after.get("version")}
    if "rps" not in r:
        r["error"] = "no Requests/sec in wrk output: " + text[-200:]
    return r


def metrics(base: str) -> dict:
    """GET /metrics as {sample name with labels: value}; {} when it cannot be read."""
    try:
        code, body = http_get(base + "/metrics")
    except OSError:
        return {}
    out = {}
    if code != 200:
        return out
    for line in body.decode("utf-8", "replace").splitlines():
        if line and not line.startswith("#") and " " in line:
            k, v = line.rsplit(" ", 1)
            try:
                out[k] = float(v)
            except ValueError:
                pass
    return out


def wrk_paths(word: str) -> list[str]:
    return [f"/v1/vectors/{word}", f"/v1/neighbors?word={word}&k=10",
            f"/v1/most_similar?positive={word}&topn=10"]


def bench_wrk(sv: Path, work: Path, a) -> dict:
    """wrk while `run` trains (and swaps snapshots), then with ingestion paused and training idle.

    With --wrk-data FILE the file is linked into a followed data directory, and linked again
    under a new name before each training-phase wrk run, so the trainer always has at least one
    more pass of the corpus to train while wrk runs ("docs trained during" shows it did)."""
    if not shutil.which(a.wrk):
        return {"error": f"{a.wrk} not found", "rows": []}
    state = work / "wrk.state"
    shutil.rmtree(state, ignore_errors=True)
    res = {"rows": [], "word": a.word}
    data, copies = None, 0
    if a.wrk_data is not None and a.wrk_data.is_file():
        data = work / "wrk.data"
        shutil.rmtree(data, ignore_errors=True)
        data.mkdir()
        (data / "corpus-0.txt").symlink_to(a.wrk_data.resolve())
        copies = 1
    elif a.wrk_data is not None:
        data = a.wrk_data
    token = "bench-token"
    run, base = start_run(sv, work, "wrk-run", state, data, ["--admin-token", token] + a.run_arg)
    res["command"] = run.shell()
    paths = wrk_paths(a.word)
    try:
        # Training phase: once the vocabulary holds --wrk-min-words and an index serves it.
        end = time.monotonic() + a.wrk_wait
        m = {}
        while time.monotonic() < end:
            m = metrics(base)
            if (m.get("streamvec_vocabulary_size", 0) >= a.wrk_min_words
                    and (m.get("streamvec_index_words", 0) >= a.wrk_min_words
                         or m.get("streamvec_vocabulary_size", 0) <= 20000)
                    and http_get(base + paths[0])[0] == 200):
                break
            time.sleep(0.25)
        else:
            res["error"] = (f"no index of >= {a.wrk_min_words} words within {a.wrk_wait} s "
                            f"(vocabulary {m.get('streamvec_vocabulary_size')})")
            return res
        for rep in range(a.wrk_reps):
            for path in paths:
                if copies:
                    (data / f"corpus-{copies}.txt").symlink_to(a.wrk_data.resolve())
                    copies += 1
                before = metrics(base)
                r = wrk_once(base, path, a, work, f"wrk-training-{len(res['rows'])}")
                after = metrics(base)
                r["phase"] = "training"
                r["words_before"] = before.get("streamvec_train_words_total")
                r["words_after"] = after.get("streamvec_train_words_total")
                r["vocab"] = after.get("streamvec_vocabulary_size")
                r["index_snapshot"] = after.get("streamvec_index_snapshot_version")
                r["unindexed"] = after.get("streamvec_index_unindexed_words")
                r["recall"] = after.get("streamvec_index_recall_at_10")
                res["rows"].append(r)
                log(f"wrk training {path}: {fmt(r.get('rps'), '.0f')} req/s, p99 {fmt(r.get('p99_ms'), '.2f')} ms, "
                    f"snapshots {r.get('snap_before')} -> {r.get('snap_after')}, words "
                    f"{fmt(r['words_before'], '.0f')} -> {fmt(r['words_after'], '.0f')}, "
                    f"index over {r['index_snapshot']}, unindexed {r['unindexed']}, vocabulary {r['vocab']}, "
                    f"recall@10 {r['recall']}")
        # Idle: ingestion paused, the trained-word count unchanged over the last few seconds.
        req = urllib.request.Request(base + "/v1/admin/ingest/pause", method="POST",
                                     headers={"Authorization": f"Bearer {token}"})
        try:
            urllib.request.urlopen(req, timeout=5).read()
        except (OSError, urllib.error.HTTPError) as e:
            log(f"pause failed: {e}")
        idle_s, last, since, end = 5.0, None, time.monotonic(), time.monotonic() + a.wrk_wait
        while time.monotonic() < end:
            d = metrics(base).get("streamvec_train_words_total")
            if d != last:
                last, since = d, time.monotonic()
            elif time.monotonic() - since >= idle_s:
                break
            time.sleep(0.5)
        res["idle_words"] = last
        for rep in range(a.wrk_reps):
            for path in paths:
                r = wrk_once(base, path, a, work, f"wrk-idle-{len(res['rows'])}")
                r["phase"] = "idle"
                res["rows"].append(r)
                log(f"wrk idle {path}: {fmt(r.get('rps'), '.0f')} req/s, p99 {fmt(r.get('p99_ms'), '.2f')} ms")
    finally:
        res["run_rc"] = run.stop(60)
        if not a.keep_state:
            shutil.rmtree(state, ignore_errors=True)
    return res


def wrk_text(res: dict, a) -> str:
    head = (f"{'phase':<8} {'path':<42} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'non-2xx':>7} "
            f"{'snapshots':>9} {'words trained':>13} {'index of':>8} {'recall':>6}")
    lines = [f"wrk: -t{a.wrk_threads} -c{a.wrk_connections} -d{a.wrk_duration}s --latency against "
             f"`streamvec run` on {a.wrk_data or 'the bundled data/run'}", head, "-" * len(head)]
    for r in res.get("rows", []):
        snaps = f"{fmt(r.get('snap_before'), 'd')}->{fmt(r.get('snap_after'), 'd')}"
        trained = (None if r.get("words_after") is None or r.get("words_before") is None
                   else r["words_after"] - r["words_before"])
        lines.append(f"{r.get('phase', ''):<8} {r['path']:<42} {fmt(r.get('rps'), '.0f'):>8} "
                     f"{fmt(r.get('p50_ms'), '.2f'):>7} {fmt(r.get('p99_ms'), '.2f'):>7} "
                     f"{fmt(r.get('non2xx'), 'd'):>7} {snaps:>9} {fmt(trained, '.0f'):>13} "
                     f"{fmt(r.get('index_snapshot'), '.0f'):>8} {fmt(r.get('recall'), '.3f'):>6}"
                     + (f"  socket errors: {r['socket_errors']}" if r.get("socket_errors") else "")
                     + (f"  FAILED: {r['error']}" if r.get("error") else ""))
    if res.get("error"):
        lines.append(f"FAILED: {res['error']}")
    lines.append(f"  command: {res.get('command')}")
    if res.get("rows"):
        lines.append(f"  wrk:     {res['rows'][0]['command']}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------

def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--only", action="append", default=[],
                   help="run only these parts (repeatable or comma-separated): " + ",".join(PARTS))
    p.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="e2e corpus")
    p.add_argument("--kill-corpus", type=Path, default=SMALL_CORPUS, help="corpus of the kill test")
    p.add_argument("--reps", type=int, default=2, help="e2e repetitions of the peers' cycle")
    p.add_argument("--e2e-peers", default="kafka,kafka-assign,stream",
                   help="e2e peers, alternated in this order: kafka (train joins the group), "
                        "kafka-assign (train --assign all), stream (train --stream from stdin)")
    p.add_argument("--vocab-capacity", type=int, default=50000)
    p.add_argument("--threads", type=int, default=2, help="training threads of both trainers")
    p.add_argument("--partitions", type=int, default=32,
                   help="partitions of the broker (`streamvec broker`'s default)")
    p.add_argument("--max-idle", type=float, default=10.0,
                   help="--max-idle of the Kafka trainer; must exceed ingest's longest flow-control "
                        "stall (the trainer commits only after a snapshot, every 5 s by default)")
    p.add_argument("--train-arg", action="append", default=[],
                   help="extra argument for `train --bootstrap-file` (repeatable), e.g. --train-arg=--snapshot-every=1s")
    p.add_argument("--train-arg-stream", action="append", default=[],
                   help="extra argument for `train --stream` (repeatable)")
    p.add_argument("--ingest-arg", action="append", default=[],
                   help="extra argument for `ingest` (repeatable)")
    p.add_argument("--broker-arg", action="append", default=[],
                   help="extra argument for `streamvec broker` (repeatable; e.g. "
                        "--broker-arg=--param-shards=2: the parameter node's topics beside the "
                        "documents')")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per e2e/kill run")
    p.add_argument("--fresh-n", type=int, default=10, help="freshness probes")
    p.add_argument("--fresh-lines", type=int, default=2000, help=f"lines of {FRESH_SOURCE} to start with")
    p.add_argument("--fresh-timeout", type=float, default=30.0, help="seconds per freshness probe")
    p.add_argument("--wrk", default="/usr/bin/wrk")
    p.add_argument("--wrk-data", type=Path, default=None, help="--data of `run` (default: bundled)")
    p.add_argument("--wrk-threads", type=int, default=2)
    p.add_argument("--wrk-connections", type=int, default=16)
    p.add_argument("--wrk-duration", type=int, default=5)
    p.add_argument("--wrk-reps", type=int, default=1, help="wrk runs of each path per phase")
    p.add_argument("--wrk-min-words", type=int, default=0,
                   help="training-phase wrk starts once the served vocabulary and the index hold this many words")
    p.add_argument("--wrk-wait", type=float, default=600, help="seconds to wait for that")
    p.add_argument("--run-arg", action="append", default=[],
                   help="extra argument for `run` in the wrk part (repeatable), e.g. "
                        "--run-arg=--vocab-capacity=120000")
    p.add_argument("--word", default="the", help="word of the wrk requests")
    p.add_argument("--streamvec", type=Path, default=REPO / "build" / "app" / "streamvec")
    p.add_argument("--results", type=Path, default=BENCH_DIR / "results")
    p.add_argument("--keep-state", action="store_true", help="keep the state directories")
    a = p.parse_args()
    a.e2e_peers = [x.strip() for x in a.e2e_peers.split(",") if x.strip()]
    if not set(a.e2e_peers) <= {"kafka", "kafka-assign", "stream"} or "stream" not in a.e2e_peers:
        p.error("--e2e-peers: kafka, kafka-assign and stream, with stream among them")

    parts = [x.strip() for o in a.only for x in o.split(",") if x.strip()] or list(PARTS)
    bad = [x for x in parts if x not in PARTS]
    if bad:
        p.error(f"unknown part(s) {bad}; choose from {','.join(PARTS)}")
    sv = a.streamvec.resolve()
    if not os.access(sv, os.X_OK):
        p.error(f"{sv} not found (build it, or pass --streamvec)")
    for c in ([a.corpus] if "e2e" in parts or "run" in parts else []) + ([a.kill_corpus] if "kill" in parts else []):
        if not c.is_file():
            p.error(f"corpus {c} not found")
    if a.reps < 1:
        p.error("--reps must be >= 1")

    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    name = f"pipeline-{stamp}"
    work = (a.results / "runs" / name).resolve()
    work.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    log(f"parts {','.join(parts)}; {sv}; runs in {work}; load {load_before[0]:.2f} on {os.cpu_count()} CPUs")

    results, texts = {}, []
    benches = {"e2e": (bench_e2e, e2e_text), "freshness": (bench_freshness, freshness_text),
               "kill": (bench_kill, lambda r, a: kill_text(r)), "wrk": (bench_wrk, wrk_text),
               "run": (bench_run, run_text)}
    prev = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def on_signal(signum, frame):
        stop_all()
        sys.exit(130)

    signal.signal(signal.SIGTERM, on_signal)
    try:
        for part in parts:
            fn, txt = benches[part]
            t = time.monotonic()
            try:
                res = fn(sv, work, a)
            except RuntimeError as e:
                res = {"error": str(e), "rows": [], "samples": []}
            res["seconds"] = time.monotonic() - t
            res["load_after"] = load()
            results[part] = res
            try:
                texts.append(txt(res, a))
            except (KeyError, TypeError) as e:
                texts.append(f"{part}: FAILED ({res.get('error') or e})")
            stop_all()
    except KeyboardInterrupt:
        log("interrupted")
    finally:
        stop_all()
        for s, h in prev.items():
            signal.signal(s, h)

    load_after = os.getloadavg()
    header = (f"streamvec pipeline benchmark {stamp}\n{sv}\n"
              f"{os.cpu_count()} CPUs, load average {load_before[0]:.2f} before, {load_after[0]:.2f} after "
              f"(shared machine: figures under load are lower bounds)")
    text = "\n\n".join([header] + texts) + "\n"
    a.results.mkdir(parents=True, exist_ok=True)
    out_txt, out_json = a.results / f"{name}.txt", a.results / f"{name}.json"
    out_txt.write_text(text)
    out_json.write_text(json.dumps({"when": stamp, "streamvec": str(sv), "parts": parts,
                                    "args": {k: str(v) for k, v in vars(a).items()},
                                    "load_before": load_before, "load_after": load_after,
                                    "results": results}, indent=1, default=str))
    print(text, end="", flush=True)
    log(f"saved {out_txt} and {out_json}")
    return 0 if results and not any(r.get("error") for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
