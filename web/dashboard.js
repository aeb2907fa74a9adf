// The streamvec dashboard: polls /metrics (Prometheus text) and /v1/snapshots, draws uPlot charts,
// browses the vocabulary (/v1/words, /v1/words/{w}), optionally pinned to a retained snapshot
// (?snapshot=N), and answers the search box from /v1/neighbors and /v1/words/{w}/history. No
// build step.
"use strict";

const params = new URLSearchParams(location.search);
const POLL_MS = Number(params.get("interval") || 2000);
const MAX_POINTS = 600;
const start = Date.now() / 1000;

// Prometheus text -> {name: [{labels: {...}, value}]}.
function parseMetrics(text) {
  const out = {};
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$/);
    if (!m) continue;
    const labels = {};
    if (m[3]) for (const kv of m[3].matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[kv[1]] = kv[2];
    (out[m[1]] = out[m[1]] || []).push({ labels, value: Number(m[4]) });
  }
  return out;
}
function sum(metrics, name) {
  const s = metrics[name];
  return s ? s.reduce((a, x) => a + x.value, 0) : undefined;
}

// A time-series chart: series computed from each scrape; counters become rates.
class Chart {
  constructor(id, title, series) {
    this.id = id;
    this.series = series;  // [{label, value(metrics) -> number|undefined, rate?}]
    this.x = [];
    this.ys = series.map(() => []);
    this.prev = series.map(() => null);
    const box = document.createElement("div");
    box.className = "chart";
    box.id = "chart-" + id;
    box.dataset.points = "0";
    box.innerHTML = `<h2>${title}</h2><div class="empty">waiting for data</div>`;
    document.getElementById("charts").appendChild(box);
    this.box = box;
    this.plot = new uPlot({
      width: 400, height: 180,
      scales: { x: { time: false } },
      axes: [{ label: "seconds" }, {}],
      series: [{ label: "t (s)" }].concat(series.map((s, i) => ({
        label: s.label, stroke: ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"][i % 4], width: 2,
        spanGaps: true,
      }))),
    }, [[], ...series.map(() => [])], box);
  }
  add(t, metrics) {
    let any = false;
    const row = this.series.map((s, i) => {
      let v = s.value(metrics);
      if (v === undefined || Number.isNaN(v)) return null;
      if (s.rate) {
        const p = this.prev[i];
        this.prev[i] = { t, v };
        if (!p || t <= p.t) return null;
        v = Math.max(0, (v - p.v) / (t - p.t));
      }
      any = true;
      return v;
    });
    if (!any) return;
    this.x.push(t);
    row.forEach((v, i) => this.ys[i].push(v));
    if (this.x.length > MAX_POINTS) { this.x.shift(); this.ys.forEach(y => y.shift()); }
    this.plot.setData([this.x, ...this.ys]);
    this.box.dataset.points = String(this.x.length);
    const empty = this.box.querySelector(".empty");
    if (empty) empty.remove();
  }
}

const charts = [
  new Chart("ingest", "Ingest (documents/s, KB/s)", [
    { label: "documents/s", value: m => sum(m, "streamvec_ingest_documents_total"), rate: true },
    { label: "KB/s", value: m => { const b = sum(m, "streamvec_ingest_bytes_total"); return b === undefined ? b : b / 1024; }, rate: true },
  ]),
  new Chart("words", "Training (words/s)", [
    { label: "words/s (trainer)", value: m => sum(m, "streamvec_train_words_per_second") },
    { label: "words/s (snapshots)", value: m => sum(m, "streamvec_snapshot_words_trained"), rate: true },
  ]),
  new Chart("loss", "Loss", [{ label: "SGNS loss", value: m => sum(m, "streamvec_train_loss") }]),
  new Chart("lag", "Consumer lag (messages)", [
    { label: "lag", value: m => sum(m, "streamvec_consumer_lag_messages") },
  ]),
  new Chart("vocab", "Vocabulary", [
    { label: "words served", value: m => sum(m, "streamvec_vocabulary_size") },
    { label: "evictions", value: m => sum(m, "streamvec_snapshot_evictions") },
  ]),
  new Chart("requests", "API (requests/s)", [
    { label: "requests/s", value: m => sum(m, "streamvec_http_requests_total"), rate: true },
    { label: "errors/s", value: m => sum(m, "streamvec_http_errors_total") ?? 0, rate: true },
  ]),
];

