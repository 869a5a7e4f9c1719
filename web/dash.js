/* dash.js - the Keel dashboard: polls /api/dashboard once a second and
 * draws it. Charts are Dygraphs (Debian's libjs-dygraphs, embedded in the
 * coordinator); the tables and the partition map are plain DOM.
 *
 * The first poll asks for the whole history (since=0); later ones ask only
 * for samples newer than the last one held, and the page keeps one hour.
 * Format of the endpoint: docs/dashboard.md. */
'use strict';

const HOUR_MS = 3600 * 1000;
const POLL_MS = 1000;
const PALETTE = ['#1565c0', '#ef6c00', '#2e7d32', '#6a1b9a', '#c62828', '#00838f', '#9e9d24',
  '#4e342e', '#ad1457', '#283593', '#558b2f', '#00695c'];

const dash = {
  since: 0,        // newest sample time held (ms)
  samples: [],     // [t, imb, imb_load, moved_bps, throttle_bps, in_flight, queued, [br], [lr], [ops], [p50], [p99]]
  events: [],      // [t, move, partition, kind]
  columns: [],     // node ids of the history's columns
  grid: 'owner',
  charts: {},
  state: null,
  polls: 0,
};
window.keelDash = dash; // for the browser test and for curious operators

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k === 'style') e.style.cssText = v;
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}

function fmtBytes(b) {
  if (b === null || b === undefined || !isFinite(b)) return '–';
  const u = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (Math.abs(b) >= 1000 && i < u.length - 1) { b /= 1000; i++; }
  return (i ? b.toFixed(1) : Math.round(b)) + ' ' + u[i];
}
function fmtNum(x, d = 1) { return x === null || x === undefined || !isFinite(x) ? '–' : Number(x).toFixed(d); }
function fmtAge(s) {
  if (s === null || s === undefined || !isFinite(s)) return '–';
  if (s < 60) return s.toFixed(0) + ' s';
  if (s < 3600) return (s / 60).toFixed(1) + ' min';
  if (s < 86400) return (s / 3600).toFixed(1) + ' h';
  return (s / 86400).toFixed(1) + ' d';
}
function colour(i) { return PALETTE[((i % PALETTE.length) + PALETTE.length) % PALETTE.length]; }

/* ---- History ------------------------------------------------------------ */

function mergeHistory(h, now) {
  dash.columns = h.columns;
  for (const s of h.samples) if (s[0] > dash.since) dash.samples.push(s);
  // The server repeats events newer than the caller's last sample, which
  // may include some already held: keep one of each (move, kind).
  const seen = new Set(dash.events.map((e) => e[1] + ':' + e[3]));
  for (const e of h.events) if (!seen.has(e[1] + ':' + e[3])) dash.events.push(e);
  if (dash.samples.length) dash.since = dash.samples[dash.samples.length - 1][0];
  const cut = now - HOUR_MS;
  while (dash.samples.length && dash.samples[0][0] < cut) dash.samples.shift();
  while (dash.events.length && dash.events[0][0] < cut) dash.events.shift();
}

function colValue(s, field, c) {
  const a = s[7 + field];
  return a && c < a.length ? a[c] : null;
}

/* Vertical lines at move events: drawn in the chart's own underlay hook. */
function eventLines(canvas, area, g) {
  const [x0, x1] = g.xAxisRange();
  const shown = dash.events.filter((e) => e[0] >= x0 && e[0] <= x1);
  // Hundreds of moves after a join would paint a solid block: fade with count.
  const a = Math.max(0.08, Math.min(0.7, 20 / Math.max(1, shown.length)));
  const col = { start: 'rgba(46,125,50,' + a + ')', commit: 'rgba(21,101,192,' + a + ')',
    abort: 'rgba(198,40,40,' + Math.max(a, 0.6) + ')' };
  for (const e of shown) {
    const x = g.toDomXCoord(e[0]);
    canvas.strokeStyle = col[e[3]] || '#888';
    canvas.lineWidth = 1;
    canvas.beginPath();
    canvas.moveTo(x, area.y);
    canvas.lineTo(x, area.y + area.h);
    canvas.stroke();
  }
}

