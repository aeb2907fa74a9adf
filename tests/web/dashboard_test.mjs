// Drives the dashboard (GET /) of a running `streamvec serve` in headless Chromium
// (playwright-core from web/node_modules with Debian's /usr/bin/chromium; never a downloaded
// browser): the charts render with data, the search box returns neighbours and a drift table.
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