// Quality per snapshot: x = snapshot version.
const quality = (() => {
  const box = document.createElement("div");
  box.className = "chart";
  box.id = "chart-quality";
  box.dataset.points = "0";
  box.innerHTML = `<h2>Quality per snapshot</h2><div class="empty">waiting for evaluated snapshots</div>`;
  document.getElementById("charts").appendChild(box);
  let plot = null, labels = "";
  return {
    box,
    update(snapshots) {
      const evaluated = snapshots.filter(s => s.quality);
      if (!evaluated.length) return;
      const names = [];
      for (const s of evaluated) {
        for (const f of s.quality.similarity || []) if (!names.includes(f.file)) names.push(f.file);
      }
      const series = names.map(n => ({ label: "Spearman " + n, get: s => ((s.quality.similarity || []).find(f => f.file === n) || {}).spearman }));
      series.push({ label: "analogy accuracy", get: s => (s.quality.analogy || {}).accuracy });
      series.push({ label: "PIP loss vs previous", get: s => (s.quality.pip || {}).normalized });
      series.push({ label: "index recall@10", get: s => (s.quality.index || {}).recall_at_10 });
      const data = [evaluated.map(s => s.version), ...series.map(se => evaluated.map(s => { const v = se.get(s); return v === undefined ? null : v; }))];
      const key = series.map(s => s.label).join("|");
      if (!plot || key !== labels) {
        if (plot) plot.destroy();
        labels = key;
        plot = new uPlot({
          width: 400, height: 180, scales: { x: { time: false } },
          axes: [{ label: "snapshot" }, {}],
          series: [{ label: "snapshot" }].concat(series.map((s, i) => ({
            label: s.label, stroke: ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"][i % 5],
            width: 2, points: { show: true }, spanGaps: true,
          }))),
        }, data, box);
      } else {
        plot.setData(data);
      }
      box.dataset.points = String(evaluated.length);
      const empty = box.querySelector(".empty");
      if (empty) empty.remove();
    },
  };
})();

async function pollMetrics() {
  try {
    const r = await fetch("/metrics");
    const m = parseMetrics(await r.text());
    const t = Date.now() / 1000 - start;
    for (const c of charts) c.add(t, m);
    const v = sum(m, "streamvec_snapshot_version");
    const hnsw = sum(m, "streamvec_index_hnsw");
    document.getElementById("status").textContent =
      v ? `snapshot ${v} · ${sum(m, "streamvec_vocabulary_size")} words · ` +
          `${hnsw ? "HNSW index, recall@10 " + sum(m, "streamvec_index_recall_at_10").toFixed(3) : "exact search"} · ` +
          `snapshot age ${Math.round(sum(m, "streamvec_snapshot_age_seconds"))} s`
        : "waiting for a first snapshot";
  } catch (e) {
    document.getElementById("status").textContent = "cannot reach the server: " + e;
  }
}

async function pollSnapshots() {
  try {
    const r = await fetch("/v1/snapshots");
    const body = await r.json();
    quality.update(body.snapshots || []);
    updatePinChoices(body.snapshots || [], body.served);
  } catch (e) { /* shown by pollMetrics */ }
}

// The snapshot the word panel and the search box answer from: "" = the served one.
function pinned() { return document.getElementById("snapshot-pin").value; }
function withPin(url) {
  const v = pinned();
  return v ? url + (url.includes("?") ? "&" : "?") + "snapshot=" + v : url;
}

// Published snapshots up to the served one may be pinned (a retired one answers 404).
function updatePinChoices(snapshots, served) {
  const select = document.getElementById("snapshot-pin");
  const versions = snapshots.map(s => s.version).filter(v => served !== null && v <= served);
  const have = [...select.options].slice(1).map(o => Number(o.value));
  if (JSON.stringify(have) === JSON.stringify(versions)) return;
  const keep = select.value;
  while (select.options.length > 1) select.remove(1);
  for (const v of versions) select.add(new Option("snapshot " + v, String(v)));
  if (keep && versions.includes(Number(keep))) select.value = keep;
}

const WORDS_PAGE = 20;
let wordsOffset = 0;
let wordsTotal = 0;
let wordsRequest = 0;  // answers to older requests (typing fast) are dropped