function deadBand(canvas, area, g) {
  const st = dash.state && dash.state.settings;
  if (!st) return;
  const yStart = g.toDomYCoord(st.start_ratio), yStop = g.toDomYCoord(st.stop_ratio);
  canvas.fillStyle = 'rgba(255,193,7,.18)';
  canvas.fillRect(area.x, yStart, area.w, yStop - yStart);
  canvas.strokeStyle = 'rgba(230,81,0,.8)';
  canvas.setLineDash([4, 3]);
  for (const y of [yStart, yStop]) {
    canvas.beginPath();
    canvas.moveTo(area.x, y);
    canvas.lineTo(area.x + area.w, y);
    canvas.stroke();
  }
  canvas.setLineDash([]);
  eventLines(canvas, area, g);
}

function chart(id, rows, labels, opts) {
  const have = dash.charts[id];
  const o = Object.assign({ labels, legend: 'always', labelsSeparateLines: false, connectSeparatedPoints: false,
    axisLabelWidth: 60, strokeWidth: 1.4, colors: opts.colors, drawPoints: false }, opts);
  if (!rows.length) return;
  if (!have) {
    dash.charts[id] = new Dygraph($(id), rows, o);
  } else {
    have.updateOptions(Object.assign({ file: rows }, o));
  }
}

function drawCharts() {
  const S = dash.samples;
  if (!S.length) return;
  const st = dash.state && dash.state.settings;
  const top = Math.max(1.5, (st ? st.start_ratio : 1.25) + 0.25,
    ...S.map((s) => Math.max(s[1] || 0, s[2] || 0) * 1.05));
  chart('chart-imbalance', S.map((s) => [new Date(s[0]), s[1], s[2]]),
    ['time', 'by bytes', 'by load'],
    { colors: ['#1565c0', '#ef6c00'], valueRange: [0.9, top], underlayCallback: deadBand, ylabel: 'max/mean' });

  const cols = dash.columns;
  chart('chart-util', S.map((s) => [new Date(s[0]), ...cols.map((_, c) => colValue(s, 0, c))]),
    ['time', ...cols], { colors: cols.map((_, c) => colour(c)), underlayCallback: eventLines, ylabel: 'util / mean' });

  chart('chart-moved', S.map((s) => [new Date(s[0]), s[3], s[4] || null]),
    ['time', 'moved B/s', 'throttle B/s'],
    { colors: ['#2e7d32', '#c62828'], fillGraph: false, underlayCallback: eventLines,
      axes: { y: { valueFormatter: fmtBytes, axisLabelFormatter: fmtBytes } } });

  const latLabels = ['time'];
  const latColours = [];
  cols.forEach((id, c) => {
    latLabels.push(id + ' p50', id + ' p99');
    latColours.push(colour(c), colour(c));
  });
  const series = {};
  cols.forEach((id) => { series[id + ' p50'] = { strokePattern: [3, 3] }; });
  chart('chart-latency', S.map((s) => {
    const row = [new Date(s[0])];
    cols.forEach((_, c) => row.push(colValue(s, 3, c), colValue(s, 4, c)));
    return row;
  }), latLabels, { colors: latColours, series, underlayCallback: eventLines, ylabel: 'ms' });
  annotateLatency(latLabels);
}

/* Dygraphs annotations sit on a data point of a series: snap each move
 * event to the nearest sample. */
