#!/usr/bin/python3
"""Words outside the table: streamvec's character model against fastText's subword vectors.

One pass over the same corpus, in the same run:
  - streamvec `train --stream --char-distill` (or `--model char-lstm`: --char-model), then the vectors of every word of the word-pair
    files from `streamvec vectors --state S --table-top K --json` (the K most frequent words from
    the table, every other word from the character model) and with `--table-top 0` (the whole
    table; words outside it from the character model);
  - fastText `skipgram` with its default subwords (minn 3, maxn 6), then the vectors of the same
    words from `fasttext print-word-vectors` (its normal answer: a vocabulary word's vector plus
    its n-grams, any other word from its n-grams), and a "K from the table" variant mirroring
    streamvec's: the K most frequent words of fastText's vocabulary as print-word-vectors gives
    them, every other word from its n-grams only (computed from the model's .bin, checked against
    print-word-vectors on the words it has no row for).
Every pair of each file is scored (words lower-cased, as the corpus is), split into pairs of two
table words and pairs with a word from the character model / n-grams, by the same code for every
system: each system's vectors are written to a word2vec text file and scored with
`streamvec eval --similarity` (Spearman's rho, equal to gensim's). A rare-word set (e.g. the
Stanford RW set) given with --similarity is scored the same way.

Run with Debian's /usr/bin/python3 (numpy). See bench/README.md.
"""

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
DATA = REPO.parent / "shared" / "data"  # ../shared/data from the repository root
DEFAULT_CORPUS = DATA / "corpus" / "enwiki-text8style-100m.txt"
DEFAULT_SETS = [DATA / "eval" / "wordsim" / "EN-WS-353-ALL.txt",
                DATA / "eval" / "wordsim" / "EN-MEN-TR-3k.txt"]


def log(msg: str):
    print(f"[oov_bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def read_pairs(path: Path) -> list[tuple[str, str, float]]:
    """(word1, word2, score) of a tab-separated pair file, words lower-cased."""
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        f = line.split("\t")
        if len(f) < 3:
            continue
        try:
            pairs.append((f[0].lower(), f[1].lower(), float(f[2])))
        except ValueError:
            continue
    return pairs


def timed(cmd: list[str], log_path: Path, stdin=None, timeout=None) -> float:
    """Runs cmd with stdout+stderr into log_path; its wall seconds. Raises on failure."""
    log(" ".join(map(str, cmd)))
    t0 = time.monotonic()
    with open(log_path, "w") as out:
        p = subprocess.run(list(map(str, cmd)), stdout=out, stderr=subprocess.STDOUT, stdin=stdin,
                           timeout=timeout)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[0]} {cmd[1]} failed ({p.returncode}); see {log_path}")
    return wall


# ---------------------------------------------------------------------------------------------
# streamvec

def streamvec_vectors(sv: Path, state: Path, words: list[str], top: int):
    """{word: (vector, from_table)} from `streamvec vectors --json`; missing words left out."""
    p = subprocess.run([str(sv), "vectors", "--state", str(state), "--table-top", str(top),
                        "--json"], input="\n".join(words) + "\n", capture_output=True, text=True)
    if p.returncode not in (0, 1):
        raise RuntimeError(f"streamvec vectors failed ({p.returncode}): {p.stderr}")
    out = {}
    for line in p.stdout.splitlines():
        j = json.loads(line)
        out[j["word"]] = (np.array(j["vector"], dtype=np.float32), j["source"] == "table")
    if p.stderr.strip():
        log("streamvec vectors: " + p.stderr.strip().replace("\n", "; "))
    return out


# ---------------------------------------------------------------------------------------------
# fastText

