"""The live page: plain HTML and a small inline script that polls ``/api/state.json``.

It loads nothing from elsewhere (no CDN: a monitor often runs where there is no
internet). Every number the page shows sits in an element with a ``data-figure`` (the
stream's totals), ``data-rule`` (a rule's row) or ``data-reason`` (a reject reason's
row) attribute, so a headless browser can read what a person sees; ``<body
data-polls>`` counts the polls rendered and ``data-error`` says why the last one failed.
The curves are inline SVG polylines, the matches the pictures ``graphcep draw`` draws
(``/match/<number>.png``, drawn on the server).
"""

from __future__ import annotations

import html

#: Milliseconds between polls.
POLL_MS = 1000

_STYLE = """body{font-family:sans-serif;margin:1.5em auto;max-width:75em;color:#222}
table{border-collapse:collapse;margin:.4em 0}td,th{border:1px solid #ccc;padding:.2em .6em;
text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}
.figures span{display:inline-block;margin:0 1.2em .4em 0}.figures b{font-size:1.3em}
figure{display:inline-block;margin:.4em;vertical-align:top}img{width:22em}
figcaption{font-size:.8em;color:#555}svg{background:#f7f7f7;margin-right:1em}
.curve{display:inline-block;font-size:.85em}#error{color:#a00}"""

_FIGURES = (("edges", "edges in"), ("late", "late"), ("rejected", "rejected"),
            ("matches", "matches"), ("batches", "micro-batches"), ("state", "edges in window"),
            ("buffered", "buffered"), ("lag", "lag (s)"))

_CURVES = (("edges_per_s", "edges/s"), ("matches_per_s", "matches/s"), ("lag_s", "lag (s)"))

_SCRIPT = r"""
(function () {
  'use strict';
  var body = document.body, polls = 0;
  function fmt(v) {
    if (v === null || v === undefined) { return '-'; }
    return typeof v === 'number' ? v.toLocaleString('en-US', {maximumFractionDigits: 3}) : String(v);
  }
  function cell(text, cls) {
    var td = document.createElement('td');
    td.textContent = text;
    if (cls) { td.className = cls; }
    return td;
  }
  function rows(id, entries, attr, make) {
    var table = document.getElementById(id);
    while (table.rows.length > 1) { table.deleteRow(1); }
    entries.forEach(function (entry) {
      var tr = table.insertRow(-1);
      tr.setAttribute(attr, entry[0]);
      make(entry).forEach(function (td) { tr.appendChild(td); });
    });
  }
  function curve(key, series) {
    var svg = document.getElementById('curve-' + key), w = 300, h = 60;
    var values = series.map(function (p) { return p[key]; })
                       .filter(function (v) { return typeof v === 'number'; });
    var line = svg.querySelector('polyline'), top = Math.max.apply(null, values.concat([1e-9]));
    line.setAttribute('points', values.map(function (v, i) {
      var x = values.length > 1 ? i * w / (values.length - 1) : 0;
      return x.toFixed(1) + ',' + (h - 2 - v * (h - 4) / top).toFixed(1);
    }).join(' '));
    document.getElementById('last-' + key).textContent =
        values.length ? fmt(values[values.length - 1]) : '-';
  }
  function render(s) {
    var t = s.totals, figures = {edges: t.edges, late: t.late, rejected: t.rejected,
        matches: t.matches, batches: t.batches, state: s.state.edges,
        buffered: s.state.buffered, lag: s.pace.lag_s};
    Object.keys(figures).forEach(function (key) {
      document.querySelector('[data-figure="' + key + '"]').textContent = fmt(figures[key]);
    });
    document.getElementById('watermark').textContent = s.batch ?
        (s.batch.final ? 'end of input' : fmt(s.batch.watermark_us / 1e6) + ' s') : '-';
    rows('rules', Object.keys(s.rules).sort().map(function (name) { return [name, s.rules[name]]; }),
         'data-rule', function (e) {
           return [cell(e[0]), cell(e[1].kind), cell(e[1].version || 'removed'),
                   cell(fmt(e[1].matches), 'num'), cell(fmt((e[1].state || {}).edges), 'num')];
         });
    document.getElementById('rules-section').hidden = !Object.keys(s.rules).length;
    rows('rejects', Object.keys(s.rejects_by_reason).map(function (k) {
           return [k, s.rejects_by_reason[k]]; }),
         'data-reason', function (e) { return [cell(e[0]), cell(fmt(e[1]), 'num')]; });
    ['edges_per_s', 'matches_per_s', 'lag_s'].forEach(function (k) { curve(k, s.series); });
    drawMatches(s.newest_matches);
  }
  function drawMatches(newest) {
    var box = document.getElementById('matches'), wanted = newest.map(function (m) {
      return String(m.number); });
    Array.prototype.slice.call(box.children).forEach(function (fig) {
      if (wanted.indexOf(fig.dataset.match) < 0) { box.removeChild(fig); }
    });
    newest.slice().reverse().forEach(function (m) {
      if (box.querySelector('[data-match="' + m.number + '"]')) { return; }
      var fig = document.createElement('figure'), img = document.createElement('img'),
          cap = document.createElement('figcaption');
      fig.dataset.match = String(m.number);
      img.src = '/match/' + m.number + '.png';
      img.alt = 'match ' + m.match_id;
      cap.textContent = (m.rule ? m.rule + ': ' : '') + m.match_id + ' (batch ' + m.batch + ')';
      fig.appendChild(img);
      fig.appendChild(cap);
      box.insertBefore(fig, box.firstChild);
    });
  }
  function poll() {
    fetch('/api/state.json', {cache: 'no-store'}).then(function (r) {
      if (!r.ok) { throw new Error('state: HTTP ' + r.status); }
      return r.json();
    }).then(function (s) {
      render(s);
      polls += 1;
      body.dataset.polls = String(polls);
      body.dataset.batches = String(s.totals.batches);
      delete body.dataset.error;
      document.getElementById('error').textContent = '';
    }).catch(function (err) {
      body.dataset.error = String(err);
      document.getElementById('error').textContent = 'not reachable: ' + err;
    }).then(function () { setTimeout(poll, POLL_MS); });
  }
  poll();
})();
"""


def page_html(query: str) -> str:
    """The page for the stream of ``query`` (its numbers come from the script's polls)."""
    e = html.escape
    figures = "".join(f"<span>{e(label)}: <b data-figure='{key}'>-</b></span>"
                      for key, label in _FIGURES)
    curves = "".join(
        f"<div class='curve'><svg id='curve-{key}' width='300' height='60'>"
        f"<polyline fill='none' stroke='#2a6' stroke-width='1.5' points=''/></svg>"
        f"<br>{e(label)}: <span id='last-{key}'>-</span></div>" for key, label in _CURVES)
    script = _SCRIPT.replace("POLL_MS", str(POLL_MS))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>graphcep: {e(query)}</title>
<link rel="icon" href="data:,"><style>{_STYLE}</style></head>
<body><h1>graphcep stream: {e(query)}</h1><p id="error"></p>
<div class="figures">{figures}<span>watermark: <b id="watermark">-</b></span></div>
<h2>Rates and lag, one point per micro-batch</h2>{curves}
<section id="rules-section" hidden><h2>Rules</h2><table id="rules"><tr><th>rule</th>
<th>kind</th><th>version</th><th>matches</th><th>edges held</th></tr></table></section>
<h2>Rejected lines by reason (since this start)</h2>
<table id="rejects"><tr><th>reason</th><th>lines</th></tr></table>
<h2>Newest matches</h2><div id="matches"></div>
<script>{script}</script></body></html>
"""
