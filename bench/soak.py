#!/usr/bin/env python3
"""Soak: `streamvec run` for --minutes on a corpus fed again and again, with wrk at about half the
server's capacity; RSS, open files and threads sampled every --sample seconds.

The feeder writes the corpus into a followed folder at --feed-mbps, alternating two files (each
pass replaces the other file: a new inode, read from its start), so `run` trains without end.
The server's capacity is measured first (wrk, 8 connections, --probe seconds, the request mix
below); the soak's wrk then paces each of its connections with a 4 ms Lua delay, over as many
connections as ask together for half of it (a paced trial of --probe seconds measures each
answer's own time, which adds to the delay). Request mix, in turn: GET /v1/vectors/<w>, /v1/most_similar?positive=<w>,
/v1/similarity?w1=<w>&w2=<w2>, /healthz, /metrics.

Bars (issue 24): RSS and open files flat within 10% (after a warm-up, the last third of the
samples against the middle third: median against median and maximum against maximum; a trainer's
RSS swings by a snapshot copy or an index build between samples, so a maximum is compared with a
maximum), 0 non-2xx answers, 0 socket errors, `run` alive to the end.

  /usr/bin/python3 bench/soak.py --minutes 30
Output: bench/results/soak-<stamp>.{txt,json}.
"""
import argparse
import datetime as dt
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pipeline_bench as pb  # noqa: E402

LUA = r"""
local paths = {
  "/v1/vectors/%s", "/v1/most_similar?positive=%s&topn=10", "/v1/similarity?w1=%s&w2=%s",
  "/healthz", "/metrics",
}
local words = {"the", "king", "music", "france", "city", "water", "war", "science"}
local i = 0
request = function()
  i = i + 1
  local w = words[(i % #words) + 1]
  local w2 = words[((i + 3) % #words) + 1]
  local p = paths[(i % #paths) + 1]
  return wrk.format("GET", string.format(p, w, w2))
end
delay = function() return @DELAY@ end
"""


def proc_sample(pid: int) -> dict | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    rss = int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) * 1024
    threads = int(re.search(r"Threads:\s+(\d+)", status).group(1))
    return {"rss": rss, "fds": fds, "threads": threads}


def feeder(corpus: Path, folder: Path, mbps: float, stop: threading.Event, passes: list):
    data = corpus.read_bytes()
    chunk = 64 << 10
    k = 0
    while not stop.is_set():
        target = folder / f"feed-{k % 2}.txt"
        tmp = folder / f".feed-{k % 2}.tmp"  # dot files are skipped by the connector
        with open(tmp, "wb") as out:
            pass
        os.replace(tmp, target)  # a new, empty file: read from its start
        with open(target, "ab") as out:
            t0 = time.monotonic()
            for off in range(0, len(data), chunk):
                if stop.is_set():
                    return
                piece = data[off:off + chunk]
                out.write(piece)
                out.flush()
                due = t0 + (off + len(piece)) / (mbps * 1e6)
                time.sleep(max(0.0, due - time.monotonic()))
        k += 1
        passes.append(time.monotonic())