class FastTextBin:
    """The input matrix and dictionary of a fastText 0.9 .bin model (unquantised, unpruned):
    enough to compute a word's vector from its character n-grams alone (Dictionary::
    computeSubwords, FNV-1a hash of each n-gram's bytes modulo bucket)."""

    def __init__(self, path: Path):
        with open(path, "rb") as f:
            magic, version = struct.unpack("<ii", f.read(8))
            if magic != 793712314 or version != 12:
                raise ValueError(f"{path}: not a fastText 0.9 model (magic {magic}, v{version})")
            (self.dim, _ws, _epoch, _min_count, _neg, _word_ngrams, _loss, _model, self.bucket,
             self.minn, self.maxn, _lr_update, _t) = struct.unpack("<12id", f.read(56))
            size, self.nwords, _nlabels, _ntokens, prune = struct.unpack("<iiiqq", f.read(28))
            if prune > 0:
                raise ValueError(f"{path}: pruned (quantised) model")
            base = f.tell()
            data = bytearray()

            def need(k):  # data holds at least k bytes (k past base)
                while len(data) < k:
                    more = f.read(1 << 22)
                    if not more:
                        raise ValueError(f"{path}: cut short")
                    data.extend(more)

            self.words = []
            pos = 0
            for _ in range(size):
                while (end := data.find(b"\0", pos)) < 0:
                    need(len(data) + 1)
                need(end + 10)
                self.words.append(data[pos:end].decode("utf-8", "replace"))
                pos = end + 1 + 8 + 1  # word, '\0', int64 count, int8 type
            need(pos + 17)
            if data[pos] != 0:
                raise ValueError(f"{path}: quantised model")
            m, n = struct.unpack_from("<qq", data, pos + 1)
            matrix_offset = base + pos + 17
        if n != self.dim or m != self.nwords + self.bucket:
            raise ValueError(f"{path}: input matrix {m} x {n}, expected "
                             f"{self.nwords + self.bucket} x {self.dim}")
        self.input = np.memmap(path, dtype="<f4", mode="r", offset=matrix_offset, shape=(m, n))
        self.ids = {w: i for i, w in enumerate(self.words)}

    @staticmethod
    def _hash(b: bytes) -> int:
        h = 2166136261
        for c in b:
            h ^= c if c < 0x80 else c | 0xFFFFFF00  # uint32_t(int8_t(c))
            h = (h * 16777619) & 0xFFFFFFFF
        return h

    def ngram_rows(self, word: str) -> list[int]:
        w = ("<" + word + ">").encode("utf-8")
        rows = []
        for i in range(len(w)):
            if (w[i] & 0xC0) == 0x80:
                continue
            j, n, gram = i, 1, bytearray()
            while j < len(w) and n <= self.maxn:
                gram.append(w[j])
                j += 1
                while j < len(w) and (w[j] & 0xC0) == 0x80:
                    gram.append(w[j])
                    j += 1
                if n >= self.minn and not (n == 1 and (i == 0 or j == len(w))):
                    rows.append(self.nwords + self._hash(bytes(gram)) % self.bucket)
                n += 1
        return rows

    def subword_vector(self, word: str) -> np.ndarray:
        """Mean of the word's n-gram rows: fastText's vector of a word it has no row for."""
        rows = self.ngram_rows(word)
        if not rows:
            return np.zeros(self.dim, dtype=np.float32)
        return np.asarray(self.input[rows], dtype=np.float64).mean(axis=0).astype(np.float32)


def fasttext_print(ft: str, model: Path, words: list[str]) -> dict:
    p = subprocess.run([ft, "print-word-vectors", str(model)], input="\n".join(words) + "\n",
                       capture_output=True, text=True, check=True)
    out = {}
    for line in p.stdout.splitlines():
        f = line.rstrip().split(" ")
        out[f[0]] = np.array([float(x) for x in f[1:]], dtype=np.float32)
    return out


# ---------------------------------------------------------------------------------------------
# scoring

