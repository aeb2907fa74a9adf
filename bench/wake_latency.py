#!/usr/bin/env python3
"""How late a sleeping thread is woken: sleeps 1 ms in a loop for --seconds and prints how many
wake-ups came more than 2, 5 and 10 ms late, and the latest. Run it beside `streamvec run` (the
probe stands in for a request thread waiting on its socket) to see whether the box delays a
waking thread for longer than a latency target, whatever the server does.

    /usr/bin/python3 bench/wake_latency.py --seconds 5
"""
import argparse
import time


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--sleep-ms", type=float, default=1.0)
    a = p.parse_args()
    late = {2: 0, 5: 0, 10: 0}
    worst, n = 0.0, 0
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        time.sleep(a.sleep_ms / 1000)
        over = (time.monotonic() - t0) * 1000 - a.sleep_ms
        n += 1
        worst = max(worst, over)
        for ms in late:
            if over > ms:
                late[ms] += 1
    print(f"wake-ups {n}, late > 2 ms: {late[2]}, > 5 ms: {late[5]}, > 10 ms: {late[10]}, "
          f"latest {worst:.1f} ms late")


if __name__ == "__main__":
    main()
