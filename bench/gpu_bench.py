#!/usr/bin/python3
"""GPU benchmark: `streamvec train --device cuda` against `--device cpu` on the same corpus.

For each model (skip-gram, CBOW) the GPU and CPU runs alternate, --reps times each, as separate
processes with the same flags (issue 22's bar: the 100M benchmark corpus, dim 100, window 5,
negative 5, sample 1e-4, 5 epochs). Per run: the training phase's words/s (corpus words x epochs
over the `train` seconds the summary line prints), the whole process's words/s (wall clock:
read, vocabulary, copies, train, write), and the vectors' quality by `streamvec eval` (WS-353
Spearman, Google analogy accuracy over the 30,000 most frequent words). Prints the medians, the
GPU/CPU ratios and the bars: training >= 50M words/s on the GPU, WS-353 within 0.02 and analogy
within 1 point of the CPU trainer. Without a CUDA device the GPU rows say why and the CPU rows
still run.

  bench/gpu_bench.py [--reps 1] [--models sgns,cbow] [--corpus ../shared/data/corpus/...]
On the lent GPU machine it runs through bench/gpu/on_device.sh (bench/README.md, "GPU").
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from train_bench import count_words  # noqa: E402  (words as `wc -w` counts them)

REPO = BENCH.parent
DATA = REPO.parent / "shared" / "data"


def find_eval(eval_dir: Path, name: str) -> Path:
    hits = sorted(eval_dir.rglob(name))
    if not hits:
        sys.exit(f"gpu_bench: {name} not found under {eval_dir}")
    return hits[0]


def train(a, model: str, device: str, vec: Path) -> dict:
    common = ["--dim", str(a.dim), "--window", str(a.window), "--negative", str(a.negative),
              "--sample", str(a.sample), "--min-count", "5", "--threads", str(a.threads),
              "--seed", "1", "--device", device, "--progress", "never"]
    if model in ("stream", "char-lstm"):  # the streaming learner (Adagrad), one pass
        state = vec.with_suffix(".state")
        shutil.rmtree(state, ignore_errors=True)  # a fresh pass, not a resumed one
        cmd = [str(a.streamvec), "train", "--input", str(a.corpus), "--output", str(vec),
               "--stream", "--state", str(state), "--vocab-capacity", str(a.vocab_capacity)]
        if model == "char-lstm":  # the character model's passes on the device, the learner not
            cmd += ["--model", "char-lstm"]
    else:
        cmd = [str(a.streamvec), "train", "--input", str(a.corpus), "--output", str(vec),
               "--model", model, "--epochs", str(a.epochs)]
    t0 = time.monotonic()
    p = subprocess.run(cmd + common, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        return {"error": f"exit {p.returncode}: {p.stderr.strip()[-400:]}"}
    line = next((ln for ln in p.stderr.splitlines() if ln.startswith("streamvec train:")), "")
    if model in ("stream", "char-lstm"):
        m = re.search(r"total ([0-9.]+) s", line)
        if not m:
            return {"error": f"no summary line: {p.stderr.strip()[-300:]}"}
        train_s = float(m.group(1))
        loss = re.search(r"loss ([0-9.]+)", line)
        r = {"wall_s": wall, "train_s": train_s, "train_wps": a.corpus_words / train_s,
             "process_wps": a.corpus_words / wall,
             "loss": float(loss.group(1)) if loss else None, "summary": line}
        # char-lstm: the seconds in the character model's passes (encoding, back-propagation).
        char = re.search(r"character model .*?\), ([0-9.]+) s", p.stderr)
        if char:
            r["char_s"] = float(char.group(1))
            r["char_summary"] = next(ln for ln in p.stderr.splitlines() if "character model" in ln)
        return r
    m = re.search(r"train ([0-9.]+) s", line)
    words = re.search(r", (\d+) words \(", line)
    loss = re.search(r"loss ([0-9.]+)", line)
    if not (m and words):
        return {"error": f"no summary line: {p.stderr.strip()[-300:]}"}
    trained = int(words.group(1)) * a.epochs
    train_s = float(m.group(1))
    return {"wall_s": wall, "train_s": train_s, "train_wps": trained / train_s,
            "process_wps": a.corpus_words * a.epochs / wall,
            "loss": float(loss.group(1)) if loss else None, "summary": line}


def evaluate(a, vec: Path) -> dict:
    cmd = [str(a.streamvec), "eval", "--vectors", str(vec), "--similarity", str(a.ws353),
           "--analogy", str(a.analogy), "--restrict", "30000", "--threads", str(a.threads),
           "--json"]
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if p.returncode != 0:
        return {"eval_error": p.stderr.strip()[-300:]}
    d = json.loads(p.stdout)
    sims = d.get("similarity") or [{}]
    return {"ws353": sims[0].get("spearman"), "analogy": (d.get("analogy") or {}).get("accuracy")}


def med(runs, key):
    vals = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streamvec", type=Path, default=REPO / "build" / "app" / "streamvec")
    ap.add_argument("--corpus", type=Path, default=DATA / "corpus" / "enwiki-text8style-100m.txt")
    ap.add_argument("--eval-dir", type=Path, default=DATA / "eval")
    ap.add_argument("--models", default="sgns,cbow",
                    help="sgns, cbow (batch, --epochs), stream (train --stream: one pass) and "
                         "char-lstm (--stream --model char-lstm: the character model's passes on "
                         "the device, the learner on the CPU)")
    ap.add_argument("--vocab-capacity", type=int, default=100000, help="stream: the learner's")
    ap.add_argument("--devices", default="cuda,cpu")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--dim", type=int, default=100)
    ap.add_argument("--window", type=int, default=5)
    ap.add_argument("--negative", type=int, default=5)
    ap.add_argument("--sample", default="1e-4")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--out", type=Path, default=BENCH / "results" / "gpu_bench.json")
    a = ap.parse_args()
    a.ws353 = find_eval(a.eval_dir, "EN-WS-353-ALL.txt")
    a.analogy = find_eval(a.eval_dir, "questions-words.txt")
    a.corpus_words = count_words(a.corpus)
    print(f"corpus {a.corpus} ({a.corpus_words} words), dim {a.dim}, window {a.window}, negative "
          f"{a.negative}, sample {a.sample}, {a.epochs} epochs, CPU threads {a.threads}", flush=True)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for model in a.models.split(","):
            for rep in range(a.reps):
                for device in a.devices.split(","):
                    vec = Path(tmp) / f"{model}-{device.replace(':', '')}.vec"
                    r = train(a, model, device, vec)
                    if "error" not in r:
                        r.update(evaluate(a, vec))
                    results.setdefault(f"{model}/{device}", []).append(r)
                    print(f"{model:5s} {device:7s} rep {rep + 1}: " +
                          (r["error"] if "error" in r else
                           f"train {r['train_wps'] / 1e6:.2f}M words/s, process "
                           f"{r['process_wps'] / 1e6:.2f}M words/s, WS-353 {r.get('ws353')}, "
                           f"analogy {r.get('analogy')}" +
                           (f"\n  {r['char_summary']}" if "char_summary" in r else "")),
                          flush=True)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(a).items()},
                                 "runs": results}, indent=1))
    print()
    print("| model | device | train words/s | process words/s | WS-353 | analogy % |")
    print("|---|---|---|---|---|---|")
    for key, runs in results.items():
        ok = [r for r in runs if "error" not in r]
        if not ok:
            print(f"| {key.split('/')[0]} | {key.split('/')[1]} | {runs[0]['error'][:80]} | | | |")
            continue
        ws, an = med(ok, "ws353"), med(ok, "analogy")
        print(f"| {key.split('/')[0]} | {key.split('/')[1]} | {med(ok, 'train_wps') / 1e6:.1f}M | "
              f"{med(ok, 'process_wps') / 1e6:.2f}M | {ws if ws is None else round(ws, 3)} | "
              f"{an if an is None else round(100 * an, 1)} |")
    for model in a.models.split(","):
        g = [r for r in results.get(f"{model}/cuda", []) if "error" not in r]
        c = [r for r in results.get(f"{model}/cpu", []) if "error" not in r]
        if not g:
            continue
        gw = med(g, "train_wps")
        line = f"{model}: GPU training {gw / 1e6:.1f}M words/s" + (
            "" if model in ("stream", "char-lstm") else f" (bar >= 50M: {'met' if gw >= 50e6 else 'NOT MET'})")
        if c:
            line += f"; GPU/CPU training {gw / med(c, 'train_wps'):.1f}x, process " \
                    f"{med(g, 'process_wps') / med(c, 'process_wps'):.1f}x"
            if None not in (med(g, "ws353"), med(c, "ws353"), med(g, "analogy"), med(c, "analogy")):
                dws = med(g, "ws353") - med(c, "ws353")
                dan = 100 * (med(g, "analogy") - med(c, "analogy"))
                line += f"; WS-353 {dws:+.3f} (bar |d| <= 0.02: " \
                        f"{'met' if abs(dws) <= 0.02 else 'NOT MET'}), analogy {dan:+.1f} points " \
                        f"(bar >= -1: {'met' if dan >= -1 else 'NOT MET'})"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
