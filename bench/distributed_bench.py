#!/usr/bin/env python3
"""Distributed training: N trainers and S parameter-node shards against one trainer (issue 20).

One pass of a corpus through the embedded broker as separate processes: `streamvec broker
--param-shards S`, S `param-node` shards, `ingest`, N `train --param-shards S` trainers (one
training thread each, partitions of <prefix>.docs assigned round robin: trainer j reads
partitions j, j+N, ...). The baseline is one trainer without a node on the same path
(`train --assign all`). Configurations are written TRAINERSxSHARDS[:MERGE] ("1x0" is the
baseline) and run alternately, rep by rep.

Reported per run: wall (the ingest's start to the last trainer's exit, less --max-idle), words/s
(the corpus's words over that wall), the ratio to the baseline of the same rep, WS-353, MEN and
Google analogy (3CosAdd, --restrict 30000) of the shards' union (`export --state` per shard) or of
the baseline trainer; the three again on the words both this run and the baseline of its rep
hold (the shards' union holds other words than one trainer, and its 30,000 most frequent are
not the baseline's, so the plain analogy scores answer different questions among different
candidates: both vectors files are cut to their common words, written in the baseline's order,
and scored by `streamvec eval`), pushed and pulled bytes per trained word (the trainers' summary
lines), the trainers' CPU seconds together and the node's (wait4; steadier than the walls on a
noisy machine), the node's push messages merged per CPU-second, push messages dropped by
the broker's ring before a shard read them (the shards' gaps), how many the trainers pushed again,
and how many were never merged (dropped, not pushed again), and the node's publications the
ring dropped before a trainer read them (the trainers' "lost"). Then a scaling model from
the measured figures (docs/distributed.md, "Scaling"). A run whose trainers read fewer of the
corpus's words than the baseline of its rep (a trainer stopped at --max-idle while the ingest was
held back by the group's lag, so the rest of its partitions was never read) is marked INCOMPLETE
and left out of the tables and the model.

  /usr/bin/python3 bench/distributed_bench.py                       # cost: 1x0 vs 2x1, 3 reps
  /usr/bin/python3 bench/distributed_bench.py --configs 1x0,4x2:scaled,4x2:average,4x2:sum \
      --reps 1                                                      # quality of the merge rules

Work files and a JSON of every run: bench/results/distributed_bench/.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def log(msg: str):
    print(f"[{dt.datetime.now():%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


class Child:
    """A process in its own session, reaped by a thread with wait4 (its CPU seconds)."""

    live: list["Child"] = []

    def __init__(self, name: str, cmd: list[str], work: Path):
        self.name = name
        self.log = work / f"{name}.log"
        with open(self.log, "wb") as out:
            self.p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True)
        self.rc = None
        self.cpu = None
        self.t_exit = None
        self.done = threading.Event()
        threading.Thread(target=self._reap, daemon=True).start()
        Child.live.append(self)

    def _reap(self):
        _, status, ru = os.wait4(self.p.pid, 0)
        self.t_exit = time.monotonic()
        self.rc = os.waitstatus_to_exitcode(status)
        self.cpu = ru.ru_utime + ru.ru_stime
        self.minflt = ru.ru_minflt
        self.done.set()

    def wait(self, timeout: float) -> bool:
        return self.done.wait(timeout)

    def stop(self, sig=signal.SIGTERM, timeout: float = 30.0):
        if not self.done.is_set():
            try:
                os.kill(self.p.pid, sig)
            except ProcessLookupError:
                pass
            if not self.wait(timeout):
                os.kill(self.p.pid, signal.SIGKILL)
                self.wait(10)

    def text(self) -> str:
        return self.log.read_text(errors="replace")


def stop_all():
    for c in reversed(Child.live):
        if not c.done.is_set():
            log(f"stopping {c.name} (pid {c.p.pid})")
            c.stop(timeout=10)


def parse_config(text: str) -> tuple[int, int, str]:
    m = re.fullmatch(r"(\d+)x(\d+)(?::(\w+))?", text)
    if not m:
        raise SystemExit(f"--configs: '{text}' is not TRAINERSxSHARDS[:MERGE]")
    n, s = int(m.group(1)), int(m.group(2))
    if n < 1 or (s == 0 and n != 1):
        raise SystemExit(f"--configs: '{text}': several trainers need shards")
    return n, s, m.group(3) or ("scaled" if s else "-")


TRAIN_RE = re.compile(r"streamvec train: kafka .*?(\d+) documents \((\d+) rejected\), (\d+) words "
                      r"\((\d+) trained\)")
PUSH_RE = re.compile(r"parameter shards: (\d+) pushes \((\d+) rows, ([0-9.]+) MB.*?"
                     r"(\d+) publications read \(([0-9.]+) MB(?:; (\d+) lost)?\)")
NODE_RE = re.compile(r"param-node shard \d+ of \d+: (\d+) messages \((\d+) rejected\), (\d+) merged"
                     r", (\d+) lost to gaps.*?offset (\d+)")
REPUSH_RE = re.compile(r"(\d+) push messages sent again")


def drain(node: Child, timeout: float):
    """Waits until the shard has merged every message of its partition (its
    streamvec_param_node_updates_lag_messages gauge reads 0 twice, 0.5 s apart)."""
    m = re.search(r"metrics (http://\S+)", node.text())
    if not m:
        return
    end, zeros = time.monotonic() + timeout, 0
    while time.monotonic() < end and zeros < 2 and not node.done.is_set():
        try:
            body = urllib.request.urlopen(m.group(1), timeout=5).read().decode()
            lag = re.search(r"^streamvec_param_node_updates_lag_messages\{[^}]*\} (\S+)", body,
                            re.M)
            zeros = zeros + 1 if lag and float(lag.group(1)) == 0 else 0
        except OSError:
            zeros = 0
        time.sleep(0.5)


def scores(sv: Path, vec: Path, a, analogy: bool = True) -> dict:
    """`streamvec eval` of a vectors file: {"ws353", "men" (Spearman), "ws353_pairs",
    "men_pairs" (pairs scored), "analogy" (accuracy, when asked)} or {"error"}."""
    cmd = [str(sv), "eval", "--json", "--vectors", str(vec), "--similarity",
           str(a.data / "eval/wordsim/EN-WS-353-ALL.txt"), "--similarity",
           str(a.data / "eval/wordsim/EN-MEN-TR-3k.txt")]
    if analogy:
        cmd += ["--analogy", str(a.data / "eval/analogy/questions-words.txt")]
    ev = subprocess.run(cmd, capture_output=True, text=True)
    out = {}
    try:
        j = json.loads(ev.stdout)
        for s in j.get("similarity", []):
            key = "ws353" if "WS-353" in s.get("name", s.get("file", "")) else "men"
            out[key] = s["spearman"]
            out[key + "_pairs"] = s["pairs"]
        if analogy:
            out["analogy"] = j["analogy"]["accuracy"]
            out["analogy_pairs"] = j["analogy"]["total"]
    except (ValueError, KeyError, TypeError):
        out["error"] = (ev.stdout + ev.stderr)[-300:]
    return out


def vector_words(path: Path) -> set:
    with path.open(encoding="utf-8") as f:
        f.readline()
        return {line.split(" ", 1)[0] for line in f}


def common_scores(sv: Path, run_vec: Path, base_vec: Path, work: Path, a) -> dict:
    """WS-353, MEN and Google analogy of a run and of the baseline on the words both hold: each
    vectors file is cut to those words, written in the baseline's order (most frequent first, so
    that --restrict 30000 keeps the same words on both sides: the same analogy questions, the
    same candidate answers) and scored by `streamvec eval`. {"ws353": {"pairs", "run", "base"},
    "men": {...}, "analogy": {"pairs" (questions scored), "run", "base"}}."""
    with base_vec.open(encoding="utf-8") as f:
        f.readline()
        base_order = [line.split(" ", 1)[0] for line in f]
    run_words = vector_words(run_vec)
    both = [w for w in base_order if w in run_words]
    out = {"ws353": {}, "men": {}, "analogy": {}}
    for side, src in (("run", run_vec), ("base", base_vec)):
        lines = {}
        with src.open(encoding="utf-8") as f:
            dim = f.readline().split()[1]
            for line in f:
                lines.setdefault(line.split(" ", 1)[0], line)
        cut = work / f"common-{side}.txt"
        with cut.open("w", encoding="utf-8") as g:
            g.write(f"{len(both)} {dim}\n")
            g.writelines(lines[w] for w in both)
        sc = scores(sv, cut, a)
        cut.unlink()
        for key in out:
            out[key][side] = sc.get(key)
            out[key]["pairs"] = sc.get(key + "_pairs")
    return out


def one_pass(sv: Path, work: Path, tag: str, n: int, shards: int, merge: str, a,
             base_vec: Path | None = None) -> dict:
    """One run. The baseline's vectors are kept as base_vec (for the runs of its rep to be
    compared with, common_scores); a run with shards is scored against base_vec when given."""
    w = work / tag
    shutil.rmtree(w, ignore_errors=True)
    w.mkdir(parents=True)
    row = {"config": tag.rsplit("-", 1)[0], "trainers": n, "shards": shards, "merge": merge}
    bs = w / "bs.txt"
    broker = Child("broker", [str(sv), "broker", "--bootstrap-file", str(bs), "--partitions",
                              str(a.partitions)] + (["--param-shards", str(shards)] if shards else []),
                   w)
    try:
        end = time.monotonic() + 30
        while not (bs.exists() and bs.read_text().strip()):
            if time.monotonic() > end or broker.done.is_set():
                raise RuntimeError("broker wrote no bootstrap file: " + broker.text()[-300:])
            time.sleep(0.05)
        nodes = [Child(f"node{i}", [str(sv), "param-node", "--shard", str(i), "--shards",
                                    str(shards), "--state", str(w / f"n{i}"), "--bootstrap-file",
                                    str(bs), "--merge", merge, "--metrics", "127.0.0.1:0"] + a.node_arg, w)
                 for i in range(shards)]
        t0 = time.monotonic()
        ingest = Child("ingest", [str(sv), "ingest", "--from", str(a.corpus), "--bootstrap-file",
                                  str(bs)], w)
        trainers = []
        for j in range(n):
            parts = ",".join(str(p) for p in range(j, a.partitions, n))
            cmd = [str(sv), "train", "--bootstrap-file", str(bs), "--state", str(w / f"t{j}"),
                   "--assign", "all" if n == 1 else parts, "--vocab-capacity",
                   str(a.vocab_capacity), "--threads", "1", "--max-idle", f"{a.max_idle:g}"]
            cmd += a.all_train_arg
            if shards:
                cmd += ["--param-shards", str(shards), "--trainer-id", str(j + 1),
                        "--delta-precision", a.delta_precision] + a.train_arg
            trainers.append(Child(f"train{j}", cmd, w))
        for t in trainers:
            if not t.wait(a.timeout):
                raise RuntimeError(f"{t.name} did not finish in {a.timeout} s")
        row["wall_s"] = max(t.t_exit for t in trainers) - t0 - a.max_idle
        ingest.wait(30)
        for nd in nodes:  # drained: every push in its partition merged, then stopped
            drain(nd, 120)
            nd.stop(signal.SIGINT, 60)
        broker_cpu = None
        try:
            st = (Path("/proc") / str(broker.p.pid) / "stat").read_text().rsplit(")", 1)[1].split()
            broker_cpu = (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            pass
        broker.stop()
        words = trained = push_mb = pull_mb = 0.0
        repushed = pulls_lost = 0
        for t in trainers:
            text = t.text()
            m = TRAIN_RE.search(text)
            if t.rc != 0 or not m:
                raise RuntimeError(f"{t.name} rc {t.rc}: {text[-400:]}")
            words += int(m.group(3))
            trained += int(m.group(4))
            rp = REPUSH_RE.search(text)
            if rp:
                repushed += int(rp.group(1))
            p = PUSH_RE.search(text)
            if p:
                push_mb += float(p.group(3))
                pull_mb += float(p.group(5))
                pulls_lost += int(p.group(6) or 0)
        row.update(words=int(words), trained=int(trained), words_per_s=words / row["wall_s"],
                   trainer_cpu_s=sum(t.cpu for t in trainers), ingest_cpu_s=ingest.cpu,
                   trainer_minflt=sum(t.minflt for t in trainers),
                   broker_cpu_s=broker_cpu)
        if shards:
            merged = messages = lost = 0
            for nd in nodes:
                m = NODE_RE.search(nd.text())
                if not m:
                    raise RuntimeError(f"{nd.name} rc {nd.rc}: {nd.text()[-400:]}")
                messages += int(m.group(1))
                merged += int(m.group(3))
                lost += int(m.group(4))
            node_cpu = sum(nd.cpu for nd in nodes)
            row["node_minflt"] = sum(nd.minflt for nd in nodes)
            row.update(push_bytes_per_word=push_mb * 1e6 / trained,
                       pull_bytes_per_word=pull_mb * 1e6 / trained, push_mb=push_mb,
                       node_messages=messages, node_merged=merged, lost_messages=lost,
                       repushed_messages=repushed, never_merged=max(0, lost - repushed),
                       pulls_lost=pulls_lost,
                       node_cpu_s=node_cpu, merges_per_core_s=merged / max(node_cpu, 1e-9),
                       push_mb_per_node_core_s=push_mb / max(node_cpu, 1e-9))
            ex = subprocess.run([str(sv), "export"] + sum(
                (["--state", str(w / f"n{i}")] for i in range(shards)), []) +
                ["--output", str(w / "vectors.txt")], capture_output=True, text=True)
        else:
            ex = subprocess.run([str(sv), "export", "--state", str(w / "t0"), "--output",
                                 str(w / "vectors.txt")], capture_output=True, text=True)
        if ex.returncode != 0:
            raise RuntimeError("export: " + ex.stderr[-300:])
        row.update(scores(sv, w / "vectors.txt", a))
        if shards and base_vec and base_vec.exists():
            row["common"] = common_scores(sv, w / "vectors.txt", base_vec, w, a)
        elif not shards and base_vec:
            shutil.copyfile(w / "vectors.txt", base_vec)
        if not a.keep:
            for d in w.iterdir():
                if d.is_dir():
                    shutil.rmtree(d, ignore_errors=True)
            (w / "vectors.txt").unlink(missing_ok=True)
        return row
    finally:
        stop_all()
        Child.live.clear()


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path,
                    default=ROOT.parent / "shared/data/corpus/enwiki-text8style-100m.txt")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared/data",
                    help="shared data folder (eval sets)")
    ap.add_argument("--configs", default="1x0,2x1:scaled",
                    help="comma-separated TRAINERSxSHARDS[:MERGE]; 1x0 is the baseline")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=8, help="partitions of <prefix>.docs")
    ap.add_argument("--vocab-capacity", type=int, default=50000)
    ap.add_argument("--delta-precision", default="fp16")
    ap.add_argument("--max-idle", type=float, default=None,
                    help="seconds without a document before a trainer stops (default 3, 10 when "
                         "a configuration has more than four trainers: a trainer of eight can "
                         "wait that long while the ingest waits for the others)")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--train-arg", action="append", default=[],
                    help="extra argument for the pushing trainers (repeat; --train-arg=--x=y)")
    ap.add_argument("--all-train-arg", action="append", default=[],
                    help="extra argument for every trainer, the baseline's too: a training "
                         "setting both sides share (repeat; --all-train-arg=--dim=300)")
    ap.add_argument("--node-arg", action="append", default=[],
                    help="extra argument for param-node (repeat)")
    ap.add_argument("--keep", action="store_true", help="keep states and vectors")
    ap.add_argument("--sv", type=Path, default=ROOT / "build/app/streamvec")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/distributed_bench")
    a = ap.parse_args()
    configs = [parse_config(c) for c in a.configs.split(",")]
    if a.max_idle is None:
        a.max_idle = 10.0 if max(n for n, _, _ in configs) > 4 else 3.0
    a.out.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: (stop_all(), sys.exit(1)))
    rows = []
    for rep in range(a.reps):  # a killed earlier run's; each rep's baseline writes its own
        (a.out / f"baseline-{rep}.txt").unlink(missing_ok=True)
    load0 = os.getloadavg()[0]
    try:
        for rep in range(a.reps):
            for n, s, merge in configs:
                tag = f"{n}x{s}{'-' + merge if s else ''}-{rep}"
                log(f"rep {rep}: {n} trainer(s), {s} shard(s), merge {merge}")
                try:
                    row = one_pass(a.sv, a.out, tag, n, s, merge, a,
                                   base_vec=a.out / f"baseline-{rep}.txt")
                except RuntimeError as e:
                    row = {"config": tag.rsplit("-", 1)[0], "failed": str(e)}
                    log(f"FAILED: {e}")
                row["rep"] = rep
                b = next((r for r in rows if r.get("rep") == rep and r.get("trainers") == 1
                          and r.get("shards") == 0 and "words" in r), None)
                if b and "words" in row and row["words"] < b["words"]:
                    # A trainer stopped at --max-idle while the ingest was held back by the
                    # group's lag (every trainer's commits count): its later documents were
                    # never trained. Its words/s and scores are not comparable.
                    row["incomplete"] = f"{row['words']} of {b['words']} words trained"
                    log(f"INCOMPLETE: {row['incomplete']} (raise --max-idle)")
                rows.append(row)
                log(json.dumps({k: v for k, v in row.items() if not isinstance(v, (float, dict))
                                or k in ("wall_s", "ws353")}))
    finally:
        stop_all()
        for rep in range(a.reps):
            (a.out / f"baseline-{rep}.txt").unlink(missing_ok=True)
    (a.out / "results.json").write_text(json.dumps(rows, indent=1))
    base = {r["rep"]: r for r in rows if r.get("trainers") == 1 and r.get("shards") == 0}
    print(f"# distributed_bench: {a.corpus.name}, configs {a.configs}, {a.reps} rep(s), "
          f"load {load0:.1f} -> {os.getloadavg()[0]:.1f}")
    print(f"# command: /usr/bin/python3 bench/distributed_bench.py --configs {a.configs} "
          f"--reps {a.reps} --max-idle {a.max_idle:g}"
          + "".join(f" --all-train-arg={x}" for x in a.all_train_arg)
          + "".join(f" --train-arg={x}" for x in a.train_arg)
          + "".join(f" --node-arg={x}" for x in a.node_arg))
    print("| config | rep | wall s | words/s | x baseline | WS-353 | MEN | analogy | push B/word "
          "| pull B/word | trainers CPU s | node CPU s | merges/core-s "
          "| dropped / pushed again / never merged | publications lost |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "failed" in r:
            print(f"| {r['config']} | {r['rep']} | FAILED: {r['failed'][:80]} |")
            continue
        if "incomplete" in r:
            print(f"| {r['config']} | {r['rep']} | INCOMPLETE: {r['incomplete']} |")
            continue
        b = base.get(r["rep"])
        ratio = r["words_per_s"] / b["words_per_s"] if b else None
        print(f"| {r['config']} | {r['rep']} | {r['wall_s']:.1f} | {r['words_per_s'] / 1e6:.2f}M "
              f"| {fmt(ratio, '.3f')} | {fmt(r.get('ws353'), '.3f')} | {fmt(r.get('men'), '.3f')} "
              f"| {fmt(r.get('analogy'), '.3f')} | {fmt(r.get('push_bytes_per_word'), '.1f')} "
              f"| {fmt(r.get('pull_bytes_per_word'), '.1f')} "
              f"| {fmt(r.get('trainer_cpu_s'), '.1f')} | {fmt(r.get('node_cpu_s'), '.1f')} "
              f"| {fmt(r.get('merges_per_core_s'), '.1f')} | {r.get('lost_messages', '-')} / "
              f"{r.get('repushed_messages', '-')} / {r.get('never_merged', '-')} "
              f"| {r.get('pulls_lost', '-')} |")
    common = [r for r in rows if r.get("common") and r.get("shards") and "incomplete" not in r]
    if common:
        print("\nWS-353, MEN and analogy on the words both the run and the baseline of its rep "
              "hold (analogy: the baseline's 30,000 most frequent of them, on both sides):")
        print("| config | rep | WS-353 pairs | WS-353 | baseline | difference | MEN pairs | MEN "
              "| baseline | difference | analogy questions | analogy | baseline | difference |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in common:
            cells = []
            for key in ("ws353", "men", "analogy"):
                c = r["common"][key]
                diff = (c["run"] - c["base"]) if c["run"] is not None and c["base"] is not None \
                    else None
                cells.append(f"{fmt(c['pairs'], 'd')} | {fmt(c['run'], '.3f')} "
                             f"| {fmt(c['base'], '.3f')} | {fmt(diff, '+.3f')}")
            print(f"| {r['config']} | {r['rep']} | " + " | ".join(cells) + " |")
    # The scaling model (docs/distributed.md): a shard core merges C push bytes a second; a
    # trainer training w words/s pushes b bytes a trained word; a shard serves C / (b w)
    # trainers before it saturates.
    dist = [r for r in rows if r.get("shards") and "failed" not in r and "incomplete" not in r]
    if dist and base:
        C = statistics.median(r["push_mb_per_node_core_s"] for r in dist) * 1e6
        b = statistics.median(r["push_bytes_per_word"] for r in dist)
        wb = statistics.median(r["words_per_s"] for r in base.values())
        per_shard = C / (b * wb)
        print(f"\nscaling model: a node core merges {C / 1e6:.1f} MB of pushes a CPU-second; a "
              f"trainer at the baseline's {wb / 1e6:.2f}M words/s pushes {b:.1f} B a trained "
              f"word = {b * wb / 1e6:.1f} MB/s; one shard core keeps up with {per_shard:.2f} "
              "trainer(s)")
        for n in (8, 16, 64):
            print(f"  {n} trainers: {math.ceil(n / per_shard)} shard cores, "
                  f"{n * b * wb / 1e6:.0f} MB/s of pushes on .updates")
    return 0 if any("failed" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
