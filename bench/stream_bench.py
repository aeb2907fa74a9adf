#!/usr/bin/python3
"""Streaming vs batch benchmark: issue 3's bars for `streamvec train --stream`.

Alternates the two processes, A B A B ... for --reps repetitions, on the same corpus and settings:
  stream: the script itself pipes the corpus into
          `streamvec train --input - --stream --state DIR --vocab-capacity 50000
           --snapshot-every 4000000 --output V` (Adagrad, --threads workers), so it knows how far
          the stream is by the bytes it has written; it samples the process's VmRSS from
          /proc/PID/status every --rss-interval seconds;
  batch:  `streamvec train --input CORPUS --output V --epochs 1 --threads N`.
Both get the same --dim --window --negative --sample --min-count --seed (given explicitly).
For each run: words/s = corpus words (counted like `wc -w`) / wall seconds of the whole process
(stream: reading, counting, training, snapshots, final snapshot and vectors file; batch: reading,
vocabulary, training, vectors file), and WS-353 Spearman by `streamvec eval --similarity`.
For the stream: VmRSS at 25/50/75/100% of the bytes fed (the last sample at or before the mark)
and the peak up to each mark (VmHWM, the kernel's exact high-water mark, read once the mark is
fed; for 100% once the process has consumed every byte and waits for more, before the script
closes its input); flatness = peak up to 100% / peak up to 25% (also from the samples alone);
the whole run's peak (with the final snapshot and --output after EOF) is reported apart.
--snapshot-every defaults to the trainer's own default (300s: no periodic snapshot in one pass);
--snapshot-every 4000000 adds four periodic snapshots, a stress test of the snapshot path.

Bars (issue 3): words/s ratio >= 0.8 on the median of the alternated reps; WS-353 ratio >= 0.95
and flatness <= 1.10 on every rep.
Results: bench/results/stream-<corpus>-<time>.{txt,json}. See docs/streaming.md.
"""

import argparse
import array
import datetime as dt
import fcntl
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
DATA = REPO.parent / "shared" / "data"  # ../shared/data from the repository root
DEFAULT_CORPUS = DATA / "corpus" / "enwiki-text8style-100m.txt"
WS353 = DATA / "eval" / "wordsim" / "EN-WS-353-ALL.txt"
MARKS = (0.25, 0.50, 0.75, 1.00)
CHUNK = 1 << 20

sys.path.insert(0, str(BENCH_DIR))
from train_bench import cpu_model, fmt, log, prepared_corpus  # noqa: E402


def common_flags(a) -> list[str]:
    return ["--dim", str(a.dim), "--window", str(a.window), "--negative", str(a.negative),
            "--sample", str(a.sample), "--min-count", str(a.min_count), "--seed", "1",
            "--threads", str(a.threads), "--format", "text", "--progress", "never"]


def vm_kib(pid: int) -> tuple[int, int] | None:
    """(VmRSS, VmHWM) of pid in KiB: resident now, and the kernel's exact peak so far."""
    rss = hwm = None
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
    except OSError:
        return None
    return (rss, hwm) if rss is not None and hwm is not None else None


def wait_until_input_consumed(proc, timeout: float = 60.0) -> bool:
    """True once the pipe into proc is empty and proc's main thread waits in read(2) for more:
    everything written was read and processed, and the process has not seen EOF yet."""
    unread = array.array("i", [0])
    end = time.perf_counter() + timeout
    while time.perf_counter() < end:
        fcntl.ioctl(proc.stdin.fileno(), termios.FIONREAD, unread)
        try:
            with open(f"/proc/{proc.pid}/wchan") as f:
                waiting = "pipe_read" in f.read()
        except OSError:
            return False
        if unread[0] == 0 and waiting:
            return True
        time.sleep(0.002)
    return False


