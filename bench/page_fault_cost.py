#!/usr/bin/python3
"""What a first touch of fresh memory costs on this machine, with 4 KiB and with 2 MiB pages.

Maps --mib MiB of anonymous memory, advises it MADV_NOHUGEPAGE or MADV_HUGEPAGE (transparent
huge pages in "madvise" mode, as BigVector asks for them: base/big_array.h), writes one byte per
4 KiB page, and prints the seconds and the rate, alternating the two kinds for --reps rounds.
On a VM the 2 MiB figure of the first round can be far slower than later rounds: the host backs
the guest's memory lazily. The loop's own cost (Python, about 65k iterations for 256 MiB) is a
few ms. docs/training.md and docs/serving.md quote its figures.
"""
import argparse
import mmap
import time


def touch(mib: int, huge: bool) -> float:
    size = mib << 20
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    m.madvise(mmap.MADV_HUGEPAGE if huge else mmap.MADV_NOHUGEPAGE)
    t0 = time.perf_counter()
    for off in range(0, size, 4096):
        m[off] = 1
    seconds = time.perf_counter() - t0
    m.close()
    return seconds


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=256, help="MiB touched per run")
    p.add_argument("--reps", type=int, default=2, help="rounds of (4 KiB, 2 MiB)")
    a = p.parse_args()
    if a.mib < 2 or a.reps < 1:
        p.error("--mib must be >= 2 and --reps >= 1")
    print(f"{'round':>5} {'pages':>7} {'seconds':>8} {'GB/s':>6} {'us per 4 KiB':>13}")
    for rep in range(1, a.reps + 1):
        for huge in (False, True):
            s = touch(a.mib, huge)
            pages = (a.mib << 20) // 4096
            print(f"{rep:>5} {'2 MiB' if huge else '4 KiB':>7} {s:8.3f} "
                  f"{(a.mib << 20) / s / 1e9:6.2f} {s / pages * 1e6:13.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
