#!/usr/bin/env python3
"""Fault campaign: kill -9 of one process kind at random moments of a run over a corpus, counting
documents end to end.

For each kind, --kills rounds; each round starts afresh (broker, state), SIGKILLs the process of
that kind once at a moment drawn uniformly from [--min-at, --max-at] seconds after the pipeline's
start, restarts it on the same state (or offsets file), lets the pipeline drain and reads the
final state's document count (`serve --state`, /v1/snapshots). Every document of the corpus must
be trained at least once (final >= produced: none lost); duplicates are final - produced.

  ingest   broker, `train --assign all`, `ingest --offsets-file F` (killed, restarted on F)
  train    broker, `train --assign all` (killed, restarted on its --state), `ingest`
  run      `streamvec run --data DIR --no-crawl --no-follow` (killed, restarted on its --state)
  serve    broker, trainer, ingest and `serve --state` (killed, restarted): the restarted server
           must serve the trainer's newest snapshot once the trainer is done
  param-node  broker, `param-node --shard 0 --shards 1` (killed, restarted on its --state), a
           trainer with `--param-shards 1`, `ingest`: besides the trainer's documents, the words
           the node merged (its words_seen) against those of a first round without a kill (one
           partition of .docs, so the pushed counts are the same in every round): fewer is a push
           the node never merged
  crawl    broker, trainer, `crawl --once --state S` over --feeds local RSS files of
           --feed-items items each (made from the corpus' first lines), killed and restarted on
           S; the documents are the feeds' items

A trainer's micro-batch is about 700k words (16 documents of the 100M corpus); the issue's bar
is at most one micro-batch of duplicates per crash. Uses pipeline_bench.py's process helpers.

  /usr/bin/python3 bench/faults.py --kinds ingest,train,run,serve --kills 20 \\
      --corpus ../shared/data/corpus/enwiki-text8style-100m.txt

Output: bench/results/faults-<stamp>.{txt,json}, one line per round and a summary per kind.
"""
import argparse
import datetime as dt
import json
import random
import shutil
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pipeline_bench as pb  # noqa: E402

KINDS = ("ingest", "train", "run", "serve", "crawl", "param-node")
DOCS_PER_MICRO_BATCH = 16  # the 100M corpus: 382 documents of 44k words, micro-batch ~700k words


def produced_documents(text: str) -> int | None:
    m = pb.INGEST_RE.search(text)
    return int(m.group(1)) if m else None


def trainer(sv, work, name, bs, state, a, extra=()):
    return pb.Proc(name, [str(sv), "train", "--bootstrap-file", str(bs), "--state", str(state),
                          "--max-idle", f"{a.max_idle:g}", "--assign", "all",
                          "--vocab-capacity", str(a.vocab_capacity), "--threads", "2",
                          *extra], work)


def param_node(sv, work, name, bs, state, a):
    return pb.Proc(name, [str(sv), "param-node", "--shard", "0", "--shards", "1", "--state",
                          str(state), "--bootstrap-file", str(bs), "--max-idle",
                          f"{a.node_max_idle:g}", "--vocab-capacity",
                          str(a.node_vocab_capacity)],
                   work)


def ingest(sv, work, name, bs, corpus, offsets: Path | None):
    return pb.Proc(name, [str(sv), "ingest", "--from", str(corpus), "--bootstrap-file", str(bs)]
                   + (["--offsets-file", str(offsets)] if offsets else []), work)


def broker(sv, work, tag, a, partitions=None):
    ns = argparse.Namespace(partitions=partitions or a.partitions)
    return pb.start_broker(sv, work, tag, ns, hold_group=False)


def kill_at(victim, t0: float, at: float) -> bool:
    """SIGKILLs `victim` `at` s after t0 (at once if it exited); True if it was still running."""
    while time.monotonic() - t0 < at and victim.poll() is None:
        time.sleep(0.01)
    running = victim.poll() is None
    victim.signal(signal.SIGKILL)
    victim.wait(10)
    return running