def score(sv: Path, work: Path, name: str, vectors: dict, sets: dict) -> dict:
    """{set: {"table"|"oov"|"all": {"pairs", "spearman"}}} for vectors {word: (vec, from_table)},
    every part scored by `streamvec eval --similarity` on a word2vec file of these vectors."""
    dim = len(next(iter(vectors.values()))[0])
    vec_file = work / f"{name}.vec"
    with open(vec_file, "w") as f:
        f.write(f"{len(vectors)} {dim}\n")
        for w, (v, _) in vectors.items():
            f.write(w + " " + " ".join(repr(float(x)) for x in v) + "\n")
    result = {}
    for set_name, pairs in sets.items():
        parts = {"table": [], "oov": [], "all": []}
        missing = 0
        for w1, w2, s in pairs:
            if w1 not in vectors or w2 not in vectors:
                missing += 1
                continue
            both = vectors[w1][1] and vectors[w2][1]
            parts["table" if both else "oov"].append((w1, w2, s))
            parts["all"].append((w1, w2, s))
        result[set_name] = {"missing": missing}
        for part, rows in parts.items():
            if len(rows) < 2:
                result[set_name][part] = {"pairs": len(rows), "spearman": None}
                continue
            pair_file = work / f"{name}.{set_name}.{part}.txt"
            pair_file.write_text("".join(f"{a}\t{b}\t{s}\n" for a, b, s in rows))
            p = subprocess.run([str(sv), "eval", "--vectors", str(vec_file), "--similarity",
                                str(pair_file), "--json"], capture_output=True, text=True)
            if p.returncode != 0:
                raise RuntimeError(f"streamvec eval failed: {p.stderr}")
            sim = json.loads(p.stdout)["similarity"][0]
            result[set_name][part] = {"pairs": sim["pairs"], "spearman": sim["spearman"]}
    return result


