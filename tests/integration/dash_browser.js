// dash_browser.js - drives the dashboard in headless Chromium (playwright-core)
// for tests/integration/test_dashboard, which starts the cluster and passes:
//   DASH_URL      http://127.0.0.1:H/ (the coordinator's HTTP port)
//   KEEL_BIN      the keel binary; COORD host:port of the coordinator
//   NODES         comma-separated node ids that must be shown UP
//   PARTITIONS    P: the partition map must have P cells
//   MOVE_PART, MOVE_TO   the move to start with `keel move`
//   SHOT          where to save the screenshot; CHROMIUM the browser
// Prints one "ok <check>" line per check and exits 1 on the first failure,
// with the reason on stderr. Every wait is bounded.
'use strict';
const { execFileSync } = require('child_process');
const path = require('path');
const { chromium } = require(path.join(process.env.NPM_DIR, 'node_modules', 'playwright-core'));

const env = (k) => {
  if (!process.env[k]) throw new Error('missing environment variable ' + k);
  return process.env[k];
};
const keel = (...args) => execFileSync(env('KEEL_BIN'), [...args, '--coord', env('COORD')],
  { encoding: 'utf8', timeout: 10000 });

function ok(what) { console.log('ok   ' + what); }

async function main() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  const problems = [];
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    page.on('console', (m) => { if (m.type() === 'error') problems.push('console error: ' + m.text()); });
    page.on('pageerror', (e) => problems.push('page error: ' + e.message));
    page.on('requestfailed', (r) => problems.push('request failed: ' + r.url()));
    page.on('response', (r) => { if (r.status() >= 400) problems.push('HTTP ' + r.status() + ' ' + r.url()); });
    let bytes = 0;
    page.on('response', async (r) => {
      try { bytes += (await r.body()).length; } catch (e) { /* redirects have no body */ }
    });

    await page.goto(env('DASH_URL'), { waitUntil: 'load', timeout: 15000 });
    await page.waitForFunction(() => Number(document.body.dataset.polls || 0) >= 2, null, { timeout: 15000 });
    ok('page loads and polls /api/dashboard (' + bytes + ' bytes on first load)');

    for (const id of env('NODES').split(',')) {
      const state = await page.textContent('#nodes tr[data-node="' + id + '"] td:nth-child(2)', { timeout: 5000 });
      if (state.trim() !== 'UP') throw new Error('node ' + id + ' shown as ' + JSON.stringify(state));
    }
    ok('every node is shown with its state (UP): ' + env('NODES'));

    for (const id of ['chart-imbalance', 'chart-util', 'chart-moved', 'chart-latency']) {
      await page.waitForSelector('#' + id + ' canvas', { timeout: 10000 });
    }
    ok('the four charts rendered (canvas elements present)');

    await page.waitForFunction(() => {
      const g = window.keelDash.charts['chart-imbalance'];
      return g && g.numRows() >= 3;
    }, null, { timeout: 10000 });
    const rows = await page.evaluate(() => window.keelDash.charts['chart-imbalance'].numRows());
    ok('the imbalance chart has points (' + rows + ')');

    const cells = await page.locator('#grid .cell').count();
    if (cells !== Number(env('PARTITIONS'))) throw new Error('partition map has ' + cells + ' cells, want ' + env('PARTITIONS'));
    ok('the partition map has one cell per partition (' + cells + ')');

    const out = keel('move', env('MOVE_PART'), env('MOVE_TO'));
    const id = (out.match(/move (\d+)/) || out.match(/(\d+)/) || [])[1];
    if (!id) throw new Error('keel move printed no id: ' + out);
    const row = 'tr.move[data-move="' + id + '"]';
    await page.waitForSelector(row + ' [role=progressbar]', { timeout: 10000 });
    const seen = [];
    for (let i = 0; i < 60; i++) {
      const v = await page.getAttribute(row + ' [role=progressbar]', 'aria-valuenow', { timeout: 2000 }).catch(() => null);
      if (v === null) break;
      if (!seen.length || seen[seen.length - 1] !== Number(v)) seen.push(Number(v));
      await page.waitForTimeout(250);
    }
    // The throttle makes the copy last seconds: the bar must move, forward.
    if (seen.length < 2 || seen.some((v, i) => i && v < seen[i - 1])) {
      throw new Error('progress bar did not advance: ' + seen.join(','));
    }
    ok('move ' + id + ' appears in flight with a progress bar that advances (' + seen.join(',') + ')');
    await page.waitForSelector('tr.recent[data-move="' + id + '"][data-state="DONE"]', { timeout: 40000 });
    ok('move ' + id + ' then shows as done');
    await page.waitForFunction((pid) => window.keelDash.events.some((e) => e[1] === pid && e[3] === 'commit'),
      Number(id), { timeout: 5000 });
    ok('the move\'s start and commit reached the charts\' annotations');

    if (!(await page.isHidden('#killswitch'))) throw new Error('kill switch banner shown before keel pause');
    keel('pause', '--reason', 'browser test');
    await page.waitForSelector('#killswitch', { state: 'visible', timeout: 5000 });
    const text = await page.textContent('#killswitch');
    if (!text.includes('browser test')) throw new Error('banner does not say the reason: ' + text);
    ok('keel pause makes the kill switch banner appear, with its reason');
    keel('resume');
    await page.waitForSelector('#killswitch', { state: 'hidden', timeout: 5000 });
    ok('keel resume makes it go');

    await page.screenshot({ path: env('SHOT'), fullPage: true });
    ok('screenshot saved to ' + env('SHOT'));
    if (problems.length) throw new Error(problems.join('\n'));
    ok('no console error, page error or failed request');
  } finally {
    await browser.close();
  }
}

main().catch((e) => {
  console.error('FAIL ' + e.message);
  process.exit(1);
});