def run_stream(a, streamvec: Path, corpus: Path, vec: Path, base: Path) -> dict:
    """One stream run, the corpus piped by this process; wall, RSS samples by position."""
    state = Path(tempfile.mkdtemp(prefix="stream-bench-state-", dir=a.tmp))
    cmd = [str(streamvec), "train", "--input", "-", "--stream", "--state", str(state),
           "--vocab-capacity", str(a.vocab_capacity), "--snapshot-every", str(a.snapshot_every),
           "--output", str(vec)] + common_flags(a) + a.stream_arg
    total = corpus.stat().st_size
    fed = [0]  # bytes written into the pipe so far
    samples: list[tuple[float, int, int, int]] = []  # (seconds, bytes fed, VmRSS, VmHWM KiB)
    end_of_input_hwm = [None]  # VmHWM KiB once all input was consumed, before EOF
    err = open(base.with_suffix(".stderr"), "wb")
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err)
    done = threading.Event()

    def sample():
        while not done.is_set():
            v = vm_kib(proc.pid)
            if v is not None:
                samples.append((time.perf_counter() - t0, fed[0], v[0], v[1]))
            done.wait(a.rss_interval)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    write_error = None
    try:
        with open(corpus, "rb") as src:
            while chunk := src.read(CHUNK):
                proc.stdin.write(chunk)
                fed[0] += len(chunk)
        proc.stdin.flush()
        # The exact peak over the whole stream: read once the process has trained on every byte
        # and waits for more, before EOF starts the final snapshot and the vectors file.
        if wait_until_input_consumed(proc):
            v = vm_kib(proc.pid)
            if v is not None:
                end_of_input_hwm[0] = v[1]
        proc.stdin.close()
    except BrokenPipeError as e:
        write_error = f"the stream process closed its input: {e}"
    fed_s = time.perf_counter() - t0
    try:
        rc = proc.wait(timeout=a.timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
        write_error = f"timed out after {a.timeout:.0f} s"
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    err.close()
    shutil.rmtree(state, ignore_errors=True)
    row = {"mode": "stream", "command": cmd, "rc": rc, "ok": rc == 0 and write_error is None,
           "wall_s": wall, "fed_s": fed_s, "rss_samples": len(samples)}
    if write_error or rc != 0:
        tail = base.with_suffix(".stderr").read_text(errors="replace").strip().splitlines()[-3:]
        row["error"] = write_error or f"exit status {rc}: " + " | ".join(tail)
    # RSS by position: the last sample at or before each mark, and the peak up to it: the
    # kernel's VmHWM at the first sample once the mark was fed (exact, whatever the sampling
    # missed); for 100%: read once every byte was consumed and before EOF (the final snapshot and
    # the vectors file come after the stream and count in the whole-run peak only).
    for m in MARKS:
        upto = [s for s in samples if s[1] <= m * total and s[0] <= fed_s]
        past = [s for s in samples if s[1] >= m * total]
        key = f"{int(m * 100)}"
        row[f"rss_at_{key}_mib"] = upto[-1][2] / 1024 if upto else None
        row[f"sampled_peak_to_{key}_mib"] = max(s[2] for s in upto) / 1024 if upto else None
        row[f"peak_to_{key}_mib"] = past[0][3] / 1024 if past else None
    if end_of_input_hwm[0] is not None:
        row["peak_to_100_mib"] = end_of_input_hwm[0] / 1024
    row["peak_mib"] = samples[-1][3] / 1024 if samples else None
    if row.get("peak_to_25_mib") and row.get("peak_to_100_mib"):
        row["rss_flatness"] = row["peak_to_100_mib"] / row["peak_to_25_mib"]
    if row.get("sampled_peak_to_25_mib") and row.get("sampled_peak_to_100_mib"):
        row["sampled_rss_flatness"] = (row["sampled_peak_to_100_mib"] /
                                       row["sampled_peak_to_25_mib"])
    return row


def run_batch(a, streamvec: Path, corpus: Path, vec: Path, base: Path) -> dict:
    cmd = [str(streamvec), "train", "--input", str(corpus), "--output", str(vec),
           "--epochs", "1"] + common_flags(a) + a.batch_arg
    # Wall time and peak RSS from wait4 (ru_maxrss, KiB), as train_bench.py: polling the process
    # every rss_interval would round its wall time up to that interval.
    with open(base.with_suffix(".stderr"), "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err)
        watchdog = threading.Timer(a.timeout, proc.kill)
        watchdog.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            watchdog.cancel()
        wall = time.perf_counter() - t0
        rc = os.waitstatus_to_exitcode(status)
        proc.returncode = rc
    row = {"mode": "batch", "command": cmd, "rc": rc, "ok": rc == 0, "wall_s": wall,
           "peak_rss_mib": usage.ru_maxrss / 1024 if usage.ru_maxrss else None}
    if rc != 0:
        tail = base.with_suffix(".stderr").read_text(errors="replace").strip().splitlines()[-3:]
        row["error"] = f"exit status {rc}: " + " | ".join(tail)
    return row


def ws353(streamvec: Path, vec: Path) -> dict:
    cmd = [str(streamvec), "eval", "--vectors", str(vec), "--similarity", str(WS353), "--json"]
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        return {"eval_error": p.stderr.strip()[-300:]}
    d = json.loads(p.stdout)
    s = (d.get("similarity") or [{}])[0]
    return {"ws353": s.get("spearman"), "ws353_pairs": s.get("pairs"), "rows": d.get("rows")}


def med(rows, mode, key):
    vals = [r[key] for r in rows if r["mode"] == mode and r.get(key) is not None]
    return statistics.median(vals) if vals else None


def span(rows, mode, key, spec):
    vals = [r[key] for r in rows if r["mode"] == mode and r.get(key) is not None]
    if not vals:
        return "-"
    lo, hi = min(vals), max(vals)
    return format(lo, spec) if lo == hi else f"{format(lo, spec)}-{format(hi, spec)}"


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="text corpus")
    p.add_argument("--reps", type=int, default=2, help="repetitions of the stream, batch cycle")
    p.add_argument("--dim", type=int, default=100)
    p.add_argument("--window", type=int, default=5)
    p.add_argument("--negative", type=int, default=5)
    p.add_argument("--sample", type=float, default=1e-3,
                   help="subsampling threshold of both (the default of `streamvec train`)")
    p.add_argument("--min-count", type=int, default=5)
    p.add_argument("--threads", type=int, default=2,
                   help="batch training threads and stream workers")
    p.add_argument("--vocab-capacity", type=int, default=50000)
    p.add_argument("--snapshot-every", default="300s",
                   help="the stream's --snapshot-every (default: the trainer's own, 300s)")
    p.add_argument("--rss-interval", type=float, default=0.5, help="VmRSS sampling, seconds")
    p.add_argument("--streamvec", type=Path, default=REPO / "build" / "app" / "streamvec",
                   help="streamvec binary (trains both, and scores)")
    p.add_argument("--stream-arg", action="append", default=[],
                   help="extra argument for the stream run (repeatable)")
    p.add_argument("--batch-arg", action="append", default=[],
                   help="extra argument for the batch run (repeatable)")
    p.add_argument("--results", type=Path, default=BENCH_DIR / "results")
    p.add_argument("--tmp", default=None, help="where the stream's state directory goes")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    p.add_argument("--no-eval", action="store_true", help="skip WS-353")
    a = p.parse_args()
    if not a.corpus.is_file():
        p.error(f"corpus {a.corpus} not found")
    if a.reps < 1:
        p.error("--reps must be >= 1")
    streamvec = a.streamvec.resolve()
    if not os.access(streamvec, os.X_OK):
        p.error(f"{streamvec} not found (build it)")

    a.results.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    name = f"stream-{a.corpus.stem}-{stamp}"
    work = a.results / "runs" / name
    work.mkdir(parents=True, exist_ok=True)
    words, _ = prepared_corpus(a.corpus, a.results / "cache", False)
    load_before = os.getloadavg()
    log(f"corpus {a.corpus} ({words:,} words), {a.reps} rep(s), load average "
        f"{load_before[0]:.2f} on {os.cpu_count()} CPUs")

    rows: list[dict] = []
    for rep in range(1, a.reps + 1):
        for mode in ("stream", "batch"):
            base = work / f"{mode}-{rep}"
            vec = base.with_suffix(".vec")
            log(f"run {rep}/{a.reps} {mode} ...")
            run = run_stream if mode == "stream" else run_batch
            row = run(a, streamvec, a.corpus, vec, base)
            row["run"] = rep
            row["load"] = os.getloadavg()[0]
            if row["ok"]:
                row["words_per_s"] = words / row["wall_s"]
                if not a.no_eval and vec.exists():
                    row.update(ws353(streamvec, vec))
            vec.unlink(missing_ok=True)
            rows.append(row)
            extra = (f", RSS 25/50/75/100% {fmt(row.get('rss_at_25_mib'), '.0f')}/"
                     f"{fmt(row.get('rss_at_50_mib'), '.0f')}/{fmt(row.get('rss_at_75_mib'), '.0f')}/"
                     f"{fmt(row.get('rss_at_100_mib'), '.0f')} MiB, flatness "
                     f"{fmt(row.get('rss_flatness'), '.3f')}" if mode == "stream" else
                     f", peak RSS {fmt(row.get('peak_rss_mib'), '.0f')} MiB")
            log(f"  {mode}: {'ok' if row['ok'] else 'FAILED: ' + str(row.get('error'))}, wall "
                f"{fmt(row.get('wall_s'), '.2f')} s, {fmt(row.get('words_per_s'), ',.0f')} words/s, "
                f"WS-353 {fmt(row.get('ws353'), '.3f')}{extra}")

    load_after = os.getloadavg()
    # Ratios per rep (a stream run and the batch run right after it), then their range.
    ratios = []
    for rep in range(1, a.reps + 1):
        s = next((r for r in rows if r["run"] == rep and r["mode"] == "stream"), {})
        b = next((r for r in rows if r["run"] == rep and r["mode"] == "batch"), {})
        q = {"run": rep}
        if s.get("words_per_s") and b.get("words_per_s"):
            q["speed"] = s["words_per_s"] / b["words_per_s"]
        if s.get("ws353") is not None and b.get("ws353"):
            q["ws353"] = s["ws353"] / b["ws353"]
        ratios.append(q)
    sp = [q["speed"] for q in ratios if "speed" in q]
    wr = [q["ws353"] for q in ratios if "ws353" in q]
    fl = [r["rss_flatness"] for r in rows if r.get("rss_flatness")]
    summary = {
        "stream_words_per_s_median": med(rows, "stream", "words_per_s"),
        "batch_words_per_s_median": med(rows, "batch", "words_per_s"),
        "speed_ratio_per_rep": sp,
        "speed_ratio_median": statistics.median(sp) if sp else None, "ws353_ratio_per_rep": wr, "rss_flatness_per_run": fl,
        "bars": {
            # On the median of the alternated reps, as train_bench.py's ratio: one rep's ratio
            # moves by +-20% when another tenant of this shared box takes a core during one of
            # the two runs (the per-rep ratios and their minimum are printed too).
            "throughput >= 0.8x batch (median of reps)": (statistics.median(sp) >= 0.8)
            if sp else None,
            "WS-353 >= 0.95x batch": (min(wr) >= 0.95) if wr else None,
            "RSS flat within 10% (25% -> 100%)": (max(fl) <= 1.10) if fl else None,
        },
    }
    lines = [
        f"streamvec stream vs batch benchmark {stamp}",
        f"corpus {a.corpus} ({words:,} words); dim {a.dim}, window {a.window}, negative "
        f"{a.negative}, sample {a.sample:g}, min-count {a.min_count}, {a.threads} thread(s); "
        f"stream: capacity {a.vocab_capacity}, snapshot every {a.snapshot_every}",
        f"{cpu_model()}, {os.cpu_count()} CPUs, load average {load_before[0]:.2f} before, "
        f"{load_after[0]:.2f} after",
        "words/s = corpus words / wall s of the whole process; RSS = VmRSS sampled every "
        f"{a.rss_interval:g} s at 25/50/75/100% of the bytes fed; peak = VmHWM once a mark is fed",
        "",
        "| run | mode | wall s | words/s | WS-353 (pairs) | RSS 25/50/75/100% MiB | "
        "peak (VmHWM) to 25% / 100% | flatness (sampled) | whole-run peak MiB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        rss = "/".join(fmt(r.get(f"rss_at_{k}_mib"), ".0f") for k in ("25", "50", "75", "100"))
        lines.append(
            f"| {r['run']} | {r['mode']} | {fmt(r.get('wall_s'), '.2f')} | "
            f"{fmt(r.get('words_per_s'), ',.0f')} | {fmt(r.get('ws353'), '.3f')} "
            f"({fmt(r.get('ws353_pairs'), 'd')}) | {rss if r['mode'] == 'stream' else '-'} | "
            f"{fmt(r.get('peak_to_25_mib'), '.0f')} / {fmt(r.get('peak_to_100_mib'), '.0f')} | "
            f"{fmt(r.get('rss_flatness'), '.3f')} ({fmt(r.get('sampled_rss_flatness'), '.3f')}) | "
            f"{fmt(r.get('peak_mib') or r.get('peak_rss_mib'), '.0f')} |")
    lines += [
        "",
        f"stream words/s {span(rows, 'stream', 'words_per_s', ',.0f')}, batch "
        f"{span(rows, 'batch', 'words_per_s', ',.0f')}",
        "ratio stream/batch per rep: " + ", ".join(f"{x:.3f}" for x in sp) +
        (f" (median {statistics.median(sp):.3f}, min {min(sp):.3f})" if sp else ""),
        "WS-353 ratio stream/batch per rep: " + ", ".join(f"{x:.3f}" for x in wr),
        "RSS flatness (VmHWM at 100% / at 25% of the stream) per stream run: " +
        ", ".join(f"{x:.3f}" for x in fl),
        "bars: " + "; ".join(f"{k}: {'met' if v else 'NOT met' if v is not None else '-'}"
                             for k, v in summary["bars"].items()),
    ]
    text = "\n".join(lines) + "\n"
    out_txt = a.results / f"{name}.txt"
    out_json = a.results / f"{name}.json"
    out_txt.write_text(text)
    out_json.write_text(json.dumps({
        "when": stamp, "corpus": str(a.corpus), "corpus_words": words,
        "settings": {k: getattr(a, k) for k in ("dim", "window", "negative", "sample",
                                                "min_count", "threads", "vocab_capacity",
                                                "snapshot_every", "rss_interval")},
        "machine": {"cpu": cpu_model(), "cpus": os.cpu_count(), "load_before": load_before,
                    "load_after": load_after},
        "runs": rows, "ratios": ratios, "summary": summary}, indent=1, default=str))
    print(text, end="", flush=True)
    log(f"saved {out_txt} and {out_json}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