def final_documents(sv, work, tag, state: Path, a, row: dict, remove: list[Path]) -> dict:
    """Stops what is left, reads the state's final document count into row (serve --state), and
    removes the state directories unless --keep-state."""
    pb.stop_all()
    row["final_documents"] = pb.state_info(sv, state, work, f"{tag}-read").get("documents")
    if not a.keep_state:
        for d in remove:
            shutil.rmtree(d, ignore_errors=True)
    return row


def wait_all(procs, timeout) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if all(p.poll() is not None for p in procs):
            return True
        time.sleep(0.05)
    return False


def round_kafka(kind, sv, work, r, a, at) -> dict:
    """ingest, train or serve killed once at `at` s."""
    tag = f"{kind}-{r}"
    state = work / f"{tag}.state"
    offsets = work / f"{tag}.offsets.json"
    shutil.rmtree(state, ignore_errors=True)
    offsets.unlink(missing_ok=True)
    row = {"kind": kind, "round": r, "kill_at_s": round(at, 2)}
    b, bs = broker(sv, work, tag, a)
    try:
        t = trainer(sv, work, f"{tag}-train", bs, state, a)
        i = ingest(sv, work, f"{tag}-ingest", bs, a.corpus, offsets if kind == "ingest" else None)
        s = None
        if kind == "serve":
            s = pb.Proc(f"{tag}-serve", [str(sv), "serve", "--state", str(state), "--http",
                                         "127.0.0.1:0"], work)
        victim = {"ingest": i, "train": t, "serve": s}[kind]
        row["victim_running_at_kill"] = kill_at(victim, time.monotonic(), at)
        if kind == "ingest":
            try:
                row["offsets_at_kill"] = json.loads(offsets.read_text())["positions"]
            except (OSError, ValueError, KeyError):
                row["offsets_at_kill"] = None
            i2 = ingest(sv, work, f"{tag}-ingest2", bs, a.corpus, offsets)
            procs = [t, i2]
        elif kind == "train":
            t2 = trainer(sv, work, f"{tag}-train2", bs, state, a)
            procs = [t2, i]
        else:
            s2 = pb.Proc(f"{tag}-serve2", [str(sv), "serve", "--state", str(state), "--http",
                                           "127.0.0.1:0"], work)
            procs = [t, i]
        if not wait_all(procs, a.timeout):
            row["error"] = f"not done within {a.timeout:.0f} s"
        produced = [produced_documents(p.text()) for p in ([i] if kind != "ingest" else [i2])]
        row["produced_by_last_ingest"] = produced[0]
        if kind == "serve":
            m = s2.wait_for(r"serving (http://127\.0\.0\.1:\d+)", 60)
            served = None
            if m:
                end = time.monotonic() + 30
                while time.monotonic() < end:
                    snap = pb.newest(pb.snapshots(m.group(1)))
                    if snap and snap.get("documents", 0) >= a.documents:
                        served = snap
                        break
                    time.sleep(0.25)
            row["restarted_serve_documents"] = served.get("documents") if served else None
            s2.stop(10)
    finally:
        b.stop(10)
    return final_documents(sv, work, tag, state, a, row, [state])


