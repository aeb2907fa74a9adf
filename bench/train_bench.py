#!/usr/bin/python3
"""Training benchmark: streamvec vs gensim vs fastText on the same corpus and settings.

Each peer is run as its own process, alternating A B C A B C ... for --reps repetitions. For each
run: wall seconds of the whole process (read, vocabulary, train, write), words/s = corpus words
(counted like `wc -w`) / wall seconds, peak RSS of that process (ru_maxrss from wait4), and the
quality of its vectors scored by `streamvec eval --json` (WS-353, MEN, Google analogy,
restrict 30000), so every peer is scored by the same code.

Run with Debian's /usr/bin/python3 (gensim 4.2 from python3-gensim). See bench/README.md.
"""

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
DATA = REPO.parent / "shared" / "data"  # ../shared/data from the repository root
DEFAULT_CORPUS = DATA / "corpus" / "enwiki-text8style-100m.txt"
EVAL_DIR = DATA / "eval"
PEERS = ("streamvec", "gensim", "fasttext")
WRAP_TOKENS = 1000  # gensim corpus_file mode drops everything after 10,000 words of a line


# ---------------------------------------------------------------------------------------------
# corpus preparation (cached)

def count_words(path: Path) -> int:
    """Whitespace-separated tokens, like `wc -w` (ASCII whitespace)."""
    n = 0
    tail_in_word = False
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 24)
            if not chunk:
                break
            parts = chunk.split()
            n += len(parts)
            # a word cut by the chunk boundary is counted twice: undo that
            if tail_in_word and parts and not chunk[:1].isspace():
                n -= 1
            tail_in_word = not chunk[-1:].isspace()
    return n


def source_key(path: Path) -> str:
    st = path.stat()
    return f"{path.resolve()}:{st.st_size}:{int(st.st_mtime)}"


def prepared_corpus(corpus: Path, cache: Path, need_wrap: bool) -> tuple[int, Path | None]:
    """Word count of the corpus and (if need_wrap) a copy re-wrapped to <= WRAP_TOKENS a line."""
    cache.mkdir(parents=True, exist_ok=True)
    key = source_key(corpus)
    meta_path = cache / f"{corpus.name}.meta.json"
    wrapped = cache / f"{corpus.stem}.wrap{WRAP_TOKENS}.txt"
    meta = {}
    if meta_path.exists():
        try:
            meta = json.loads(meta_path.read_text())
        except ValueError:
            meta = {}
    if meta.get("source") != key:
        meta = {"source": key}
    if "words" not in meta:
        t = time.perf_counter()
        meta["words"] = count_words(corpus)
        log(f"counted {meta['words']:,} words in {corpus} ({time.perf_counter() - t:.1f} s)")
        meta_path.write_text(json.dumps(meta))
    if need_wrap and (not meta.get("wrapped") or not wrapped.exists()):
        t = time.perf_counter()
        tmp = wrapped.with_suffix(".tmp")
        buf: list[bytes] = []
        written = 0
        with open(corpus, "rb") as src, open(tmp, "wb") as dst:
            carry = b""
            while True:
                chunk = src.read(1 << 24)
                if not chunk:
                    break
                chunk = carry + chunk
                cut = max(chunk.rfind(b" "), chunk.rfind(b"\n"), chunk.rfind(b"\t"))
                if cut < 0:
                    carry = chunk
                    continue
                carry = chunk[cut + 1:]
                buf.extend(chunk[:cut].split())
                full = len(buf) - len(buf) % WRAP_TOKENS
                dst.write(b"".join(b" ".join(buf[i:i + WRAP_TOKENS]) + b"\n"
                                   for i in range(0, full, WRAP_TOKENS)))
                written += full
                buf = buf[full:]
            buf.extend(carry.split())
            for i in range(0, len(buf), WRAP_TOKENS):
                part = buf[i:i + WRAP_TOKENS]
                dst.write(b" ".join(part) + b"\n")
                written += len(part)
        if written != meta["words"]:
            raise RuntimeError(f"re-wrapped copy has {written} words, corpus has {meta['words']}")
        os.replace(tmp, wrapped)
        meta["wrapped"] = True
        meta_path.write_text(json.dumps(meta))
        log(f"wrote {wrapped} (lines of <= {WRAP_TOKENS} tokens, {time.perf_counter() - t:.1f} s)")
    return meta["words"], (wrapped if need_wrap else None)


# ---------------------------------------------------------------------------------------------
# running one process, measured