def wrk(a, base: str, seconds: int, connections: int, delay_ms: int, work: Path, name: str):
    script = work / f"{name}.lua"
    script.write_text(LUA.replace("@DELAY@", str(delay_ms)))
    out = subprocess.run([a.wrk, "-t2", f"-c{connections}", f"-d{seconds}s", "--latency",
                          "-s", str(script), base], capture_output=True, text=True)
    text = out.stdout + out.stderr
    (work / f"{name}.wrk.txt").write_text(text)
    r = pb.parse_wrk(text)
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    r["non_2xx"] = int(m.group(1)) if m else 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    r["socket_errors"] = sum(int(x) for x in m.groups()) if m else 0
    return r


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=30)
    p.add_argument("--corpus", type=Path, default=pb.REPO / "data/demo/enwiki-small-5m.txt")
    p.add_argument("--feed-mbps", type=float, default=1.0, help="MB/s appended to the folder")
    p.add_argument("--probe", type=int, default=10, help="seconds of the capacity probe")
    p.add_argument("--sample", type=float, default=10, help="seconds between samples")
    p.add_argument("--warmup", type=float, default=3, help="minutes before the samples count")
    p.add_argument("--wrk", default="/usr/bin/wrk")
    p.add_argument("--run-arg", action="append", default=[])
    p.add_argument("--streamvec", type=Path, default=pb.REPO / "build" / "app" / "streamvec")
    p.add_argument("--results", type=Path, default=pb.BENCH_DIR / "results")
    a = p.parse_args()
    if not shutil.which(a.wrk):
        p.error(f"{a.wrk} not found (apt install wrk)")
    sv = a.streamvec.resolve()
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    work = (a.results / "runs" / f"soak-{stamp}").resolve()
    folder = work / "data"
    folder.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    passes: list = []
    feed = threading.Thread(target=feeder, args=(a.corpus, folder, a.feed_mbps, stop, passes),
                            daemon=True)
    feed.start()
    run, base = pb.start_run(sv, work, "soak-run", work / "state", folder, a.run_arg)
    res = {"command": run.shell(), "minutes": a.minutes, "feed_mbps": a.feed_mbps}
    samples = []
    try:
        # Wait for a served snapshot holding the words the requests use.
        end = time.monotonic() + 300
        while time.monotonic() < end:
            code, _ = pb.http_get(base + "/v1/vectors/king")
            if code == 200:
                break
            time.sleep(1)
        probe = wrk(a, base, a.probe, 8, 0, work, "probe")
        cap = probe.get("rps") or 0
        target = cap / 2
        # A paced connection asks every delay + L ms, L its answer's time (besides the delay),
        # which a paced trial measures; wrk's delay is in whole milliseconds, so each connection
        # waits several and the connection count sets the rate.
        delay_ms = 4
        trial = wrk(a, base, a.probe, 16, delay_ms, work, "calibrate")
        trial_rps = trial.get("rps") or 1.0
        answer_ms = max(0.0, 16 * 1000 / trial_rps - delay_ms)
        connections = max(4, round(target * (delay_ms + answer_ms) / 1000))
        res["capacity_rps"] = cap
        res["paced"] = {"connections": connections, "delay_ms": delay_ms,
                        "answer_ms": round(answer_ms, 2), "target_rps": target,
                        "calibration_rps": trial_rps}
        pb.log(f"capacity {cap:.0f} req/s; a paced connection answered every "
               f"{delay_ms + answer_ms:.2f} ms ({delay_ms} ms delay); soak: {connections} "
               f"connections for {target:.0f} req/s")
        seconds = int(a.minutes * 60)
        result = {}
        wt = threading.Thread(target=lambda: result.update(
            wrk(a, base, seconds, connections, delay_ms, work, "soak")))
        t0 = time.monotonic()
        wt.start()
        while wt.is_alive():
            s = proc_sample(run.p.pid)
            if s is None or run.poll() is not None:
                res["crashed"] = True
                break
            s["t"] = time.monotonic() - t0
            samples.append(s)
            if len(samples) % 30 == 0:
                pb.log(f"{s['t'] / 60:.1f} min: RSS {s['rss'] / 2**20:.0f} MiB, {s['fds']} fds, "
                       f"{s['threads']} threads, {len(passes)} passes fed")
            wt.join(a.sample)
        wt.join()
        res["wrk"] = result
    finally:
        stop.set()
        rc = run.stop(60)
        res["run_rc"] = rc
        pb.stop_all()
    res["passes_fed"] = len(passes)
    res["samples"] = samples
    counted = [s for s in samples if s["t"] >= a.warmup * 60]
    n = len(counted)
    verdict = []
    if n >= 6:
        mid, last = counted[n // 3: 2 * n // 3], counted[2 * n // 3:]
        for key in ("rss", "fds", "threads"):
            for how, f in (("median", statistics.median), ("max", max)):
                before, after = f(s[key] for s in mid), f(s[key] for s in last)
                res[f"{key}_{how}_growth"] = after / before - 1 if before else None
                verdict.append((f"{key} {how}", before, after))
    w = res.get("wrk", {})
    lines = [f"streamvec soak {stamp}: run for {a.minutes:g} min on {a.corpus} fed at "
             f"{a.feed_mbps:g} MB/s ({len(passes)} passes), wrk paced to half of "
             f"{res.get('capacity_rps', 0):.0f} req/s",
             f"  command: {res['command']}",
             f"  wrk: {w.get('requests')} requests, {w.get('rps', 0):.0f} req/s "
             f"({w.get('rps', 0) / max(1.0, res.get('capacity_rps') or 1.0):.2f} of the "
             f"capacity), p99 "
             f"{w.get('p99_ms', 0):.1f} ms, non-2xx {w.get('non_2xx')}, socket errors "
             f"{w.get('socket_errors')}",
             f"  run: exit status {res.get('run_rc')} after SIGTERM"
             f"{', CRASHED during the soak' if res.get('crashed') else ''}"]
    for key, b, pk in verdict:
        g = pk / b - 1 if b else 0
        unit = (lambda v: f"{v / 2**20:.0f} MiB") if key.startswith("rss") else \
            (lambda v: f"{v:.0f}")
        lines.append(f"  {key}: middle third {unit(b)}, last third {unit(pk)}: "
                     f"{g * 100:+.1f}% (bar within 10%: {'MET' if g <= 0.10 else 'NOT MET'})")
    ok = (not res.get("crashed") and res.get("run_rc") == 0 and w.get("non_2xx") == 0
          and w.get("socket_errors") == 0)
    lines.append(f"  0 non-2xx, 0 socket errors, no crash: {'MET' if ok else 'NOT MET'}")
    text = "\n".join(lines)
    print(text)
    (a.results / f"soak-{stamp}.txt").write_text(text + "\n")
    (a.results / f"soak-{stamp}.json").write_text(json.dumps(res, indent=1))
    pb.log(f"saved {a.results}/soak-{stamp}.txt and .json")


if __name__ == "__main__":
    main()
