#!/bin/bash
# Packs what the lent GPU machine (the `device` tool: a bare CUDA image without this project's
# libraries) needs to run the GPU tests and bench/gpu_bench.py: the built `streamvec` and test
# binaries, the shared libraries they load beyond glibc, and a corpus other than data/run/'s (xz),
# into .gpu/ at the repository root (git-ignored; name it in the tool's `carry`). Then run there
# `bash bench/gpu/on_device.sh` (see bench/README.md, "GPU").
#   [GPU_BINS="tests/trainer_test tests/charmodel_test"] bench/gpu/pack.sh [build dir: build]
#       [corpus, default ../shared/data/corpus/enwiki-text8style-100m.txt]
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$repo/build}
corpus=${2:-$repo/../shared/data/corpus/enwiki-text8style-100m.txt}
out=$repo/.gpu
rm -rf "$out/stage" "$out/bundle.tar.xz" && mkdir -p "$out/stage/bin" "$out/stage/lib"
# GPU_BINS: the binaries to take, relative to the build directory (default all four); fewer when
# the 64 MiB are short (on_device.sh runs the tests and the benchmark it finds).
bins=()
for b in ${GPU_BINS:-app/streamvec tests/kernels_test tests/trainer_test tests/charmodel_test}; do
  bins+=("$build/$b")
done
cp "${bins[@]}" "$out/stage/bin/"
# Every library the binaries load except glibc's own (the device's newer glibc runs them), the
# few every Ubuntu image holds with the same ABI (the C++ runtime, zlib, xz, zstd, OpenSSL 3)
# and those bench/gpu/device_libs.txt says the device's image has: the repository's own files
# travel too, and the tool carries 64 MiB in all.
ldd "${bins[@]}" | awk '/=> \//{print $3}' | sort -u |
  grep -Ev '/(libc|libm|libpthread|libdl|librt|libresolv|ld-linux[^/]*)\.so' |
  grep -Ev '/(libstdc\+\+|libgcc_s|libz|liblzma|libzstd|libcrypto|libssl)\.so' |
  grep -vFf <(grep -v '^#' "$repo/bench/gpu/device_libs.txt" | sed 's|^|/|') |
  xargs -r cp -L -t "$out/stage/lib/"
# Stripped (symbols are not needed there) and packed hard, for the same reason.
strip --strip-unneeded "$out"/stage/bin/* "$out"/stage/lib/* 2>/dev/null || true
tar -C "$out/stage" -cf - bin lib | xz -T0 -9e > "$out/bundle.tar.xz"
rm -rf "$out/stage"
# The corpus travels only when it is not the one data/run/ holds (on_device.sh reads that one).
if [ -z "${2:-}" ] && [ -f "$repo/data/run/enwiki-text8style-100m.txt.xz" ]; then
  rm -f "$out/corpus.txt.xz"
elif [ -f "$corpus" ] && [ ! "$out/corpus.txt.xz" -nt "$corpus" ]; then
  xz -T0 -9 -c "$corpus" > "$out/corpus.txt.xz"
fi
du -sh "$out"/*
