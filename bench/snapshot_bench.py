#!/usr/bin/python3
"""Snapshot write cost of `streamvec run` (issue 29's measurements): bytes written to disk
(/proc/PID/io write_bytes, which counts what reaches the block layer) against the text learned.

Three parts (`--only bulk|steady|trickle`, comma-separated; all by default):

  bulk     `streamvec run --data DIR --no-crawl --no-follow --max-idle 3` on a folder holding the
           corpus (the 100M by default): total bytes written, the state directory at the end
           (files counted once per inode: checkpoints hard-link the database's files), the
           largest checkpoint, and the ratio written / text. Bar: at most 300 MB written, the
           state directory at most 2x one full checkpoint.
  steady   `streamvec run` following a folder while a writer appends whole lines of natural text
           at --rate bytes/s for --seconds: the write rate over the steady window (after
           --warmup seconds). Bar: under 5 MB/s at 0.5 MB/s of text.
  trickle  the same at one short document a second. Bar: under 1 MB/s.

Standard library only; every process started here is stopped here; 127.0.0.1 only.
"""

import argparse
import datetime as dt
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
DATA = REPO.parent / "shared" / "data"  # ../shared/data from the repository root
PARTS = ("bulk", "steady", "trickle")


def log(msg):
    print(f"[snapshot-bench] {msg}", file=sys.stderr, flush=True)


def write_bytes(pid):
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                if line.startswith("write_bytes:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def disk_bytes(path: Path) -> int:
    seen, total = set(), 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def largest_checkpoint(state: Path) -> int:
    cps = state / "checkpoints"
    if not cps.is_dir():
        return 0
    return max((disk_bytes(p) for p in cps.iterdir() if p.is_dir()), default=0)


def start_run(sv, state, data, extra, out):
    cmd = [str(sv), "run", "--data", str(data), "--no-crawl", "--state", str(state),
           "--http", "127.0.0.1:0"] + extra
    f = open(out, "wb")
    p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    return p, cmd


def bulk(sv, work, a):
    data = work / "bulk-data"
    data.mkdir(exist_ok=True)
    link = data / a.corpus.name
    if not link.exists():
        link.symlink_to(a.corpus.resolve())
    state = work / "bulk.state"
    shutil.rmtree(state, ignore_errors=True)
    p, cmd = start_run(sv, state, data, ["--no-follow", "--max-idle", "3"] + a.run_arg,
                       work / "bulk.log")
    last = 0
    t0 = time.monotonic()
    while p.poll() is None and time.monotonic() - t0 < a.timeout:
        wb = write_bytes(p.pid)
        if wb is not None:
            last = wb
        time.sleep(0.1)
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        return {"error": f"timed out after {a.timeout} s", "command": " ".join(cmd)}
    text = a.corpus.stat().st_size
    out = (work / "bulk.log").read_text(errors="replace")
    m = re.search(r"(\d+) words trained in ([0-9.]+) s", out)
    res = {"command": " ".join(cmd), "written": last, "text": text,
           "state": disk_bytes(state), "checkpoint": largest_checkpoint(state),
           "train_s": float(m.group(2)) if m else None, "rc": p.returncode}
    if not a.keep_state:
        shutil.rmtree(state, ignore_errors=True)
    return res


def stream(sv, work, a, name, rate, line_bytes):
    """Follows a folder while lines are appended at `rate` bytes/s (line_bytes each)."""
    data = work / f"{name}-data"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir()
    state = work / f"{name}.state"
    shutil.rmtree(state, ignore_errors=True)
    target = data / "stream.txt"
    target.write_text("")
    p, cmd = start_run(sv, state, data, a.run_arg, work / f"{name}.log")
    src = open(a.stream_corpus, "rb")
    words = src.read().split()
    src.close()
    pos = 0
    sent = 0
    t0 = time.monotonic()
    marks = []  # (time, write_bytes)
    try:
        with open(target, "ab") as out:
            while time.monotonic() - t0 < a.seconds and p.poll() is None:
                due = rate * (time.monotonic() - t0)
                while sent < due:
                    line = []
                    n = 0
                    while n < line_bytes:
                        w = words[pos % len(words)]
                        pos += 1
                        line.append(w)
                        n += len(w) + 1
                    b = b" ".join(line) + b"\n"
                    out.write(b)
                    sent += len(b)
                out.flush()
                wb = write_bytes(p.pid)
                if wb is not None:
                    marks.append((time.monotonic() - t0, wb))
                time.sleep(0.1)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGINT)
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    steady = [(t, w) for t, w in marks if t >= a.warmup]
    rate_w = None
    if len(steady) >= 2 and steady[-1][0] > steady[0][0]:
        rate_w = (steady[-1][1] - steady[0][1]) / (steady[-1][0] - steady[0][0])
    res = {"command": " ".join(cmd), "text_rate": rate, "sent": sent, "seconds": a.seconds,
           "write_rate": rate_w, "state": disk_bytes(state),
           "checkpoint": largest_checkpoint(state)}
    if not a.keep_state:
        shutil.rmtree(state, ignore_errors=True)
    return res