function annotateLatency(labels) {
  const g = dash.charts['chart-latency'];
  if (!g || labels.length < 2) return;
  const ts = dash.samples.map((s) => s[0]);
  const near = (t) => {
    let lo = 0, hi = ts.length - 1;
    while (lo < hi) { const m = (lo + hi) >> 1; if (ts[m] < t) lo = m + 1; else hi = m; }
    if (lo > 0 && Math.abs(ts[lo - 1] - t) < Math.abs(ts[lo] - t)) lo--;
    return ts[lo];
  };
  const letter = { start: 'S', commit: 'C', abort: 'A' };
  g.setAnnotations(dash.events.slice(-12).map((e) => ({
    series: labels[2] || labels[1], x: near(e[0]), shortText: letter[e[3]] || '?',
    text: 'move ' + e[1] + ' (partition ' + e[2] + ') ' + e[3], cssClass: 'ann-' + e[3],
  })));
}

/* ---- Tables --------------------------------------------------------------- */

function drawBanner(st) {
  const b = $('killswitch');
  if (st.paused) {
    $('killswitch-text').textContent = 'for ' + fmtAge(st.paused.age_s) + ': ' + st.paused.reason;
    b.hidden = false;
  } else {
    b.hidden = true;
  }
}

function drawNodes(st) {
  const tb = $('nodes').tBodies[0];
  tb.replaceChildren(...st.nodes.map((n, i) => el('tr', { 'data-node': n.id },
    el('td', {}, el('span', { style: 'color:' + colour(dash.columns.indexOf(n.id)) }, '■ '), n.id,
      n.quarantined ? ' (quarantined)' : ''),
    el('td', { class: 'state-' + n.state }, n.state),
    el('td', { class: 'num' }, n.leader_of + ' / ' + n.follower_of),
    el('td', { class: 'num' }, fmtNum(n.util_bytes, 3) + ' (' + fmtNum(n.ratio_bytes, 2) + '×)'),
    el('td', { class: 'num' }, fmtNum(n.util_load, 3) + ' (' + fmtNum(n.ratio_load, 2) + '×)'),
    el('td', { class: 'num' }, fmtBytes(n.bytes)),
    el('td', { class: 'num' }, n.keys),
    el('td', { class: 'num' }, fmtNum(n.ops, 1)),
    el('td', { class: 'disk-' + n.disk_state }, n.disk_state +
      (n.disk_fraction === null ? '' : ' ' + (100 * n.disk_fraction).toFixed(0) + '%')),
    el('td', { class: 'num' }, fmtNum(n.p50_ms, 2) + ' / ' + fmtNum(n.p99_ms, 2) + ' ms'),
    el('td', { class: 'num' }, n.heartbeat_age_s === null ? 'never' : fmtAge(n.heartbeat_age_s) + ' ago'))));
}

function progressBar(m) {
  const total = m.total_bytes > 0 ? m.total_bytes : 0;
  let frac = total ? Math.min(1, m.bytes / total) : 0;
  if (['FENCED', 'COMMITTED'].includes(m.state)) frac = 1;
  const bar = el('span', { class: 'bar', role: 'progressbar', 'aria-valuemin': '0', 'aria-valuemax': '100',
    'aria-valuenow': String(Math.round(frac * 100)) }, el('span', { style: 'width:' + (frac * 100).toFixed(1) + '%' }));
  return el('td', {}, bar, ' ' + (frac * 100).toFixed(0) + '% of ' + fmtBytes(total));
}

