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
  kill     `streamvec run` following a folder at --rate, killed with SIGKILL at --kills random
           moments (--kill-min..--kill-max seconds into each run) and restarted on the same
           state, then drained (--no-follow --max-idle 3): documents trained against lines
           written (none lost), and per kill the documents trained again after the restart
           against the lines written in one checkpoint interval. Bar: 0 lost, each replay at
           most one --checkpoint-every interval of documents.

Standard library only; every process started here is stopped here; 127.0.0.1 only.
"""

import argparse
import datetime as dt
import os
import random
import urllib.request
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
PARTS = ("bulk", "steady", "trickle", "kill")


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


def appender(path, words, pos, rate, line_bytes):
    """Returns a function that appends whole lines to `path` at `rate` bytes/s while called."""
    state = {"pos": pos, "sent": 0, "lines": 0, "t0": time.monotonic()}
    out = open(path, "ab")

    def pump():
        due = rate * (time.monotonic() - state["t0"])
        while state["sent"] < due:
            line, n = [], 0
            while n < line_bytes:
                w = words[state["pos"] % len(words)]
                state["pos"] += 1
                line.append(w)
                n += len(w) + 1
            b = b" ".join(line) + b"\n"
            out.write(b)
            state["sent"] += len(b)
            state["lines"] += 1
        out.flush()
    return pump, state, out


def metric(base, name):
    try:
        with urllib.request.urlopen(base + "/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    m = re.search(r"^" + re.escape(name) + r" ([0-9.eE+-]+)$", text, re.M)
    return float(m.group(1)) if m else None


def wait_serving(p, logfile, timeout=60):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout and p.poll() is None:
        m = re.search(r"serving (http://127\.0\.0\.1:\d+)", logfile.read_text(errors="replace"))
        if m:
            return m.group(1)
        time.sleep(0.1)
    return None


def resumed_documents(logfile):
    """Documents of the checkpoint a run resumed from (its "resuming" line), 0 if none."""
    m = re.search(r"resuming .*?, (\d+) documents,", logfile.read_text(errors="replace"))
    return int(m.group(1)) if m else 0


def kill_rounds(sv, work, a):
    data = work / "kill-data"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir()
    state = work / "kill.state"
    shutil.rmtree(state, ignore_errors=True)
    target = data / "stream.txt"
    target.write_text("")
    words = a.stream_corpus.read_bytes().split()
    rng = random.Random(a.seed)
    line_bytes = 2000
    every = 60.0
    for i, arg in enumerate(a.run_arg):
        if arg == "--checkpoint-every" and i + 1 < len(a.run_arg):
            every = float(a.run_arg[i + 1])
    per_interval = a.rate * every / line_bytes
    lines, pos, rounds, trained_at_kill = 0, 0, [], 0
    for k in range(a.kills):
        logfile = work / f"kill-{k}.log"
        p, cmd = start_run(sv, state, data, a.run_arg, logfile)
        base = wait_serving(p, logfile)
        covered = resumed_documents(logfile)
        if k > 0:
            rounds[-1]["replayed"] = trained_at_kill - covered
        pump, st, out = appender(target, words, pos, a.rate, line_bytes)
        at = rng.uniform(a.kill_min, a.kill_max)
        t0 = time.monotonic()
        last = 0
        while time.monotonic() - t0 < at and p.poll() is None:
            pump()
            time.sleep(0.1)
        # Stop appending, let the trainer take what was written, read its count, then kill.
        time.sleep(1.0)
        v = metric(base, "streamvec_train_documents_total") if base else None
        if v is not None:
            last = int(v)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        out.close()
        pos, lines = st["pos"], lines + st["lines"]
        trained_at_kill = covered + last
        rounds.append({"at_s": round(at, 1), "lines": lines, "trained_at_kill": trained_at_kill})
    # Drain: the rest of the file, then a final checkpoint.
    logfile = work / "kill-final.log"
    p, cmd = start_run(sv, state, data, a.run_arg + ["--no-follow", "--max-idle", "3"], logfile)
    wait_serving(p, logfile)
    covered = resumed_documents(logfile)
    if rounds:
        rounds[-1]["replayed"] = trained_at_kill - covered
    try:
        p.wait(a.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        return {"error": "drain did not stop", "command": " ".join(cmd)}
    # The final state's documents, as the next start reads them.
    final_docs = None
    p2, _ = start_run(sv, state, data, ["--no-follow", "--max-idle", "1"], work / "kill-check.log")
    wait_serving(p2, work / "kill-check.log")
    p2.wait(120)
    if re.search(r"resuming .*?, (\d+) documents,",
                 (work / "kill-check.log").read_text(errors="replace")):
        final_docs = resumed_documents(work / "kill-check.log")
    res = {"command": " ".join(cmd), "lines": lines, "documents": final_docs, "rounds": rounds,
           "per_interval": per_interval, "every": every}
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
    p.add_argument("--kills", type=int, default=5, help="kill: SIGKILLs")
    p.add_argument("--kill-min", type=float, default=15, help="kill: earliest moment, s")
    p.add_argument("--kill-max", type=float, default=75, help="kill: latest moment, s")
    p.add_argument("--seed", type=int, default=29, help="kill: random moments")
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
    if "kill" in parts:
        log(f"kill: {a.kills} SIGKILLs of run following a folder at {a.rate:g} B/s ...")
        r = kill_rounds(sv, work, a)
        if "error" in r:
            lines.append(f"kill: FAILED {r['error']}")
        else:
            # A restart rolls the state back to its last checkpoint and the connector resends
            # from that checkpoint's positions: the final state counts each line once when
            # nothing is lost (more: trained twice into the state; fewer: lost).
            lost = None if r["documents"] is None else r["lines"] - r["documents"]
            worst = max((x.get("replayed", 0) for x in r["rounds"]), default=0)
            lines.append(
                f"kill: {r['command']}\n  {r['lines']} lines written, {r['documents']} documents "
                f"in the final state: lost {None if lost is None else max(lost, 0)}, twice "
                f"{None if lost is None else max(-lost, 0)} (bar 0 lost: "
                f"{'MET' if lost is not None and lost <= 0 else 'NOT MET'}); "
                f"replayed per kill {[x.get('replayed') for x in r['rounds']]} at "
                f"{[x['at_s'] for x in r['rounds']]} s, at most {worst} against "
                f"{r['per_interval']:.0f} lines in one {r['every']:g} s checkpoint interval "
                f"(bar: {'MET' if worst <= r['per_interval'] else 'NOT MET'})")
    text = "\n".join(lines)
    print(text)
    out = a.results / f"snapshot-{stamp}.txt"
    out.write_text(text + "\n")
    log(f"saved {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