async function showWords() {
  const id = ++wordsRequest;
  const table = document.getElementById("words");
  const info = document.getElementById("words-info");
  const prefix = document.getElementById("prefix").value;
  const r = await fetch(withPin(`/v1/words?limit=${WORDS_PAGE}&offset=${wordsOffset}&prefix=` +
                                encodeURIComponent(prefix)));
  const body = await r.json();
  if (id !== wordsRequest) return;
  table.innerHTML = "";
  if (!r.ok) {
    info.className = "error";
    info.textContent = body.error;
    return;
  }
  info.className = "";
  wordsTotal = body.total;
  const last = Math.min(body.offset + body.words.length, body.total);
  info.textContent = `${body.total} words` + (prefix ? ` starting with "${prefix}"` : "") +
      (body.words.length ? ` · ${body.offset + 1}-${last}` : "") +
      ` · snapshot ${body.snapshot}`;
  info.dataset.snapshot = String(body.snapshot);
  const head = document.createElement("tr");
  head.innerHTML = "<th>word</th><th>count</th><th>rank</th>";
  table.appendChild(head);
  for (const w of body.words) {
    const row = document.createElement("tr");
    row.className = "word";
    cell(row, w.word);
    cell(row, w.count === null ? "?" : Math.round(w.count).toLocaleString("en"));
    cell(row, w.rank);
    row.children[1].className = row.children[2].className = "num";
    row.addEventListener("click", () => showWord(w.word));
    table.appendChild(row);
  }
}

async function showWord(word) {
  const detail = document.getElementById("word-detail");
  const r = await fetch(withPin("/v1/words/" + encodeURIComponent(word)));
  const body = await r.json();
  if (!r.ok) {
    detail.className = "error";
    detail.textContent = body.error;
    return;
  }
  detail.className = "";
  const count = body.count === null ? "count unknown" : `count ${Math.round(body.count)}`;
  const first = body.first_snapshot_exact ? `first seen in snapshot ${body.first_snapshot}`
                                          : `held since snapshot ${body.first_snapshot} or earlier`;
  detail.textContent = `${body.word}: ${count} · rank ${body.rank} of ` +
      `${body.vocabulary_size} · ${first} · snapshot ${body.snapshot}`;
  document.getElementById("word").value = word;
  search(word);
}

function cell(row, text) { const td = document.createElement("td"); td.textContent = text; row.appendChild(td); }

async function search(word) {
  const nTable = document.getElementById("neighbors");
  const dTable = document.getElementById("drift");
  nTable.innerHTML = ""; dTable.innerHTML = "";
  const r = await fetch(withPin("/v1/neighbors?k=10&word=" + encodeURIComponent(word)));
  const body = await r.json();
  if (!r.ok) {
    nTable.innerHTML = `<tr><td class="error"></td></tr>`;
    nTable.querySelector("td").textContent = body.error;
    return;
  }
  for (const n of body.neighbors) {
    const row = document.createElement("tr");
    row.className = "neighbor";
    cell(row, n.word); cell(row, n.similarity.toFixed(3));
    nTable.appendChild(row);
  }
  const h = await fetch(withPin("/v1/words/" + encodeURIComponent(word) + "/history?k=5"));
  if (!h.ok) return;
  const history = await h.json();
  const head = document.createElement("tr");
  head.innerHTML = "<th>snapshot</th><th>cosine to now</th><th>neighbours then</th>";
  dTable.appendChild(head);
  for (const e of history.history) {
    const row = document.createElement("tr");
    row.className = "drift";
    cell(row, e.snapshot);
    cell(row, e.cosine_to_now === null ? "absent" : e.cosine_to_now.toFixed(3));
    cell(row, e.neighbors.map(n => n.word).join(", "));
    dTable.appendChild(row);
  }
  const now = document.createElement("tr");
  now.className = "drift";
  cell(now, history.snapshot + " (now)"); cell(now, "1.000");
  cell(now, history.neighbors.slice(0, 5).map(n => n.word).join(", "));
  dTable.appendChild(now);
}

document.getElementById("search-form").addEventListener("submit", ev => {
  ev.preventDefault();
  const w = document.getElementById("word").value.trim();
  if (w) search(w);
});

document.getElementById("prefix").addEventListener("input", () => {
  wordsOffset = 0; showWords();
});
document.getElementById("snapshot-pin").addEventListener("change", () => { showWords(); });
document.getElementById("words-prev").addEventListener("click", () => {
  wordsOffset = Math.max(0, wordsOffset - WORDS_PAGE); showWords();
});
document.getElementById("words-next").addEventListener("click", () => {
  if (wordsOffset + WORDS_PAGE < wordsTotal) { wordsOffset += WORDS_PAGE; showWords(); }
});

pollMetrics(); pollSnapshots(); showWords();
setInterval(pollMetrics, POLL_MS);
setInterval(pollSnapshots, Math.max(POLL_MS, 2000));