function drawMoves(st) {
  const mv = st.moves;
  const c = mv.counts;
  $('move-counts').textContent = c.in_flight + ' in flight, ' + c.queued + ' queued, ' + c.awaiting_cleanup +
    ' awaiting cleanup · ' + c.committed_total + ' committed, ' + c.aborted_total + ' aborted · ' +
    fmtBytes(c.bytes_total) + ' moved · longest write pause ' + fmtNum(c.max_pause_ms, 1) + ' ms';
  const o = $('oldest');
  if (mv.oldest) {
    o.textContent = 'Oldest move in flight: ' + mv.oldest.id + ', ' + fmtAge(mv.oldest.age_s) + ' old (expected ~' +
      fmtAge(mv.oldest.expected_s) + ')' + (mv.oldest.overdue ? ' — FAR PAST ITS EXPECTED TIME' : '');
    o.className = 'oldest' + (mv.oldest.overdue ? ' overdue' : '');
  } else {
    o.textContent = 'No move in flight.';
    o.className = 'oldest';
  }
  const MAX_ROWS = 40;
  // Moving first, then queued; each by id.
  const active = mv.active.slice().sort((a, b) => (a.queued - b.queued) || (a.id - b.id));
  const more = active.length - MAX_ROWS;
  $('moves-more').textContent = more > 0 ? '… and ' + more + ' more in flight or queued' : '';
  $('moves-active').tBodies[0].replaceChildren(...active.slice(0, MAX_ROWS).map((m) => el('tr', { class: 'move', 'data-move': m.id,
    'data-state': m.state },
  el('td', {}, m.id), el('td', {}, m.partition), el('td', {}, m.from + ' → ' + m.to),
  el('td', {}, m.queued ? 'queued' : m.state + ' / ' + (m.phase || '–')),
  progressBar(m),
  el('td', { class: 'num' }, m.rate_bps ? fmtBytes(m.rate_bps) + '/s' : '–'),
  el('td', { class: 'num' }, m.eta_s === null ? '–' : fmtAge(m.eta_s)),
  el('td', { class: 'num' }, m.write_pause_ms === null ? '–' : fmtNum(m.write_pause_ms, 1) + ' ms'),
  el('td', { class: 'num' + (m.overdue ? ' disk-high' : '') }, fmtAge(m.age_s)),
  el('td', {}, m.planned_because))));
  $('moves-recent').tBodies[0].replaceChildren(...mv.recent.slice().reverse().map((m) => el('tr',
    { class: 'recent', 'data-move': m.id, 'data-state': m.state },
    el('td', {}, m.id), el('td', {}, m.partition), el('td', {}, m.from + ' → ' + m.to),
    el('td', { class: 'outcome-' + m.state }, m.state === 'DONE' ? 'done' : m.state === 'ABORTED' ? 'aborted'
      : 'committed (' + (m.phase || 'awaiting cleanup') + ')'),
    el('td', {}, m.reason), el('td', { class: 'num' }, fmtBytes(m.bytes)),
    el('td', { class: 'num' }, m.write_pause_ms === null ? '–' : fmtNum(m.write_pause_ms, 1) + ' ms'),
    el('td', { class: 'num' }, fmtAge(m.time_to_commit_s === undefined ? m.age_s : m.time_to_commit_s)))));
}

function drawPlan(st) {
  const p = st.plan, box = $('plan');
  if (!p) { box.textContent = 'no plan'; return; }
  if (p.error) { box.textContent = 'cannot plan: ' + p.error; return; }
  const kids = [];
  if (st.paused) kids.push(el('p', { class: 'disk-high' }, 'Rebalancing is paused: this plan would not run.'));
  kids.push(el('p', {}, p.moves.length + ' moves · imbalance ' + fmtNum(p.imbalance_before, 3) + ' → ' +
    fmtNum(p.imbalance_after, 3) + ' · floor ' + fmtNum(p.floor, 4) + ', moved ' + fmtNum(p.moved, 4) +
    ' (efficiency ' + fmtNum(p.efficiency, 2) + ')'));
  if (p.moves.length) {
    kids.push(el('ul', {}, ...p.moves.slice(0, 30).map((m) => el('li', { class: 'plan-move' },
      'partition ' + m.partition + ' ' + m.from + ' → ' + m.to + ': ' + m.reason.text))));
    if (p.moves.length > 30) kids.push(el('p', { class: 'muted' }, '… and ' + (p.moves.length - 30) + ' more'));
  }
  for (const s of p.stop_details || []) kids.push(el('p', { class: 'stop' }, 'stops: ' + s.key + ' — ' + s.text));
  box.replaceChildren(...kids);
}

