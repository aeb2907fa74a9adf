#!/usr/bin/python3
"""How far MIMICK distillation gets on a fixed table: an upper bound for --char-distill.

`--char-distill` trains the character model beside SGNS, a few hundred Adam steps a pass
(docs/char-model.md). This bench asks what more distillation could buy: it trains one streaming
pass over the corpus (or takes --state), exports the table, distils a character model on every
admitted word type for --epochs shuffled passes (bench/char/distill_table.cpp, built here against
build/'s libraries), and scores WS-353 and MEN as bench/oov_bench.py does: the --top most
frequent words from the table, every other word from the model, every pair of each file, table
pairs and OOV pairs apart (oov_bench.score, `streamvec eval --similarity`).

  /usr/bin/python3 bench/char/distill_table.py                      # hidden 50, 20 epochs
  /usr/bin/python3 bench/char/distill_table.py --hidden 150 --epochs 6

Run scripts/build first; Debian's /usr/bin/python3 with numpy (python3-numpy).
"""

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))
import oov_bench  # noqa: E402  (bench/oov_bench.py: read_pairs, score, fmt, the default sets)


def build_tool(build: Path, out: Path) -> None:
    """Compiles distill_table.cpp against build/'s static libraries (as bench/knn/search_bench.sh
    links search_bench): OpenBLAS and the CUDA runtime where that build uses them."""
    cache = (build / "CMakeCache.txt").read_text()
    extra = []
    if "OPENBLAS_FOUND:INTERNAL=1" in cache and "STREAMVEC_ENABLE_OPENBLAS:BOOL=ON" in cache:
        extra += subprocess.run(["pkg-config", "--libs", "openblas"], capture_output=True,
                                text=True, check=True).stdout.split()
    if "STREAMVEC_ENABLE_CUDA:BOOL=ON" in cache:
        m = re.search(r"^CUDA_cudart_LIBRARY:FILEPATH=(.*)$", cache, re.M)
        if m:
            extra.append(m.group(1))
    utf8proc = subprocess.run(["pkg-config", "--libs", "libutf8proc"], capture_output=True,
                              text=True, check=True).stdout.split()
    cmd = ["g++", "-O2", "-std=c++20", f"-I{REPO}/charmodel/include", f"-I{REPO}/base/include",
           f"-I{REPO}/kernels/include", str(HERE / "distill_table.cpp"),
           str(build / "charmodel/libstreamvec_charmodel.a"),
           str(build / "kernels/libstreamvec_kernels.a"), str(build / "base/libstreamvec_base.a"),
           *utf8proc, *extra, "-lspdlog", "-lfmt", "-lpthread", "-o", str(out)]
    subprocess.run(cmd, check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, default=oov_bench.DEFAULT_CORPUS)
    ap.add_argument("--state", type=Path, default=None,
                    help="a trained state to distil (default: train one pass of --corpus into "
                         "--out/state, kept for the next run)")
    ap.add_argument("--out", type=Path, default=REPO / "bench/results/distill_table")
    ap.add_argument("--sv", type=Path, default=REPO / "build/app/streamvec")
    ap.add_argument("--top", type=int, default=10000,
                    help="most frequent words served from the table (the rest: the model)")
    ap.add_argument("--hidden", type=int, default=50, help="LSTM units per direction")
    ap.add_argument("--epochs", type=int, default=20, help="passes over the table's types")
    ap.add_argument("--batch", type=int, default=256, help="word types an Adam step")
    ap.add_argument("--rate", type=float, default=0.003, help="Adam step size")
    ap.add_argument("--ngram-buckets", type=int, default=0,
                    help="rows of the n-gram bag (--char-ngram-buckets; 0: none)")
    ap.add_argument("--ngram-lr", type=float, default=0.3, help="the bag's Adagrad step size")
    ap.add_argument("--similarity", type=Path, action="append", default=None,
                    help="word-pair files (default: WS-353 and MEN under ../shared/data)")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    state = a.state or a.out / "state"
    if not (state / "CURRENT").exists() and a.state is None:
        cmd = [str(a.sv), "train", "--input", str(a.corpus), "--stream", "--state", str(state),
               "--threads", "2", "--vocab-capacity", "200000"]
        print("#", " ".join(cmd), file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True)
    table = a.out / "table.vec"
    subprocess.run([str(a.sv), "export", "--state", str(state), "--output", str(table)],
                   check=True)
    tool = a.out / "distill_table"
    build_tool(REPO / "build", tool)
    sets = {p.name: oov_bench.read_pairs(p) for p in (a.similarity or oov_bench.DEFAULT_SETS)}
    words = sorted({w for pairs in sets.values() for p in pairs for w in p[:2]})
    (a.out / "words.txt").write_text("\n".join(words) + "\n")
    vectors_file = a.out / "vectors.txt"
    t0 = time.time()
    subprocess.run([str(tool), str(table), str(a.out / "words.txt"), str(vectors_file),
                    str(a.top), str(a.hidden), str(a.epochs), str(a.batch), str(a.rate),
                    *([str(a.ngram_buckets), str(a.ngram_lr)] if a.ngram_buckets else [])],
                   check=True)
    seconds = time.time() - t0
    vectors = {}
    for line in vectors_file.read_text().splitlines():
        f = line.split()
        vectors[f[0]] = (np.array([float(x) for x in f[1:-1]]), f[-1] == "T")
    result = oov_bench.score(a.sv, a.out, "distilled", vectors, sets)
    print(f"# distill_table: {state}, top {a.top}, hidden {a.hidden} x 2, {a.epochs} epochs, "
          f"batch {a.batch}, Adam {a.rate}"
          + (f", n-gram bag {a.ngram_buckets} rows, Adagrad {a.ngram_lr}" if a.ngram_buckets
             else "") + f": {seconds:.0f} s")
    print("| set | table pairs | OOV pairs | all pairs |")
    print("|---|---|---|---|")
    for name, parts in result.items():
        print(f"| {name} | {oov_bench.fmt(parts['table'])} | {oov_bench.fmt(parts['oov'])} | "
              f"{oov_bench.fmt(parts['all'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
