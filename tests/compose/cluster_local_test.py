"""ctest compose.cluster_local: scripts/cluster-local end to end, and the metric names that
compose/ queries checked against what the processes really export.

Starts scripts/cluster-local (the embedded broker, 2 parameter-node shards, 2 trainers pushing
to them, ingest following a folder, the feed crawler on the bundled feed files, serve over the
shards' states, every process with --metrics) on a small folder of text, then:
  1. waits for a word's vector from serve's /v1/vectors/{word} (documents in, a vector out),
     then adds a second file to the followed folder;
  2. reads every process's live /metrics and checks that every metric name in the PromQL of
     compose/grafana/dashboards/*.json and compose/prometheus/rules.yml is one that some process
     exports (or a name the rules record, or Prometheus's own `up`);
  3. stops the cluster with SIGTERM and expects a clean stop (exit 0, final snapshots).
Waits are bounded (no timing is asserted). Network: 127.0.0.1 only.

Usage: cluster_local_test.py STREAMVEC_BINARY SOURCE_DIR WORK_DIR
"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
                   "unless", "bool", "offset", "inf", "nan", "atan2"}
PROMETHEUS_OWN = {"up"}  # series Prometheus writes for every target


def promql_metric_names(expr):
    """Metric names an expression selects: identifiers that are not functions, aggregations,
    keywords, labels of by/without/on/ignoring, label matchers, strings or durations."""
    e = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)
    e = re.sub(r"'(?:\\.|[^'\\])*'", "''", e)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\boffset\s+-?[0-9a-z]+", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*|[0-9][0-9.]*(?:[eE][+-]?[0-9]+)?", e):
        tok = m.group(0)
        if tok[0].isdigit() or tok in PROMQL_KEYWORDS:
            continue
        if e[m.end():].lstrip().startswith("("):
            continue  # a function or an aggregation
        names.add(tok)
    return names


def rules_exprs(path):
    """(recorded names, expressions) of a Prometheus rules file, read line by line (the file's
    own style: `expr: ONE LINE` or `expr: >-` followed by an indented block)."""
    recorded, exprs = set(), []
    lines = open(path, encoding="utf-8").read().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^\s*-?\s*record:\s*(\S+)", line)
        if m:
            recorded.add(m.group(1))
        m = re.match(r"^(\s*)-?\s*expr:\s*(.*)$", line)
        if m:
            value = m.group(2).strip()
            if value in (">-", ">", "|", "|-"):
                indent = len(m.group(1))
                block = []
                while i + 1 < len(lines) and (not lines[i + 1].strip() or
                                              len(lines[i + 1]) - len(lines[i + 1].lstrip())
                                              > indent):
                    i += 1
                    block.append(lines[i].strip())
                value = " ".join(block)
            exprs.append(value)
        i += 1
    return recorded, exprs


def dashboard_exprs(path):
    out = []

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("expr"), str):
                out.append(node["expr"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(json.load(open(path, encoding="utf-8")))
    return out


def exported_names(text):
    """Names a Prometheus text exposition exports: its samples' names and its families (with
    _bucket, _sum and _count for histograms and summaries)."""
    names = set()
    for line in text.splitlines():
        m = re.match(r"^# TYPE ([A-Za-z_:][A-Za-z0-9_:]*) (\w+)", line)
        if m:
            names.add(m.group(1))
            if m.group(2) in ("histogram", "summary"):
                names.update(m.group(1) + s for s in ("_bucket", "_sum", "_count"))
            continue
        m = re.match(r"^([A-Za-z_:][A-Za-z0-9_:]*)[{ ]", line)
        if m:
            names.add(m.group(1))
    return names


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, ""


def descendants(pid):
    """The pids of every process below `pid`, read from /proc."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = open(f"/proc/{entry}/stat").read()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def short_frame(frame):
    """gdb's `#3  0x... in f (args) at file.cpp:113` as `#3 f file.cpp:113`."""
    m = re.match(r"(#\d+)\s+(?:0x[0-9a-f]+ in )?(.*?)(?: \(|$)", frame)
    where = re.search(r" (?:at|from) (\S+)$", frame)
    if not m:
        return frame[:160]
    return f"{m.group(1)} {m.group(2)[:100]}" + (f" {where.group(1)}" if where else "")