def fmt(part: dict) -> str:
    rho = part["spearman"]
    return f"{rho:.3f} ({part['pairs']})" if rho is not None else f"- ({part['pairs']})"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    p.add_argument("--similarity", type=Path, action="append",
                   help="word-pair file (repeatable; default WS-353 and MEN)")
    p.add_argument("--table-top", type=int, default=10000,
                   help="words served from the table (the most frequent)")
    p.add_argument("--dim", type=int, default=100)
    p.add_argument("--window", type=int, default=5)
    p.add_argument("--negative", type=int, default=5)
    p.add_argument("--min-count", type=int, default=5, help="fastText's -minCount")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--vocab-capacity", type=int, default=200000, help="streamvec's")
    p.add_argument("--char-distill-every", type=int, default=20000, help="streamvec's")
    p.add_argument("--char-model", choices=["distill", "sum", "replace"], default="distill",
                   help="streamvec's character model: --char-distill beside SGNS (distill), or "
                        "--model char-lstm with --char-mode sum or replace")
    p.add_argument("--char-batch-words", type=int, default=100000,
                   help="streamvec's, with --char-model sum or replace")
    p.add_argument("--streamvec-arg", action="append", default=[],
                   help="extra argument for streamvec train (repeatable; =-form for flags)")
    p.add_argument("--streamvec", type=Path, default=REPO / "build" / "app" / "streamvec")
    p.add_argument("--fasttext", default="/usr/bin/fasttext", help="fastText CLI")
    p.add_argument("--no-fasttext", action="store_true", help="streamvec only")
    p.add_argument("--work", type=Path, help="working folder (default: a new one in "
                   "bench/results/; removed at the end unless --keep)")
    p.add_argument("--keep", action="store_true", help="keep the states, models and vectors")
    p.add_argument("--json", type=Path, help="also write the results here")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per training")
    a = p.parse_args()

    sets_paths = a.similarity or DEFAULT_SETS
    for path in [a.corpus, *sets_paths]:
        if not path.is_file():
            print(f"oov_bench: {path}: no such file", file=sys.stderr)
            return 2
    if not os.access(a.streamvec, os.X_OK):
        print(f"oov_bench: {a.streamvec} not found (scripts/build)", file=sys.stderr)
        return 2
    if not a.no_fasttext and not shutil.which(a.fasttext):
        print(f"oov_bench: {a.fasttext} not found (apt-get install fasttext, or --no-fasttext)",
              file=sys.stderr)
        return 2
    sets = {path.stem: read_pairs(path) for path in sets_paths}
    words = sorted({w for pairs in sets.values() for a1, a2, _ in pairs for w in (a1, a2)})
    work = a.work or BENCH_DIR / "results" / time.strftime("oov-%Y%m%d-%H%M%S")
    work.mkdir(parents=True, exist_ok=True)
    log(f"corpus {a.corpus}, {len(words)} words in {len(sets)} pair files, work {work}, "
        f"load average {os.getloadavg()[0]:.2f}")

    results = {"corpus": str(a.corpus), "table_top": a.table_top, "train_seconds": {},
               "systems": {}, "load_average": [os.getloadavg()[0]]}
    state = work / "state"
    shutil.rmtree(state, ignore_errors=True)
    if a.char_model == "distill":
        char_args = ["--char-distill", "--char-distill-every", a.char_distill_every]
    else:
        char_args = ["--model", "char-lstm", "--char-mode", a.char_model, "--char-batch-words",
                     a.char_batch_words]
    cmd = [a.streamvec, "train", "--input", a.corpus, "--stream", "--state", state,
           "--dim", a.dim, "--window", a.window, "--negative", a.negative, "--threads", a.threads,
           "--vocab-capacity", a.vocab_capacity, *char_args, *a.streamvec_arg]
    results["streamvec_command"] = " ".join(map(str, cmd))
    results["train_seconds"]["streamvec"] = timed(cmd, work / "streamvec-train.log",
                                                  timeout=a.timeout)
    results["streamvec_summary"] = (work / "streamvec-train.log").read_text().strip()[-2000:]
    for top, name in ((a.table_top, f"streamvec, {a.table_top} from the table + char model"),
                      (0, "streamvec, whole table + char model")):
        results["systems"][name] = score(a.streamvec, work, f"sv{top}",
                                         streamvec_vectors(a.streamvec, state, words, top), sets)
        # The same figures as `eval --oov` prints (a check of the scoring above).
        check = subprocess.run([str(a.streamvec), "eval", "--oov", "--state", str(state),
                                "--table-top", str(top), "--json"] +
                               [x for s in sets_paths for x in ("--similarity", str(s))],
                               capture_output=True, text=True, check=True)
        results["systems"][name]["eval_oov"] = json.loads(check.stdout)["similarity"]

    if not a.no_fasttext:
        model = work / "fasttext"
        cmd = [a.fasttext, "skipgram", "-input", a.corpus, "-output", model, "-dim", a.dim,
               "-ws", a.window, "-neg", a.negative, "-epoch", 1, "-minCount", a.min_count,
               "-thread", a.threads, "-verbose", 1]
        results["fasttext_command"] = " ".join(map(str, cmd))
        results["train_seconds"]["fasttext"] = timed(cmd, work / "fasttext-train.log",
                                                     timeout=a.timeout)
        bin_path = model.with_suffix(".bin")
        printed = fasttext_print(a.fasttext, bin_path, words)
        ftbin = FastTextBin(bin_path)
        vocab = set(ftbin.words)
        top_words = set([w for w in ftbin.words if w != "</s>"][:a.table_top])
        # Check the n-gram computation against fastText's own answer for words it has no row for.
        oov_words = [w for w in words if w not in vocab]
        worst = max((float(np.max(np.abs(ftbin.subword_vector(w) - printed[w]) /
                                  (np.abs(printed[w]) + 1e-3)))
                     for w in oov_words), default=0.0)
        results["fasttext_subword_check"] = {"words": len(oov_words), "max_rel_diff": worst}
        if worst > 1e-3:
            raise RuntimeError(f"n-gram vectors differ from print-word-vectors by {worst}")
        results["systems"]["fastText, print-word-vectors (vocabulary + n-grams)"] = score(
            a.streamvec, work, "ft", {w: (v, w in vocab) for w, v in printed.items()}, sets)
        mirrored = {w: (v, True) if w in top_words else (ftbin.subword_vector(w), False)
                    for w, v in printed.items()}
        results["systems"][f"fastText, {a.table_top} from the table + n-grams only"] = score(
            a.streamvec, work, f"ft{a.table_top}", mirrored, sets)
    results["load_average"].append(os.getloadavg()[0])

    print(f"\ncorpus {a.corpus.name}; training wall s: " +
          ", ".join(f"{k} {v:.1f}" for k, v in results["train_seconds"].items()) +
          f"; load average {results['load_average'][0]:.2f} -> {results['load_average'][1]:.2f}")
    print("\n| system | set | table pairs rho (n) | OOV pairs rho (n) | all pairs rho (n) |")
    print("|---|---|---|---|---|")
    for name, r in results["systems"].items():
        for set_name in sets:
            s = r[set_name]
            print(f"| {name} | {set_name} | {fmt(s['table'])} | {fmt(s['oov'])} | "
                  f"{fmt(s['all'])} |")
    if a.json:
        a.json.write_text(json.dumps(results, indent=2) + "\n")
    if not a.keep and a.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
