// dashboard_watch.js - N headless Chromium pages watch the dashboard for S
// seconds; prints one JSON object: the first page's weight (bytes
// transferred on first load, from the DevTools protocol) and the
// coordinator's CPU over the watch (from /proc/PID/stat). Optionally saves
// screenshots of the first page along the way.
//
//   NPM_DIR=build/npm node bench/dashboard_watch.js URL COORD_PID PAGES SECONDS [SHOT_PREFIX SHOT_EVERY_S]
//
// PAGES 0 measures the coordinator with nobody watching (the baseline).
// Needs Debian's chromium and playwright-core under NPM_DIR/node_modules
// (make npm-deps).
'use strict';
const fs = require('fs');
const path = require('path');
const { chromium } = require(path.resolve(process.env.NPM_DIR || 'build/npm', 'node_modules', 'playwright-core'));

function cpuTicks(pid) {
  const f = fs.readFileSync('/proc/' + pid + '/stat', 'utf8');
  const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return Number(rest[11]) + Number(rest[12]); // utime + stime, in clock ticks (100/s)
}

async function main() {
  const [url, pid, pagesArg, secondsArg, shotPrefix, shotEveryArg] = process.argv.slice(2);
  const pages = Number(pagesArg), seconds = Number(secondsArg), shotEvery = Number(shotEveryArg || 0);
  const out = { url, pages, seconds };
  const browser = pages ? await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  }) : null;
  try {
    const opened = [];
    for (let i = 0; i < pages; i++) {
      const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
      if (i === 0) {
        const cdp = await page.context().newCDPSession(page);
        await cdp.send('Network.enable');
        let bytes = 0, requests = 0;
        cdp.on('Network.loadingFinished', (e) => { bytes += e.encodedDataLength; requests++; });
        await page.goto(url, { waitUntil: 'load' });
        await page.waitForFunction(() => Number(document.body.dataset.polls || 0) >= 1, null, { timeout: 15000 });
        out.first_load_bytes = bytes;
        out.first_load_requests = requests;
        let pollBytes = 0, polls = 0;
        cdp.on('Network.loadingFinished', (e) => { pollBytes += e.encodedDataLength; polls++; });
        out._poll = () => ({ bytes: pollBytes, polls });
      } else {
        await page.goto(url, { waitUntil: 'load' });
      }
      opened.push(page);
    }
    const t0 = Date.now(), c0 = cpuTicks(pid), p0 = out._poll ? out._poll() : null;
    let shots = 0;
    while (Date.now() - t0 < seconds * 1000) {
      await new Promise((r) => setTimeout(r, 1000));
      if (shotPrefix && shotEvery && opened.length &&
          Math.floor((Date.now() - t0) / 1000 / shotEvery) >= shots) {
        await opened[0].screenshot({ path: shotPrefix + '-' + shots + '.png', fullPage: true });
        shots++;
      }
    }
    const dt = (Date.now() - t0) / 1000, c1 = cpuTicks(pid);
    out.coordinator_cpu_percent = +(100 * (c1 - c0) / 100 / dt).toFixed(2);
    if (p0) {
      const p1 = out._poll();
      out.steady_bytes_per_poll = Math.round((p1.bytes - p0.bytes) / Math.max(1, p1.polls - p0.polls));
    }
    delete out._poll;
    out.screenshots = shots;
  } finally {
    if (browser) await browser.close();
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => { console.error(e); process.exit(1); });