def describe_stuck(root, binary, source, waited):
    """Lines naming each streamvec process still running below `root`: first those in `waited`
    (the pids cluster-local waits for), with gdb's backtraces of their main thread and of their
    threads in streamvec's code, then the others (all the threads of all of them in `full`),
    when gdb is there."""
    head, full = [], []
    for pid in sorted(descendants(root), key=lambda p: p not in waited):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if not argv or os.path.basename(argv[0]) != os.path.basename(binary):
            continue
        state = "did not stop after SIGTERM" if pid in waited else "not yet told to stop"
        head.append(f"{state}: pid {pid}: {' '.join(argv[1:])[:200]}")
        if not shutil.which("gdb"):
            head.append("  (no gdb for its threads' stacks)")
            continue
        try:
            dump = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-ex",
                                   "set pagination off", "-ex", "thread apply all bt 25"],
                                  capture_output=True, text=True, timeout=90).stdout
        except subprocess.TimeoutExpired:
            head.append("  (gdb did not answer in 90 s)")
            continue
        full.append(f"--- gdb: pid {pid}\n{dump}")
        if pid not in waited:
            continue
        for thread in re.split(r"\n(?=Thread \d+ )", dump):
            ours = "streamvec::" in thread or f" at {source}/" in thread
            if thread.startswith("Thread 1 ") or (thread.startswith("Thread ") and ours):
                lines = thread.splitlines()
                head.append("  " + lines[0])
                head.extend("    " + short_frame(f) for f in lines[1:] if f.startswith("#"))
    return head, full


def self_test():
    got = promql_metric_names(
        'histogram_quantile(0.99, sum by (le) (rate(a_bucket{route="/x"}[$__rate_interval])))'
        ' / on(instance) group_left() b_total offset 5m + count(up{job!="p"} == 0) * 1e3'
        ' - scalar(max(c_clock)) or d:rec')
    assert got == {"a_bucket", "b_total", "up", "c_clock", "d:rec"}, got