# Peak RSS must be measured by a small parent: Linux carries the RSS high-water mark of the forked
# image into ru_maxrss across exec, so wait4 on a child forked from this (large) Python process
# would report at least this process's own peak. /usr/bin/time (GNU time) forks the peer from a
# tiny image; without it, a fresh minimal Python process does the same (floor ~10 MiB).
GNU_TIME = "/usr/bin/time"
RUSAGE_SHIM = r"""
import os, sys
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    except OSError as e:
        sys.stderr.write(f"cannot start {sys.argv[2]}: {e}\n")
        os._exit(127)
_, status, ru = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(f"{ru.ru_maxrss} {ru.ru_utime} {ru.ru_stime}\n")
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def run_measured(cmd: list[str], stdout_path: Path, stderr_path: Path, timeout: float) -> dict:
    """Run cmd; wall seconds, exit status, peak RSS (KiB) and CPU seconds of that one process."""
    rusage_path = stdout_path.with_suffix(".rusage")
    rusage_path.unlink(missing_ok=True)
    if os.access(GNU_TIME, os.X_OK):
        wrapped = [GNU_TIME, "-f", "%M %U %S", "-o", str(rusage_path), "--"] + cmd
        method = "GNU time %M"
    else:
        wrapped = [sys.executable, "-S", "-c", RUSAGE_SHIM, str(rusage_path)] + cmd
        method = "wait4 in a minimal python parent"
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen(wrapped, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    start_new_session=True)
        except OSError as e:
            return {"ok": False, "error": f"cannot start {wrapped[0]}: {e}", "wall_s": None,
                    "rss_kib": None, "rc": None}
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        wall = time.perf_counter() - t0
    rc = proc.returncode
    res = {"ok": rc == 0 and not timed_out, "rc": rc, "wall_s": wall, "rss_kib": None,
           "rss_method": method}
    try:
        # GNU time writes "Command exited with non-zero status N" first when it fails
        fields = rusage_path.read_text().strip().splitlines()[-1].split()
        res["rss_kib"] = int(fields[0])
        res["user_s"], res["sys_s"] = float(fields[1]), float(fields[2])
    except (OSError, IndexError, ValueError):
        pass
    if timed_out:
        res["error"] = f"timed out after {timeout:.0f} s"
    elif rc != 0:
        tail = stderr_path.read_text(errors="replace").strip().splitlines()[-5:]
        res["error"] = f"exit status {rc}: " + " | ".join(tail)
    return res


SUMMARY_RE = re.compile(
    r"train ([0-9.]+) s \(([0-9.]+)([kMG]?) words/s\).*?loss ([0-9.naif-]+)", re.S)


def parse_streamvec_summary(text: str) -> dict:
    m = SUMMARY_RE.search(text)
    if not m:
        return {}
    scale = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9}[m.group(3)]
    out = {"train_s": float(m.group(1)), "train_words_per_s": float(m.group(2)) * scale}
    try:
        out["loss"] = float(m.group(4))
    except ValueError:
        pass
    line = next((ln for ln in text.splitlines() if ln.startswith("streamvec train:")), None)
    if line:
        out["summary"] = line.strip()
    return out


# ---------------------------------------------------------------------------------------------
# evaluation

def eval_files() -> dict:
    return {
        "ws353": EVAL_DIR / "wordsim" / "EN-WS-353-ALL.txt",
        "men": EVAL_DIR / "wordsim" / "EN-MEN-TR-3k.txt",
        "analogy": EVAL_DIR / "analogy" / "questions-words.txt",
    }


def evaluate(streamvec: Path, vectors: Path, restrict: int, threads: int) -> dict:
    f = eval_files()
    cmd = [str(streamvec), "eval", "--vectors", str(vectors), "--similarity", str(f["ws353"]),
           "--similarity", str(f["men"]), "--analogy", str(f["analogy"]),
           "--restrict", str(restrict), "--threads", str(threads), "--json"]
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=900)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": f"eval failed: {e}"}
    if p.returncode != 0:
        return {"error": f"eval exit status {p.returncode}: {p.stderr.strip()[-300:]}"}
    try:
        d = json.loads(p.stdout)
    except ValueError as e:
        return {"error": f"eval printed no JSON: {e}"}
    out = {"rows": d.get("rows")}
    sims = {Path(s.get("file", "")).name: s for s in d.get("similarity") or []}
    for key in ("ws353", "men"):
        s = sims.get(f[key].name)
        out[key] = s.get("spearman") if s else None
        out[key + "_pairs"] = s.get("pairs") if s else None
    a = d.get("analogy") or {}
    out["analogy"] = a.get("accuracy")
    out["analogy_total"] = a.get("total")
    return out


# ---------------------------------------------------------------------------------------------
# peers

def peer_command(peer: str, a, corpus: Path, wrapped: Path | None, out_base: Path,
                 streamvec: Path) -> tuple[list[str], Path]:
    """The command line of one training run and the vectors file it writes."""
    if peer == "streamvec":
        vec = out_base.with_suffix(".vec")
        cmd = [str(streamvec), "train", "--input", str(corpus), "--output", str(vec),
               "--model", a.model, "--dim", str(a.dim), "--window", str(a.window),
               "--negative", str(a.negative), "--sample", str(a.sample),
               "--min-count", str(a.min_count), "--epochs", str(a.epochs),
               "--threads", str(a.threads), "--alpha", str(a.alpha), "--seed", "1",
               "--format", "text", "--progress", "never"] + a.streamvec_arg
        return cmd, vec
    if peer == "gensim":
        vec = out_base.with_suffix(".vec")
        cmd = [a.python, str(BENCH_DIR / "gensim_train.py"), "--corpus-file", str(wrapped),
               "--output", str(vec), "--model", a.model, "--dim", str(a.dim),
               "--window", str(a.window), "--negative", str(a.negative),
               "--sample", str(a.sample), "--min-count", str(a.min_count),
               "--epochs", str(a.epochs), "--workers", str(a.threads), "--alpha", str(a.alpha),
               "--seed", "1"]
        return cmd, vec
    if peer == "fasttext":
        cmd = [a.fasttext, "skipgram" if a.model == "sgns" else "cbow", "-input", str(corpus),
               "-output", str(out_base), "-dim", str(a.dim), "-ws", str(a.window),
               "-neg", str(a.negative), "-t", str(a.sample), "-minCount", str(a.min_count),
               "-epoch", str(a.epochs), "-thread", str(a.threads), "-lr", str(a.alpha),
               "-minn", "0", "-maxn", "0", "-verbose", "0"]
        return cmd, out_base.with_suffix(".vec")
    raise ValueError(peer)


def peer_available(peer: str, a, streamvec: Path) -> str | None:
    """None when the peer can run, else why not."""
    if peer == "streamvec":
        return None if os.access(streamvec, os.X_OK) else f"{streamvec} not found (build it)"
    if peer == "gensim":
        try:
            p = subprocess.run([a.python, "-c", "import gensim"], capture_output=True, text=True,
                               timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"{a.python}: {e}"
        return None if p.returncode == 0 else f"{a.python} cannot import gensim (apt-get install python3-gensim)"
    if peer == "fasttext":
        return None if shutil.which(a.fasttext) else f"{a.fasttext} not found (apt-get install fasttext)"
    return "unknown peer"


def versions(a, streamvec: Path) -> dict:
    v = {}
    def cap(cmd):
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            return (p.stdout + p.stderr).strip().splitlines()[0] if (p.stdout + p.stderr).strip() else None
        except (OSError, subprocess.TimeoutExpired, IndexError):
            return None
    v["streamvec"] = cap([str(streamvec), "--version"])
    v["gensim"] = cap([a.python, "-c", "import gensim; print(gensim.__version__)"])
    v["fasttext"] = cap(["dpkg-query", "-W", "-f=${Version}", "fasttext"])
    return v


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# ---------------------------------------------------------------------------------------------
# report

def fmt(v, spec, none="-"):
    return none if v is None else format(v, spec)


def mwps(v):
    return None if v is None else v / 1e6


COLUMNS = [("peer", "<9"), ("run", ">3"), ("wall s", ">7"), ("CPU s", ">6"), ("words/s", ">8"),
           ("RSS MiB", ">7"), ("WS-353", ">6"), ("MEN", ">6"), ("analogy", ">7"),
           ("train w/s", ">9")]


def table(rows: list[dict]) -> str:
    head = "  ".join(format(name, spec) for name, spec in COLUMNS)
    lines = [head, "-" * len(head)]
    for r in rows:
        cells = [r["peer"], str(r["run"]),
                 fmt(r.get("wall_s"), ".2f"), fmt(r.get("cpu_s"), ".1f"),
                 fmt(mwps(r.get("words_per_s")), ".2f") + ("M" if r.get("words_per_s") else ""),
                 fmt(r.get("rss_mib"), ".0f"),
                 fmt(r.get("ws353"), ".3f"), fmt(r.get("men"), ".3f"),
                 fmt(r.get("analogy"), ".3f"),
                 fmt(mwps(r.get("train_words_per_s")), ".2f") + ("M" if r.get("train_words_per_s") else "")]
        line = "  ".join(format(c, spec) for c, (_, spec) in zip(cells, COLUMNS))
        if r.get("error"):
            line += f"  FAILED: {r['error']}"
        lines.append(line.rstrip())
    return "\n".join(lines)


def median_of(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def summarize(rows: list[dict], peers: list[str]) -> dict:
    keys = ("wall_s", "cpu_s", "words_per_s", "rss_mib", "ws353", "men", "analogy", "train_words_per_s")
    med = {}
    for p in peers:
        ok = [r for r in rows if r["peer"] == p and r.get("ok")]
        med[p] = {"runs_ok": len(ok), "runs": sum(1 for r in rows if r["peer"] == p)}
        med[p].update({k: median_of(ok, k) for k in keys})
    ratios = {}
    sv = med.get("streamvec", {})
    for other in ("gensim", "fasttext"):
        o = med.get(other)
        if not o:
            continue
        def ratio(k):
            return sv[k] / o[k] if sv.get(k) and o.get(k) else None
        ratios[f"streamvec/{other}"] = {"words_per_s": ratio("words_per_s"),
                                        "rss": ratio("rss_mib")}
    return {"median": med, "ratios": ratios}


def summary_text(summ: dict) -> str:
    rows = [dict(peer=p, run="med", **{k: v for k, v in m.items() if k not in ("runs", "runs_ok")})
            for p, m in summ["median"].items()]
    lines = ["median per peer (successful runs):", table(rows)]
    for name, r in summ["ratios"].items():
        lines.append(f"{name:>19}: words/s x{fmt(r['words_per_s'], '.2f', 'n/a')}, "
                     f"peak RSS x{fmt(r['rss'], '.2f', 'n/a')}")
    return "\n".join(lines)


def log(msg: str):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------

def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS,
                   help="text corpus (words separated by whitespace)")
    p.add_argument("--model", choices=["sgns", "cbow"], default="sgns")
    p.add_argument("--reps", type=int, default=2, help="repetitions of the A B C cycle")
    p.add_argument("--peers", default=",".join(PEERS),
                   help="comma-separated subset of " + ",".join(PEERS) + " (order = run order)")
    p.add_argument("--dim", type=int, default=100)
    p.add_argument("--window", type=int, default=5)
    p.add_argument("--negative", type=int, default=5)
    p.add_argument("--sample", type=float, default=1e-4)
    p.add_argument("--min-count", type=int, default=5)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--threads", type=int, default=2, help="training threads of every peer")
    p.add_argument("--alpha", type=float, default=0.025, help="initial learning rate of every peer")
    p.add_argument("--restrict", type=int, default=30000, help="analogy vocabulary restriction")
    p.add_argument("--streamvec", type=Path, default=REPO / "build" / "app" / "streamvec",
                   help="streamvec binary (trains, and scores every peer)")
    p.add_argument("--streamvec-arg", action="append", default=[],
                   help="extra argument for `streamvec train` (repeatable), e.g. --streamvec-arg=--kernel=avx2")
    p.add_argument("--python", default="/usr/bin/python3", help="python with gensim")
    p.add_argument("--fasttext", default="/usr/bin/fasttext", help="fastText CLI")
    p.add_argument("--results", type=Path, default=BENCH_DIR / "results",
                   help="where the table, JSON and cache go")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per training run")
    p.add_argument("--keep-vectors", action="store_true", help="keep the trained vectors files")
    p.add_argument("--no-eval", action="store_true", help="skip the quality scores")
    a = p.parse_args()

    peers = [x.strip() for x in a.peers.split(",") if x.strip()]
    bad = [x for x in peers if x not in PEERS]
    if bad or not peers:
        p.error(f"unknown peer(s) {bad}; choose from {','.join(PEERS)}")
    if not a.corpus.is_file():
        p.error(f"corpus {a.corpus} not found")
    if a.reps < 1:
        p.error("--reps must be >= 1")
    streamvec = a.streamvec.resolve()

    a.results.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    name = f"train-{a.model}-{a.corpus.stem}-{stamp}"
    work = a.results / "runs" / name
    work.mkdir(parents=True, exist_ok=True)

    skipped = {x: why for x in peers if (why := peer_available(x, a, streamvec))}
    for x, why in skipped.items():
        log(f"peer {x} unavailable: {why}")

    words, wrapped = prepared_corpus(a.corpus, a.results / "cache",
                                     need_wrap="gensim" in peers and "gensim" not in skipped)
    load_before = os.getloadavg()
    settings = {k: getattr(a, k) for k in ("model", "dim", "window", "negative", "sample",
                                           "min_count", "epochs", "threads", "alpha", "restrict")}
    settings["min_alpha"] = {"streamvec": "its default (alpha/4)",
                             "gensim": "its default (0.0001)",
                             "fasttext": "its schedule (linear to 0)"}
    log(f"corpus {a.corpus} ({words:,} words), model {a.model}, peers {','.join(peers)}, "
        f"{a.reps} rep(s), load average {load_before[0]:.2f} on {os.cpu_count()} CPUs")

    rows: list[dict] = []
    for rep in range(1, a.reps + 1):
        for peer in peers:
            row = {"peer": peer, "run": rep}
            rows.append(row)
            if peer in skipped:
                row.update(ok=False, error=f"unavailable: {skipped[peer]}")
                continue
            base = work / f"{peer}-{rep}"
            cmd, vec = peer_command(peer, a, a.corpus, wrapped, base, streamvec)
            row["command"] = cmd
            log(f"run {rep}/{a.reps} {peer} ...")
            res = run_measured(cmd, base.with_suffix(".stdout"), base.with_suffix(".stderr"),
                               a.timeout)
            row.update(res)
            if res.get("user_s") is not None:
                row["cpu_s"] = res["user_s"] + res["sys_s"]
            if res.get("rss_kib") is not None:
                row["rss_mib"] = res["rss_kib"] / 1024
            if res["ok"] and res["wall_s"]:
                row["words_per_s"] = words / res["wall_s"]
            err_text = base.with_suffix(".stderr").read_text(errors="replace")
            if peer == "streamvec":
                row.update(parse_streamvec_summary(err_text))
            elif peer == "gensim":
                try:
                    row["gensim"] = json.loads(base.with_suffix(".stdout").read_text().strip().splitlines()[-1])
                except (ValueError, IndexError):
                    pass
            if res["ok"] and not vec.exists():
                row.update(ok=False, error=f"no vectors file {vec}")
            if row["ok"] and not a.no_eval:
                ev = evaluate(streamvec, vec, a.restrict, a.threads)
                if "error" in ev:
                    row["eval_error"] = ev["error"]
                    log(f"  {peer}: {ev['error']}")
                row.update({k: v for k, v in ev.items() if k != "error"})
            if not a.keep_vectors:
                for f in (vec, base.with_suffix(".bin")):
                    f.unlink(missing_ok=True)
            state = "ok" if row["ok"] else f"FAILED ({row.get('error')})"
            log(f"  {peer}: {state}, wall {fmt(row.get('wall_s'), '.2f')} s, "
                f"RSS {fmt(row.get('rss_mib'), '.0f')} MiB, WS-353 {fmt(row.get('ws353'), '.3f')}, "
                f"analogy {fmt(row.get('analogy'), '.3f')}")

    summ = summarize(rows, peers)
    load_after = os.getloadavg()
    header = (f"streamvec training benchmark {stamp}\n"
              f"corpus {a.corpus} ({words:,} words); {a.model}, dim {a.dim}, window {a.window}, "
              f"negative {a.negative}, sample {a.sample:g}, min-count {a.min_count}, "
              f"{a.epochs} epoch(s), {a.threads} thread(s), alpha {a.alpha:g}\n"
              f"{cpu_model()}, {os.cpu_count()} CPUs, load average {load_before[0]:.2f} before, "
              f"{load_after[0]:.2f} after\n"
              f"words/s = corpus words / wall s of the whole process; CPU s = its user+system time; "
              f"RSS = its peak; "
              f"quality by `streamvec eval` (Spearman; analogy restrict {a.restrict}); "
              f"train w/s = streamvec's own training phase")
    text = "\n\n".join([header, table(rows), summary_text(summ)]) + "\n"
    out_txt = a.results / f"{name}.txt"
    out_json = a.results / f"{name}.json"
    out_txt.write_text(text)
    out_json.write_text(json.dumps({
        "when": stamp, "corpus": str(a.corpus), "corpus_words": words,
        "gensim_corpus": str(wrapped) if wrapped else None, "settings": settings,
        "peers": peers, "reps": a.reps, "versions": versions(a, streamvec),
        "machine": {"cpu": cpu_model(), "cpus": os.cpu_count(),
                    "load_before": load_before, "load_after": load_after},
        "runs": rows, "summary": summ}, indent=1, default=str))
    for latest, src in ((a.results / "latest.txt", out_txt), (a.results / "latest.json", out_json)):
        latest.unlink(missing_ok=True)
        latest.symlink_to(src.name)
    print(text, end="", flush=True)
    log(f"saved {out_txt} and {out_json}")
    return 0 if any(r.get("ok") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