def mb(x):
    return "-" if x is None else f"{x / 1e6:.1f} MB"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default=",".join(PARTS))
    p.add_argument("--corpus", type=Path, default=DATA / "corpus" / "enwiki-text8style-100m.txt")
    p.add_argument("--stream-corpus", type=Path, default=DATA / "corpus" / "enwiki-small-5m.txt",
                   help="natural text whose words the steady and trickle writers append")
    p.add_argument("--rate", type=float, default=500_000, help="steady: text bytes/s")
    p.add_argument("--seconds", type=float, default=300, help="steady and trickle: seconds")
    p.add_argument("--warmup", type=float, default=30, help="seconds before the rate is measured")
    p.add_argument("--timeout", type=float, default=1200, help="bulk: seconds at most")
    p.add_argument("--run-arg", action="append", default=[], help="extra argument for run")
    p.add_argument("--streamvec", type=Path, default=REPO / "build" / "app" / "streamvec")
    p.add_argument("--results", type=Path, default=BENCH_DIR / "results")
    p.add_argument("--keep-state", action="store_true")
    a = p.parse_args()
    parts = [x for x in a.only.split(",") if x]
    if not set(parts) <= set(PARTS):
        p.error(f"--only: choose from {','.join(PARTS)}")
    sv = a.streamvec.resolve()
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    work = (a.results / "runs" / f"snapshot-{stamp}").resolve()
    work.mkdir(parents=True, exist_ok=True)
    lines = [f"streamvec snapshot benchmark {stamp}; {sv}; {os.cpu_count()} CPUs, "
             f"load {os.getloadavg()[0]:.2f}"]
    if "bulk" in parts:
        log(f"bulk: run over {a.corpus} ...")
        r = bulk(sv, work, a)
        if "error" in r:
            lines.append(f"bulk: FAILED {r['error']}")
        else:
            ratio = r["written"] / r["text"]
            lines.append(
                f"bulk: {r['command']}\n  written {mb(r['written'])} for {mb(r['text'])} of text "
                f"(x{ratio:.1f}; bar <= 300 MB: {'MET' if r['written'] <= 300e6 else 'NOT MET'}); "
                f"state directory {mb(r['state'])}, largest checkpoint {mb(r['checkpoint'])} "
                f"(bar state <= 2x checkpoint: "
                f"{'MET' if r['checkpoint'] and r['state'] <= 2 * r['checkpoint'] else 'NOT MET'}); "
                f"trained in {r['train_s']} s; exit {r['rc']}")
    for name, rate, line_bytes, bar in (("steady", a.rate, 2000, 5e6), ("trickle", 200, 200, 1e6)):
        if name not in parts:
            continue
        log(f"{name}: {rate:g} B/s of text for {a.seconds:g} s ...")
        r = stream(sv, work, a, name, rate, line_bytes)
        w = r["write_rate"]
        lines.append(
            f"{name}: {r['command']}\n  {rate / 1e3:.1f} kB/s of text for {a.seconds:g} s: disk "
            f"writes {mb(w)}/s after {a.warmup:g} s (bar < {bar / 1e6:g} MB/s: "
            f"{'MET' if w is not None and w < bar else 'NOT MET'}); state directory "
            f"{mb(r['state'])}, largest checkpoint {mb(r['checkpoint'])}")
    text = "\n".join(lines)
    print(text)
    out = a.results / f"snapshot-{stamp}.txt"
    out.write_text(text + "\n")
    log(f"saved {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