function drawSettings(st) {
  const rows = st.changed_settings;
  $('settings').tBodies[0].replaceChildren(...rows.map((s) => el('tr', { 'data-setting': s.name },
    el('td', {}, s.name), el('td', {}, s.value), el('td', { class: 'muted' }, s.default === null ? '–' : s.default),
    el('td', {}, fmtAge(s.age_s) + ' ago'))));
  $('settings-none').hidden = rows.length > 0;
  $('band-start').textContent = st.settings.start_ratio;
  $('band-stop').textContent = st.settings.stop_ratio;
}

function drawGrid(st) {
  const g = st.grid, box = $('grid');
  const P = g.owners.length;
  while (box.children.length < P) box.append(el('div', { class: 'cell' }));
  while (box.children.length > P) box.lastChild.remove();
  const moving = new Set(st.moves.active.map((m) => m.partition));
  let max = 0;
  if (g.values) for (const v of g.values) max = Math.max(max, v);
  const colIndex = g.nodes.map((id) => dash.columns.indexOf(id));
  for (let i = 0; i < P; i++) {
    const cell = box.children[i], o = g.owners[i];
    const owner = o >= 0 ? g.nodes[o] : 'unowned';
    let bg;
    if (g.values) {
      const f = max > 0 ? g.values[i] / max : 0;
      bg = 'rgba(21,101,192,' + (0.08 + 0.92 * f).toFixed(3) + ')';
    } else {
      bg = o >= 0 ? colour(colIndex[o] >= 0 ? colIndex[o] : o) : '#ccc';
    }
    cell.style.background = bg;
    cell.className = 'cell' + (moving.has(i) ? ' moving' : '');
    cell.title = 'partition ' + i + ' · ' + owner + (g.values ? ' · ' + (g.mode === 'bytes' ? fmtBytes(g.values[i]) :
      fmtNum(g.values[i], 1) + ' ops/s') : '');
  }
  $('grid-legend').replaceChildren(...g.nodes.map((id, k) => el('span', {},
    el('i', { style: 'background:' + colour(colIndex[k] >= 0 ? colIndex[k] : k) }), id)),
  el('span', { class: 'muted' }, P + ' partitions' + (g.values ? ', darker = more ' + g.mode : '') +
    '; outlined: moving'));
}

function draw(j) {
  const st = j.state;
  if (st.error) throw new Error(st.error);
  dash.state = st;
  $('cluster').textContent = 'cluster ' + st.cluster + ' · term ' + st.term + ' · map v' + st.map_version;
  $('summary').textContent = 'imbalance ' + fmtNum(st.imbalance, 3) + ' by bytes, ' + fmtNum(st.imbalance_load, 3) +
    ' by load · ' + st.nodes.length + ' nodes · ' + st.partitions + ' partitions';
  drawBanner(st);
  drawNodes(st);
  drawMoves(st);
  drawPlan(st);
  drawSettings(st);
  drawGrid(st);
  drawCharts();
}

/* ---- Polling ---------------------------------------------------------------- */

async function poll() {
  const conn = $('conn');
  try {
    const r = await fetch('/api/dashboard?since=' + dash.since + '&grid=' + dash.grid, { cache: 'no-store' });
    if (!r.ok) throw new Error('HTTP ' + r.status);
    const j = await r.json();
    if (j.now_ms < dash.since) { // the coordinator's clock stepped back: start over
      dash.samples = [];
      dash.events = [];
      dash.since = 0;
    }
    mergeHistory(j.history, j.now_ms);
    draw(j);
    dash.polls++;
    document.body.dataset.polls = String(dash.polls);
    conn.textContent = 'live · ' + new Date(j.now_ms).toLocaleTimeString();
    conn.className = 'conn';
  } catch (e) {
    conn.textContent = 'coordinator unreachable (' + e.message + '), retrying';
    conn.className = 'conn error';
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

$('grid-mode').addEventListener('change', (e) => { dash.grid = e.target.value; });
poll();