def round_param_node(sv, work, r, a, at) -> dict:
    """The parameter node killed once at `at` s and restarted on its state, while a trainer with
    --param-shards 1 trains the corpus that ingest sends; at None: no kill (the baseline)."""
    tag = f"param-node-{r}"
    state = work / f"{tag}.state"
    node_state = work / f"{tag}.node"
    for d in (state, node_state):
        shutil.rmtree(d, ignore_errors=True)
    row = {"kind": "param-node", "round": r, "kill_at_s": None if at is None else round(at, 2)}
    # One partition of .docs: the trainer reads the documents in one order, so its pushed counts
    # are the same in every round (with several, the order of its fetches changes which words its
    # bounded vocabulary admits, by a few hundred words in 17M).
    b, bs = broker(sv, work, tag, a, partitions=1)
    try:
        n = param_node(sv, work, f"{tag}-node", bs, node_state, a)
        t = trainer(sv, work, f"{tag}-train", bs, state, a, ["--param-shards", "1"])
        i = ingest(sv, work, f"{tag}-ingest", bs, a.corpus, None)
        if at is not None:
            row["victim_running_at_kill"] = kill_at(n, time.monotonic(), at)
            n = param_node(sv, work, f"{tag}-node2", bs, node_state, a)
        if not wait_all([t, i, n], a.timeout):
            row["error"] = f"not done within {a.timeout:.0f} s"
        row["produced_by_last_ingest"] = produced_documents(i.text())
    finally:
        b.stop(10)
    pb.stop_all()
    trained = pb.state_info(sv, state, work, f"{tag}-read-train")
    merged = pb.state_info(sv, node_state, work, f"{tag}-read-node")
    row["trainer_words"] = trained.get("words_seen")
    row["node_words"] = merged.get("words_seen")
    row["final_documents"] = trained.get("documents")
    if not a.keep_state:
        for d in (state, node_state):
            shutil.rmtree(d, ignore_errors=True)
    return row


def make_feeds(corpus: Path, folder: Path, feeds: int, items: int) -> Path:
    """`feeds` RSS files of `items` items each, their descriptions taken from the corpus' lines
    (cut to about 2 KB at a space), and a feeds file listing them. Returns the feeds file."""
    from xml.sax.saxutils import escape
    folder.mkdir(parents=True, exist_ok=True)
    texts = []
    with open(corpus, "rb") as f:
        while len(texts) < feeds * items:
            line = f.readline()
            if not line:
                f.seek(0)
                continue
            text = line.decode("utf-8", "replace").strip()
            # An index into the line, not slices of its rest: a one-line corpus (text8-style,
            # 100 MB) would be copied once per item.
            start = 0
            while len(text) - start > 200 and len(texts) < feeds * items:
                cut = text.rfind(" ", start, start + 2000) if len(text) - start > 2000 else -1
                end = cut if cut > start else min(len(text), start + 2000)
                texts.append(text[start:end].strip())
                start = end
    names = []
    for i in range(feeds):
        body = "".join(
            f"<item><title>item {i}-{j}</title><link>https://example.org/{i}/{j}</link>"
            f"<guid>urn:streamvec-faults:{i}:{j}</guid>"
            f"<description>{escape(texts[i * items + j])}</description></item>\n"
            for j in range(items))
        name = f"feed-{i}.rss"
        (folder / name).write_text(
            '<?xml version="1.0" encoding="utf-8"?>\n<rss version="2.0"><channel>'
            f"<title>feed {i}</title><link>https://example.org/{i}</link>"
            f"<description>fault campaign feed</description>\n{body}</channel></rss>\n")
        names.append(name)
    listing = folder / "feeds.txt"
    listing.write_text("\n".join(names) + "\n")
    return listing


def round_crawl(sv, work, r, a, at, feeds_file: Path) -> dict:
    tag = f"crawl-{r}"
    state = work / f"{tag}.state"
    crawl_state = work / f"{tag}.crawler"
    for d in (state, crawl_state):
        shutil.rmtree(d, ignore_errors=True)
    row = {"kind": "crawl", "round": r, "kill_at_s": round(at, 2)}
    b, bs = broker(sv, work, tag, a)
    try:
        t = trainer(sv, work, f"{tag}-train", bs, state, a)
        cmd = [str(sv), "crawl", "--feeds", str(feeds_file), "--once", "--state",
               str(crawl_state), "--allow-file-dir", str(feeds_file.parent), "--host-delay",
               "0", "--bootstrap-file", str(bs)]
        c = pb.Proc(f"{tag}-crawl", cmd, work)
        row["victim_running_at_kill"] = kill_at(c, time.monotonic(), at)
        c2 = pb.Proc(f"{tag}-crawl2", cmd, work)
        if not wait_all([t, c2], a.timeout):
            row["error"] = f"not done within {a.timeout:.0f} s"
        row["crawl2_rc"] = c2.poll()
    finally:
        b.stop(10)
    return final_documents(sv, work, tag, state, a, row, [state, crawl_state])


