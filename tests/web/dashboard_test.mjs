// Drives the dashboard (GET /) of a running `streamvec serve` in headless Chromium
// (playwright-core from web/node_modules with Debian's /usr/bin/chromium; never a downloaded
// browser): the charts render with data, the search box returns neighbours and a drift table,
// the word panel lists the vocabulary by count, by prefix and pinned to an older snapshot.
// Usage: node dashboard_test.mjs URL SCREENSHOT_PATH WORD. Exit 0: passed; 1: failed.
import { createRequire } from "node:module";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, "..", "..", "web", "package.json"));
const { chromium } = require("playwright-core");

const [url, screenshot, word] = process.argv.slice(2);
const profile = mkdtempSync(join(tmpdir(), "streamvec-chromium-"));
let failed = 0;
function check(ok, what) {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failed++;
}

const browser = await chromium.launchPersistentContext(profile, {
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"],
  viewport: { width: 1300, height: 1100 },
});
try {
  const page = browser.pages()[0] || await browser.newPage();
  const errors = [];
  page.on("pageerror", e => errors.push(String(e)));
  page.on("console", m => { if (m.type() === "error") errors.push(m.text()); });
  // Every request the page makes must succeed: a missing chart library is a 404 here, not only
  // empty charts.
  const requests = [];
  const badRequests = [];
  page.on("response", r => {
    requests.push(r.url());
    if (r.status() >= 400) badRequests.push(`${r.status()} ${r.url()}`);
  });
  page.on("requestfailed", r => badRequests.push(`failed ${r.url()}`));
  await page.goto(url + "/?interval=300", { waitUntil: "load" });
  for (const asset of ["/static/uPlot.iife.min.js", "/static/uPlot.min.css", "/static/dashboard.js"]) {
    check(requests.some(u => u.endsWith(asset)), `the page loaded ${asset}`);
  }
  check(await page.evaluate(() => typeof uPlot === "function"), "the chart library is defined");
  // Bounded waits for data (a limit, not a timing assertion).
  const points = id => page.$eval(`#chart-${id}`, el => Number(el.dataset.points));
  for (const id of ["vocab", "words", "requests", "quality"]) {
    await page.waitForFunction(
      id => Number(document.querySelector(`#chart-${id}`).dataset.points) >= (id === "quality" ? 2 : 3),
      id, { timeout: 30000 }).catch(() => {});
    const n = await points(id);
    check(n >= (id === "quality" ? 2 : 3), `chart ${id} has data (${n} points)`);
  }
  const canvases = await page.$$eval("#charts canvas", cs => cs.filter(c => c.width > 0 && c.height > 0).length);
  check(canvases >= 7, `7 charts drawn (${canvases} canvases)`);
  const status = await page.textContent("#status");
  check(/snapshot \d+/.test(status), `status line names the snapshot: "${status}"`);

  await page.fill("#word", word);
  await page.click("#search-form button");
  await page.waitForSelector("#neighbors tr.neighbor", { timeout: 15000 }).catch(() => {});
  const neighbours = await page.$$eval("#neighbors tr.neighbor td:first-child", tds => tds.map(t => t.textContent));
  check(neighbours.length === 10 && !neighbours.includes(word), `search box: 10 neighbours of ${word}: ${neighbours.join(", ")}`);
  await page.waitForSelector("#drift tr.drift", { timeout: 15000 }).catch(() => {});
  const drift = await page.$$eval("#drift tr.drift", rows => rows.map(r => r.textContent));
  check(drift.length >= 2, `drift table has an older snapshot and now (${drift.length} rows)`);

  // The word panel: the vocabulary in count order, a prefix, paging, a word's detail, and the
  // whole panel pinned to an older retained snapshot.
  await page.waitForSelector("#words tr.word", { timeout: 15000 }).catch(() => {});
  const rowsOf = () => page.$$eval("#words tr.word",
                                   rows => rows.map(r => [...r.children].map(c => c.textContent)));
  const top = await rowsOf();
  check(top.length === 20, `word panel lists 20 words (${top.length})`);
  const ranks = top.map(r => Number(r[2]));
  check(ranks.every((r, i) => r === i + 1), `word panel ranks 1..20: ${ranks.join(",")}`);
  const counts = top.map(r => Number(r[1].replace(/,/g, "")));
  check(counts.every((c, i) => c > 0 && (i === 0 || c <= counts[i - 1])),
        `word panel counts descending: ${counts.slice(0, 5).join(", ")}...`);
  await page.fill("#prefix", "th");
  const allStartWith = p => {
    const cells = [...document.querySelectorAll("#words tr.word td:first-child")];
    return cells.length > 0 && cells.every(td => td.textContent.startsWith(p));
  };
  await page.waitForFunction(allStartWith, "th", { timeout: 15000 }).catch(() => {});
  const th = (await rowsOf()).map(r => r[0]);
  check(th.length > 0 && th.every(w => w.startsWith("th")),
        `prefix "th": ${th.slice(0, 6).join(", ")}`);
  const info = await page.textContent("#words-info");
  const total = Number((info.match(/^(\d+) words/) || [])[1]);
  if (total > 20) {
    await page.click("#words-next");
    await page.waitForFunction(
      () => /· 21-/.test(document.querySelector("#words-info").textContent),
      null, { timeout: 15000 }).catch(() => {});
    const second = (await rowsOf()).map(r => r[0]);
    check(second.length > 0 && second.every(w => w.startsWith("th") && !th.includes(w)),
          `next page of "th" holds other words: ${second.slice(0, 4).join(", ")}`);
    await page.click("#words-prev");
  }
  await page.waitForSelector("#words tr.word", { timeout: 15000 }).catch(() => {});
  await page.click("#words tr.word");
  await page.waitForFunction(
    () => /rank \d+ of \d+/.test(document.querySelector("#word-detail").textContent),
    null, { timeout: 15000 }).catch(() => {});
  const detail = await page.textContent("#word-detail");
  check(/^th\S*: count \d+ · rank \d+ of \d+ · .*snapshot \d+$/.test(detail),
        `word detail: "${detail}"`);
  const pins = await page.$$eval("#snapshot-pin option", os => os.map(o => o.value).filter(v => v));
  check(pins.length >= 2, `retained snapshots to pin: ${pins.join(", ")}`);
  if (pins.length >= 2) {
    const oldest = pins[0];
    await page.selectOption("#snapshot-pin", oldest);
    await page.waitForFunction(v => document.querySelector("#words-info").dataset.snapshot === v,
                               oldest, { timeout: 15000 }).catch(() => {});
    const pinnedTo = await page.$eval("#words-info", el => el.dataset.snapshot);
    check(pinnedTo === oldest,
          `word panel pinned to snapshot ${oldest} (answered from ${pinnedTo})`);
  }

  await page.waitForTimeout(1000);  // one more poll so the charts show a few points more
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(`screenshot: ${screenshot}`);
  check(errors.length === 0, `no page errors ${errors.join("; ")}`);
  check(badRequests.length === 0, `every request answered (${badRequests.join("; ")})`);
} finally {
  await browser.close();
  rmSync(profile, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
