#!/bin/bash
# Packs what the lent GPU machine (the `device` tool: a bare CUDA image without this project's
# libraries) needs to run the GPU tests and bench/gpu_bench.py: the built `streamvec` and test
# binaries, the shared libraries they load beyond glibc, and the benchmark corpus (xz), into
# .gpu/ at the repository root (git-ignored; name it in the tool's `carry`). Then run there
# `bash bench/gpu/on_device.sh` (see bench/README.md, "GPU").
#   bench/gpu/pack.sh [build dir, default build] [corpus, default ../shared/data/corpus/enwiki-text8style-100m.txt]
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$repo/build}
corpus=${2:-$repo/../shared/data/corpus/enwiki-text8style-100m.txt}
out=$repo/.gpu
rm -rf "$out/stage" "$out/bundle.tar.xz" && mkdir -p "$out/stage/bin" "$out/stage/lib"
bins=("$build/app/streamvec" "$build/tests/kernels_test" "$build/tests/trainer_test")
cp "${bins[@]}" "$out/stage/bin/"
# Every library the binaries load except glibc's own (the device's newer glibc runs them).
ldd "${bins[@]}" | awk '/=> \//{print $3}' | sort -u |
  grep -Ev '/(libc|libm|libpthread|libdl|librt|libresolv|ld-linux[^/]*)\.so' |
  xargs -r cp -L -t "$out/stage/lib/"
tar -C "$out/stage" -cf - bin lib | xz -T0 -6 > "$out/bundle.tar.xz"
rm -rf "$out/stage"
if [ -f "$corpus" ] && [ ! "$out/corpus.txt.xz" -nt "$corpus" ]; then
  xz -T0 -9 -c "$corpus" > "$out/corpus.txt.xz"
fi
du -sh "$out"/*