def round_run(sv, work, r, a, at) -> dict:
    tag = f"run-{r}"
    state = work / f"{tag}.state"
    shutil.rmtree(state, ignore_errors=True)
    data = work / "run-data"
    row = {"kind": "run", "round": r, "kill_at_s": round(at, 2)}
    cmd = [str(sv), "run", "--data", str(data), "--no-crawl", "--no-follow", "--max-idle",
           f"{a.run_max_idle:g}", "--state", str(state), "--http", "127.0.0.1:0",
           "--vocab-capacity", str(a.vocab_capacity), "--threads", "2"]
    p1 = pb.Proc(f"{tag}-1", cmd, work)
    row["victim_running_at_kill"] = kill_at(p1, time.monotonic(), at)
    p2 = pb.Proc(f"{tag}-2", cmd, work)
    if p2.wait(a.timeout) is None:
        row["error"] = f"not done within {a.timeout:.0f} s"
        p2.stop(30)
    return final_documents(sv, work, tag, state, a, row, [state])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--kills", type=int, default=20, help="rounds (one SIGKILL each) per kind")
    p.add_argument("--corpus", type=Path,
                   default=pb.REPO.parent / "shared/data/corpus/enwiki-text8style-100m.txt")
    p.add_argument("--documents", type=int, default=382,
                   help="documents ingest makes of the corpus (382 for the 100M corpus)")
    p.add_argument("--min-at", type=float, default=0.3)
    p.add_argument("--max-at", type=float, default=6.0)
    p.add_argument("--max-idle", type=float, default=5.0, help="--max-idle of the trainers")
    p.add_argument("--run-max-idle", type=float, default=3.0)
    p.add_argument("--node-max-idle", type=float, default=8.0,
                   help="--max-idle of the parameter node (longer than the trainers')")
    p.add_argument("--node-vocab-capacity", type=int, default=400000,
                   help="the parameter node's: above the corpus' distinct words (253k in the "
                        "100M corpus), so that it drops no count and merges exactly the words "
                        "the trainer counted")
    p.add_argument("--partitions", type=int, default=16)
    p.add_argument("--vocab-capacity", type=int, default=50000)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--feeds", type=int, default=100, help="crawl: local RSS files")
    p.add_argument("--feed-items", type=int, default=30, help="crawl: items per file")
    p.add_argument("--crawl-max-at", type=float, default=1.5,
                   help="crawl: kill moments uniform in [0.1, this] s")
    p.add_argument("--streamvec", type=Path, default=pb.REPO / "build" / "app" / "streamvec")
    p.add_argument("--results", type=Path, default=pb.BENCH_DIR / "results")
    p.add_argument("--keep-state", action="store_true")
    a = p.parse_args()
    kinds = [k.strip() for k in a.kinds.split(",") if k.strip()]
    if not set(kinds) <= set(KINDS):
        p.error(f"--kinds: choose from {','.join(KINDS)}")
    if not a.corpus.is_file():
        p.error(f"corpus {a.corpus} not found")
    sv = a.streamvec.resolve()
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    work = (a.results / "runs" / f"faults-{stamp}").resolve()
    work.mkdir(parents=True, exist_ok=True)
    if "run" in kinds:
        (work / "run-data").mkdir(exist_ok=True)
        (work / "run-data" / a.corpus.name).symlink_to(a.corpus.resolve())
    feeds_file = None
    if "crawl" in kinds:
        feeds_file = make_feeds(a.corpus, work / "feeds", a.feeds, a.feed_items)
    pb.log(f"kinds {','.join(kinds)}, {a.kills} kills each, seed {seed}; runs in {work}")
    rows = []
    node_baseline = None
    if "param-node" in kinds:
        base = round_param_node(sv, work, 0, a, None)
        node_baseline = base.get("node_words")
        pb.log(f"param-node baseline (no kill): the node merged {node_baseline} words, the "
               f"trainer {base.get('trainer_words')} (it pushes admitted words' counts)")
    for kind in kinds:
        for r in range(1, a.kills + 1):
            at = rng.uniform(0.1, a.crawl_max_at) if kind == "crawl" else \
                rng.uniform(a.min_at, a.max_at)
            expected = a.feeds * a.feed_items if kind == "crawl" else a.documents
            try:
                if kind == "run":
                    row = round_run(sv, work, r, a, at)
                elif kind == "crawl":
                    row = round_crawl(sv, work, r, a, at, feeds_file)
                elif kind == "param-node":
                    row = round_param_node(sv, work, r, a, at)
                else:
                    row = round_kafka(kind, sv, work, r, a, at)
            except RuntimeError as e:
                row = {"kind": kind, "round": r, "error": str(e)}
            final = row.get("final_documents")
            row["expected_documents"] = expected
            if kind == "param-node" and None not in (node_baseline, row.get("node_words")):
                row["words_lost"] = max(0, node_baseline - row["node_words"])
                row["words_merged_twice"] = max(0, row["node_words"] - node_baseline)
            if final is not None:
                row["lost"] = max(0, expected - final)
                row["duplicates"] = max(0, final - expected)
            pb.log(f"{kind} {r}: killed at {row.get('kill_at_s')} s "
                   f"(running: {row.get('victim_running_at_kill')}), final documents {final}, "
                   f"duplicates {row.get('duplicates')}, lost {row.get('lost')}"
                   + (f", restarted serve saw {row.get('restarted_serve_documents')}"
                      if kind == "serve" else "")
                   + (f", node merged {row.get('node_words')} words (baseline "
                      f"{node_baseline})" if kind == "param-node" else "")
                   + (f"  ERROR {row['error']}" if row.get("error") else ""))
            rows.append(row)
    lines = [f"streamvec fault campaign {stamp}: corpus {a.corpus} ({a.documents} documents), "
             f"seed {seed}, kill moments uniform in [{a.min_at:g}, {a.max_at:g}] s",
             f"command: /usr/bin/python3 bench/faults.py --kinds {','.join(kinds)} "
             f"--kills {a.kills} --min-at {a.min_at:g} --max-at {a.max_at:g} "
             f"--corpus {a.corpus} --seed {seed}"]
    for kind in kinds:
        rs = [r for r in rows if r["kind"] == kind]
        ok = [r for r in rs if r.get("final_documents") is not None and not r.get("error")]
        lost = sum(r.get("lost", 0) for r in ok)
        dups = [r.get("duplicates", 0) for r in ok]
        over = sum(1 for d in dups if d > DOCS_PER_MICRO_BATCH)
        extra = ""
        if kind == "serve":
            seen = sum(1 for r in rs if (r.get("restarted_serve_documents") or 0) >= a.documents)
            extra = f"; restarted serve served the final snapshot in {seen}/{len(rs)}"
        if kind == "param-node":
            words_lost = sum(r.get("words_lost", 0) for r in ok)
            twice = [r.get("words_merged_twice", 0) for r in ok]
            extra = (f"; words the node never merged {words_lost}, merged twice per kill max "
                     f"{max(twice) if twice else '-'}")
        lines.append(f"  {kind:<7} kills {len(rs)}, completed {len(ok)}, documents lost {lost}, "
                     f"duplicates per kill max {max(dups) if dups else '-'} median "
                     f"{sorted(dups)[len(dups) // 2] if dups else '-'}, over one micro-batch "
                     f"({DOCS_PER_MICRO_BATCH} docs) {over}{extra}")
    text = "\n".join(lines)
    print(text)
    (a.results / f"faults-{stamp}.txt").write_text(text + "\n")
    (a.results / f"faults-{stamp}.json").write_text(json.dumps(
        {"seed": seed, "args": {k: str(v) for k, v in vars(a).items()}, "rows": rows}, indent=1))
    pb.log(f"saved {a.results}/faults-{stamp}.txt and .json")


if __name__ == "__main__":
    main()