def main():
    binary, source, work = sys.argv[1], sys.argv[2], sys.argv[3]
    self_test()
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    # Documents: the first 600 kB of the bundled Wikipedia paragraphs, half at the start and
    # half added to the followed folder once a vector is served (so the shards write newer
    # snapshots: serve's PIP loss needs two).
    data = os.path.join(work, "data")
    os.makedirs(data)
    corpus = os.path.join(source, "data/demo/enwiki-small-5m.txt")
    text = open(corpus, "rb").read(600_000)
    cut = text.rfind(b"\n", 0, len(text) // 2) + 1
    open(os.path.join(data, "a.txt"), "wb").write(text[:cut])

    eval_dir = os.path.join(source, "tests/data/eval")
    cmd = [os.path.join(source, "scripts/cluster-local"), "--bin", binary,
           "--work", os.path.join(work, "cluster"), "--data", data, "--http", "127.0.0.1:0",
           "--shards", "2", "--trainers", "2", "--push-every", "2000",
           "--feeds", os.path.join(source, "data/feeds/feeds.txt"),
           "--train-arg=--vocab-capacity", "--train-arg=20000", "--train-arg=--dim",
           "--train-arg=32", "--train-arg=--threads", "--train-arg=1",
           "--node-arg=--snapshot-every", "--node-arg=1s",
           "--serve-arg=--similarity", "--serve-arg=" + eval_dir + "/EN-WS-353-ALL.txt",
           "--serve-arg=--analogy", "--serve-arg=" + eval_dir + "/questions-words.txt",
           "--serve-arg=--poll-interval", "--serve-arg=0.2"]
    log = open(os.path.join(work, "cluster-local.log"), "w+")
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    failures, stuck, stacks = [], [], []
    try:
        urls_file = os.path.join(work, "cluster", "urls.txt")
        deadline = time.monotonic() + 60
        while not os.path.exists(urls_file):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("cluster-local did not start")
            time.sleep(0.1)
        urls = dict(line.split(" ", 1) for line in open(urls_file).read().splitlines())
        print("processes:", ", ".join(f"{k} {v}" for k, v in sorted(urls.items())),
              f"({time.monotonic() - t0:.1f} s)")
        serve = urls["serve"]

        # 1. Documents in, a vector out.
        word, deadline = "the", time.monotonic() + 90
        while True:
            code, body = get(f"{serve}/v1/vectors/{word}")
            if code == 200 or time.monotonic() > deadline or proc.poll() is not None:
                break
            time.sleep(0.2)
        if code != 200:
            raise RuntimeError(f"GET /v1/vectors/{word}: {code} {body[:200]}")
        vector = json.loads(body)["vector"]
        print(f"ok   GET /v1/vectors/{word}: {len(vector)} floats, snapshot "
              f"{json.loads(body).get('snapshot')} ({time.monotonic() - t0:.1f} s)")
        if len(vector) != 32 or not any(vector):
            failures.append(f"vector of '{word}': {vector[:4]}...")
        get(f"{serve}/v1/vectors/no-such-word-here")  # an error reply: the error counters
        with open(os.path.join(data, "b.txt.part"), "wb") as f:
            f.write(text[cut:text.rfind(b"\n") + 1])
        os.rename(os.path.join(data, "b.txt.part"), os.path.join(data, "b.txt"))

        # 2. Every metric the dashboard and the rules query is exported by some process.
        compose = os.path.join(source, "compose")
        recorded, exprs = rules_exprs(os.path.join(compose, "prometheus/rules.yml"))
        for dash in sorted(glob.glob(os.path.join(compose, "grafana/dashboards/*.json"))):
            exprs += dashboard_exprs(dash)
        wanted = set()
        for e in exprs:
            wanted |= promql_metric_names(e)
        if len(exprs) < 20 or len(wanted) < 20:
            failures.append(f"only {len(exprs)} expressions, {len(wanted)} names read")
        # Some series appear only once there is something to count (a push, a second
        # snapshot for the PIP loss): read until all are there or the deadline passes.
        deadline = time.monotonic() + 60
        while True:
            exported, texts = set(), {}
            for name, url in urls.items():
                metrics_url = url + "/metrics" if name == "serve" else url
                code, text = get(metrics_url)
                texts[name] = text
                if code != 200:
                    failures.append(f"GET {metrics_url}: {code}")
                exported |= exported_names(text)
            missing = sorted(n for n in wanted
                             if n not in exported and n not in recorded
                             and n not in PROMETHEUS_OWN)
            if not missing or time.monotonic() > deadline or proc.poll() is not None:
                break
            time.sleep(0.5)
        for name, text in texts.items():
            open(os.path.join(work, f"metrics-{name}.txt"), "w").write(text)
        print(f"{len(exprs)} expressions query {len(wanted)} names; "
              f"{len(exported)} names exported by {len(urls)} processes "
              f"({time.monotonic() - t0:.1f} s)")
        if missing:
            failures.append("queried but exported by no process: " + ", ".join(missing))
        else:
            print("ok   every queried metric is exported")
    except Exception as e:  # noqa: BLE001 - reported with the logs below
        failures.append(str(e))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            failures.append("cluster-local did not stop in 120 s after SIGTERM")
            log.seek(0)
            waited = {int(m) for m in re.findall(r"has not stopped .*\(pid (\d+)", log.read())}
            stuck, stacks = describe_stuck(proc.pid, binary, source, waited)
            for pid in descendants(proc.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            proc.kill()
            rc = proc.wait()
    log.seek(0)
    output = log.read()
    if rc != 0:
        failures.append(f"cluster-local exited {rc}")
    elif "cluster-local: stopped" not in output:
        failures.append("cluster-local did not report a clean stop")
    if failures:
        # What failed first: a long output is cut in the middle by CI's summary.
        for f in failures:
            print("FAIL", f)
        print("\n".join(stuck))
        print(output)
        for f in sorted(glob.glob(os.path.join(work, "cluster/logs/*.log"))):
            print(f"--- {f} (last lines)")
            print("".join(open(f, errors="replace").readlines()[-15:]))
        print("\n".join(stacks))
        for f in failures:
            print("FAIL", f)
        return 1
    print(output[output.find("cluster-local: stopping"):].rstrip())
    print("ok   clean stop")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
