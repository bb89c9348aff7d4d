// The AML run report. The data format is described in data.go.
(function () {
  "use strict";

  var D = JSON.parse(document.getElementById("aml-data").textContent);
  var S = D.s, R = D.r, N = R.length, E = D.e, F = D.f, T = D.tot;
  var ROWH = 22, OVERSCAN = 12, ERRPAGE = 200, MAXTICKS = 40, MAXSEGS = 64, MAXEVENTS = 500;
  var STATUS = ["ok", "error", "open"];
  var STATUS_TEXT = ["ok", "failed", "unfinished"];
  var CONTENT = { "prompt": 1, "system": 1, "followUps": 1, "result": 1, "error.message": 1, "command": 1, "input": 1, "output": 1, "content": 1, "update": 1, "payload": 1 };
  var TOKEN_NAMES = { inputTokens: "input", outputTokens: "output", totalTokens: "total", cachedReadTokens: "cache read", cachedWriteTokens: "cache write", thoughtTokens: "thought",
    input_tokens: "input", output_tokens: "output", cached_input_tokens: "cached input", reasoning_tokens: "reasoning", model_calls: "model calls" };
  // Row fields.
  var ID = 0, PAR = 1, KIND = 2, NAME = 3, LABEL = 4, SUB = 5, START = 6, END = 7, DUR = 8, ST = 9, SESS = 10, ATTRS = 11;
  // The columns of Spend by node: a title and the attribute it shows.
  var spendSort = 6, spendDesc = true, spendRows = null;
  var SPEND_COLS = [["node", "node"], ["input", "gen_ai.usage.input_tokens"], ["output", "gen_ai.usage.output_tokens"], ["tokens", ""],
    ["model calls", "aml.model_calls"], ["tool calls", "aml.tool_calls"], ["cost (USD)", "aml.cost_usd"]];

  // ---- formatting ----
  var ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" };
  function esc(s) { return String(s).replace(/[&<>"']/g, function (c) { return ESC[c]; }); }
  function group(n) { return String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ","); }
  function fmtMs(ms) {
    if (ms < 0) return "–";
    if (ms === 0) return "0 ms";
    if (ms < 1) return (ms * 1000).toFixed(0) + " µs";
    if (ms < 10) return ms.toFixed(2) + " ms";
    if (ms < 1000) return ms.toFixed(ms < 100 ? 1 : 0) + " ms";
    var s = ms / 1000;
    if (s < 60) return s.toFixed(s < 10 ? 2 : 1) + " s";
    var m = Math.floor(s / 60);
    if (m < 60) return m + " min " + Math.round(s - m * 60) + " s";
    var h = Math.floor(m / 60);
    return h + " h " + (m - h * 60) + " min";
  }
  function decimals(x) { return Math.max(0, -Math.floor(Math.log10(x) + 1e-9)); }
  // fmtTick formats an axis time in the unit of the window's width, with
  // as many decimals as the step needs.
  function fmtTick(t, step, width) {
    if (width >= 120000) return fmtMs(t);
    if (width >= 2000) return (t / 1000).toFixed(decimals(step / 1000)) + " s";
    if (width >= 2) return t.toFixed(decimals(step)) + " ms";
    return (t * 1000).toFixed(decimals(step * 1000)) + " µs";
  }
  // fmtDur formats a reported duration: they are measured in microseconds.
  function fmtDur(ms) {
    if (ms < 0) return "unfinished";
    return ms === 0 ? "<1 µs" : fmtMs(ms);
  }
  function clock(t) {
    var d = new Date(D.t0 + t);
    return isNaN(d.getTime()) ? "" : d.toISOString().replace("T", " ").replace("Z", " UTC");
  }
  // niceStep returns the smallest 1, 2 or 5 times a power of ten that is
  // at least x.
  function niceStep(x) {
    if (!(x > 0)) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(x))), f = x / p;
    return (f <= 1 + 1e-9 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
  }
  function plural(n, one, many) { return group(n) + " " + (n === 1 ? one : many); }

  // ---- data access ----
  function kind(i) { return S[R[i][KIND]]; }
  function name(i) { return S[R[i][NAME]]; }
  function attrList(a) {
    var out = [];
    if (!a) return out;
    for (var i = 0; i + 1 < a.length; i += 2) {
      var k = a[i];
      if (k >= 0) out.push([S[k], S[a[i + 1]]]);
      else out.push([S[-k - 1], a[i + 1]]);
    }
    return out;
  }
  function attr(i, key) {
    var as = attrList(R[i][ATTRS]);
    for (var j = 0; j < as.length; j++) if (as[j][0] === key) return as[j][1];
    return undefined;
  }
  function isAgent(i) { return kind(i) === "agent" && name(i) === "Agent"; }
  function textOf(v) {
    if (typeof v === "string") return v;
    return JSON.stringify(v);
  }

  // ---- the tree: rows are in pre-order, so a subtree is [i, i+size[i]) ----
  var par = new Int32Array(N), depth = new Int32Array(N), size = new Int32Array(N), kids = new Int32Array(N);
  var sess = new Int32Array(N), i, j;
  for (i = 0; i < N; i++) {
    var p = R[i][PAR];
    par[i] = p;
    depth[i] = p < 0 ? 0 : depth[p] + 1;
    if (p >= 0) kids[p]++;
    sess[i] = R[i].length > SESS ? R[i][SESS] : -1;
  }
  for (i = N - 1; i >= 0; i--) {
    size[i] += 1;
    if (par[i] >= 0) size[par[i]] += size[i];
  }
  // Turn and cleanup segments drawn inside session bars and agent bars.
  var segs = [];
  for (i = 0; i < N; i++) {
    var nm = name(i);
    if (kind(i) !== "agent" || (nm !== "agent.turn" && nm !== "agent.cleanup") || par[i] < 0) continue;
    var sp = par[i];
    (segs[sp] || (segs[sp] = [])).push(i);
    var ag = par[sp];
    if (ag >= 0 && sess[ag] === sp) (segs[ag] || (segs[ag] = [])).push(i);
  }
  var evFirst = new Int32Array(N).fill(-1), evCount = new Int32Array(N);
  for (j = 0; j < E.length; j++) {
    var er = E[j][0];
    if (er < 0) continue;
    if (evFirst[er] < 0) evFirst[er] = j;
    evCount[er]++;
  }

  // ---- state ----
  var collapsed = new Uint8Array(N);
  if (N > 2000) for (i = 0; i < N; i++) if (size[i] > 1 && isAgent(i)) collapsed[i] = 1;
  var keep = null, matches = 0, query = "", errorsOnly = false;
  var vis = new Int32Array(0), sel = -1;
  var LO = D.lo, HI = D.hi > D.lo ? D.hi : D.lo + 1;
  var w0 = LO, w1 = HI;
  var hay = null;

  // ---- the page ----
  var app = document.getElementById("app");
  app.innerHTML = header() + errorsSection() +
    '<section class="main"><div class="toolbar">' +
    '<input type="search" id="q" placeholder="Filter: name, kind, file:line, id" aria-label="Filter rows">' +
    '<label class="grp"><input type="checkbox" id="eonly"' + (T.failed ? "" : " disabled") + '> errors only</label>' +
    '<span class="grp"><button id="expand" type="button">Expand all</button><button id="collapse" type="button">Collapse all</button></span>' +
    '<span class="grp"><button id="zout" type="button" title="Zoom out">−</button><button id="zin" type="button" title="Zoom in">+</button>' +
    '<button id="zreset" type="button">Whole run</button><span id="zlabel" class="muted"></span></span>' +
    '<span id="fstat" class="muted"></span>' +
    '<span class="legend"><span><i class="sw st-ok"></i>ok</span><span><i class="sw st-error"></i>failed</span>' +
    '<span><i class="sw st-open"></i>unfinished</span><span><i class="sw q"></i>queue wait</span>' +
    '<span><i class="sw tn"></i>turn</span><span><i class="sw cl"></i>cleanup</span><span><i class="sw ev"></i>event</span></span>' +
    '</div><div class="split"><div class="tl"><div class="vp" id="vp" tabindex="0" role="tree" aria-label="Executed tree and timeline">' +
    '<div class="axis"><div>span</div><div style="text-align:right">duration</div><div class="c-lane" id="ticks"></div></div>' +
    '<div class="spacer" id="spacer"><div class="gridov"><div></div><div></div><div class="c-lane" id="glines"></div></div>' +
    '<div class="rows" id="rows"></div></div></div></div>' +
    '<aside class="details" id="details"><p class="placeholder">Select a row to see its attributes' +
    (D.content ? ", events and captured content." : " and events.") + '</p></aside></div></section>' +
    spendSection() + kindsSection();

  var vp = document.getElementById("vp"), spacer = document.getElementById("spacer"), rowsEl = document.getElementById("rows");
  var ticksEl = document.getElementById("ticks"), glines = document.getElementById("glines"), details = document.getElementById("details");
  var axisH = vp.querySelector(".axis").offsetHeight;

  function header() {
    var runs = D.runs, st = 0, dur = -1, k;
    for (k = 0; k < runs.length; k++) st = Math.max(st, runs[k][1]);
    if (runs.length === 1 && runs[0][3] >= 0) dur = runs[0][2];
    var h = '<header><div class="hd-top"><h1>' + esc(D.title) + '</h1>';
    if (runs.length) h += '<span class="badge st-' + STATUS[st] + '" id="run-status">' + (st === 0 ? "succeeded" : st === 1 ? "failed" : "unfinished") + "</span>";
    h += "</div><div class=\"meta\">";
    var meta = [];
    if (runs.length === 1) meta.push("run <code>" + esc(runs[0][0]) + "</code>");
    else if (runs.length > 1) meta.push(plural(runs.length, "run", "runs"));
    if (N) meta.push("started " + esc(clock(LO)));
    if (T.providers.length) meta.push("providers " + T.providers.map(function (c) { return esc(c[0]) + " (" + group(c[1]) + ")"; }).join(", "));
    if (T.models.length) meta.push("models " + T.models.map(function (c) { return esc(c[0]) + " (" + group(c[1]) + ")"; }).join(", "));
    meta.push(D.content ? "content captured" : "metadata only: content was not captured");
    h += meta.join(" · ") + "</div><div class=\"cards\">";
    h += card("Duration", dur >= 0 ? fmtMs(dur) : fmtMs(D.hi - D.lo), dur >= 0 ? "wall clock " + fmtMs(D.hi - D.lo) : "wall clock of the trace");
    var as = [];
    if (T.agentsFailed) as.push(group(T.agentsFailed) + " failed");
    if (T.agentsOpen) as.push(group(T.agentsOpen) + " unfinished");
    if (T.replayed) as.push(group(T.replayed) + " replayed");
    if (T.slowestRow >= 0) as.push("slowest " + fmtMs(T.slowest));
    h += card("Agents", group(T.agents), as.join(" · "), T.agentsFailed > 0);
    h += card("Turns", T.turns ? group(T.turns) : "–", T.turns ? "in " + plural(T.sessions, "session", "sessions") : T.sessions ? plural(T.sessions, "session", "sessions") + "; the providers do not trace turns" : "");
    h += tokensCard();
    if (T.cost.length) h += card("Cost", T.cost.map(function (c) { return c[1].toFixed(4) + " " + esc(c[0]); }).join(", "), "the last cost each session reported");
    h += card("Queue wait", fmtMs(T.queueTotal), T.queued ? plural(T.queued, "agent", "agents") + " waited · longest " + fmtMs(T.queueMax) : "no agent waited for a slot");
    h += card("Agent sessions", fmtMs(T.sessionTotal), "time in provider sessions, summed");
    var ss = [];
    if (T.failed) ss.push(group(T.failed) + " failed");
    if (T.open) ss.push(group(T.open) + " unfinished");
    ss.push(plural(T.events, "event", "events"));
    if (T.tools) ss.push(plural(T.tools, "tool call", "tool calls") + (T.toolsFailed ? " (" + group(T.toolsFailed) + " failed)" : ""));
    if (T.cleanups) ss.push(plural(T.cleanups, "cleanup", "cleanups") + (T.cleanupFailed ? " (" + group(T.cleanupFailed) + " failed)" : ""));
    h += card("Spans", group(T.spans), ss.join(" · "), T.failed > 0);
    return h + "</div></header>";
  }
  function card(k, v, s, bad) {
    return '<div class="card' + (bad ? " bad" : "") + '"><div class="k">' + esc(k) + '</div><div class="v">' + v + '</div><div class="s">' + (s || "") + "</div></div>";
  }
  function tokensCard() {
    if (!T.tokens.length) return card("Tokens", "–", T.turns ? "no provider reported usage" : "no usage in the trace");
    var total = null, parts = [], counted = false;
    for (var k = 0; k < T.tokens.length; k++) {
      var t = T.tokens[k];
      if (t[0] === "totalTokens") total = t[1];
      if (t[0] === "input_tokens") counted = true;
      parts.push(esc(TOKEN_NAMES[t[0]] || t[0]) + " " + group(t[1]));
    }
    if (total === null) {
      total = 0;
      for (k = 0; k < T.tokens.length; k++) {
        var n = T.tokens[k][0];
        if (n === "inputTokens" || n === "outputTokens" || n === "input_tokens" || n === "output_tokens") total += T.tokens[k][1];
      }
    }
    // Counted by AML per session (the agents' spans), or summed from the
    // turns' own reports.
    var source = counted ? "counted over " + plural(T.agents, "agent", "agents") : "reported by " + group(T.usageTurns) + " of " + plural(T.turns, "turn", "turns");
    return card("Tokens", group(total), parts.join(" · ") + " · " + source);
  }

  function errorsSection() {
    if (!F.length) return "";
    var h = '<section class="errors" id="errors"><h2>Errors</h2><p class="muted">' +
      plural(F.length, "node failed", "nodes failed") + " where the failure started; " + plural(T.failed, "span", "spans") + " failed in all." +
      (D.content ? "" : " The trace holds no error messages (metadata only); the error type and the source position are shown.") +
      '</p><div id="errlist">' + errorItems(0, ERRPAGE) + "</div>";
    if (F.length > ERRPAGE) h += '<button type="button" id="errmore">Show ' + group(F.length - ERRPAGE) + " more</button>";
    return h + "</section>";
  }
  function errorItems(from, to) {
    var h = "";
    for (var k = from; k < to && k < F.length; k++) {
      var f = F[k];
      h += '<div class="err-item" data-row="' + f[0] + '"><div class="err-head"><span class="err-label">' + esc(S[f[1]]) + "</span>" +
        (f[2] ? "<code>" + esc(S[f[2]]) + "</code>" : '<span class="muted">no source position</span>') +
        (f[3] ? '<span class="err-type">' + esc(S[f[3]]) + "</span>" : "") +
        (f[5] ? '<span class="muted">and ' + plural(f[5], "enclosing span", "enclosing spans") + "</span>" : "") + "</div>" +
        (f[4] ? '<pre class="err-msg">' + esc(S[f[4]]) + "</pre>" : '<div class="err-note">message not captured (run with --capture-content to record it)</div>') +
        "</div>";
    }
    return h;
  }

  // ---- spend by node: agents and the components around them ----
  function spendData() {
    spendRows = [];
    for (var k = 0; k < N; k++) {
      if (kind(k) === "model" || kind(k) === "evaluation") continue;
      var inp = attr(k, "gen_ai.usage.input_tokens"), cost = attr(k, "aml.cost_usd"), tools = attr(k, "aml.tool_calls");
      if (typeof inp !== "number" && typeof cost !== "number" && typeof tools !== "number") continue;
      var v = [k];
      for (var c = 1; c < SPEND_COLS.length; c++) {
        var key = SPEND_COLS[c][1], x = key ? attr(k, key) : (attr(k, "gen_ai.usage.input_tokens") || 0) + (attr(k, "gen_ai.usage.output_tokens") || 0);
        v.push(typeof x === "number" ? x : 0);
      }
      spendRows.push(v);
    }
  }
  function spendSection() {
    if (!spendRows) spendData();
    if (!spendRows.length) return "";
    return '<section id="spend"><h2>Spend by node</h2><p class="muted">What each agent spent, and the sums of the components around them; select a column to sort, a node to find it above.</p>' +
      '<table class="kinds spend" id="spendtab">' + spendTable() + "</table></section>";
  }
  function spendTable() {
    return "<thead><tr>" + SPEND_COLS.map(function (c, n) {
      return '<th data-col="' + n + '" aria-sort="' + (n === spendSort ? (spendDesc ? "descending" : "ascending") : "none") + '"><button type="button">' + esc(c[0]) + (n === spendSort ? (spendDesc ? " ▾" : " ▴") : "") + "</button></th>";
    }).join("") + "</tr></thead><tbody>" + spendBody() + "</tbody>";
  }
  function spendBody() {
    var rows = spendRows.slice().sort(function (a, b) {
      var x, y;
      if (spendSort === 0) { x = S[R[a[0]][LABEL]]; y = S[R[b[0]][LABEL]]; }
      else { x = a[spendSort]; y = b[spendSort]; }
      var d = x < y ? -1 : x > y ? 1 : a[0] - b[0];
      return spendDesc && x !== y ? -d : d;
    });
    return rows.map(function (v) {
      var k = v[0], where = attr(k, "aml.source");
      return '<tr data-row="' + k + '"><td><button type="button" class="lk">' + esc(S[R[k][LABEL]]) + "</button>" + (where ? ' <code class="muted">' + esc(where) + "</code>" : "") + "</td>" +
        "<td>" + group(v[1]) + "</td><td>" + group(v[2]) + "</td><td>" + group(v[3]) + "</td><td>" + group(v[4]) + "</td><td>" + group(v[5]) + "</td><td>" + (v[6] ? v[6].toFixed(4) : "–") + "</td></tr>";
    }).join("");
  }

  function kindsSection() {
    var h = '<section><h2>Spans by kind</h2><table class="kinds"><thead><tr><th>kind</th><th>count</th><th>failed</th><th>unfinished</th><th>total time</th><th>longest</th></tr></thead><tbody>';
    for (var k = 0; k < D.kinds.length; k++) {
      var r = D.kinds[k];
      h += "<tr><td>" + esc(r[0]) + "</td><td>" + group(r[1]) + '</td><td class="' + (r[2] ? "bad" : "") + '">' + group(r[2]) + "</td><td>" + group(r[3]) +
        "</td><td>" + fmtMs(r[4]) + "</td><td>" + fmtMs(r[5]) + "</td></tr>";
    }
    return h + "</tbody></table></section>";
  }

  // ---- rows ----
  function computeVisible() {
    var out = new Int32Array(N), n = 0, k;
    if (keep) {
      for (k = 0; k < N; k++) if (keep[k]) out[n++] = k;
    } else {
      for (k = 0; k < N;) { out[n++] = k; k += collapsed[k] ? size[k] : 1; }
    }
    vis = out.subarray(0, n);
    spacer.style.height = n * ROWH + "px";
  }
  function pct(t) { return (t - w0) / (w1 - w0) * 100; }
  function seg(cls, a, b, cs, cd) {
    var l = Math.max(0, (a - cs) / cd), r = Math.min(1, (b - cs) / cd);
    if (r < l) return "";
    return '<div class="' + cls + '" style="left:' + (l * 100).toFixed(3) + "%;width:" + ((r - l) * 100).toFixed(3) + '%"></div>';
  }
  function barHTML(k) {
    var r = R[k], s = r[START], e = r[END], st = STATUS[r[ST]];
    // Clip the bar to the window (with a margin) so that deep zooms keep
    // small coordinates.
    var pad = (w1 - w0) * 0.02, cs = Math.max(s, w0 - pad), ce = Math.min(e, w1 + pad);
    if (ce < cs) cs = ce = s > w1 ? w1 + pad : w0 - pad;
    var left = pct(cs), width = Math.max(0, pct(ce) - left);
    var h = '<div class="bar st-' + st + '" data-span="' + esc(r[ID]) + '" data-status="' + st + '" style="left:' + left.toFixed(4) + "%;width:" + width.toFixed(4) + '%">';
    var cd = ce - cs;
    if (cd > 0) {
      if (sess[k] >= 0 && R[sess[k]][START] > s) h += seg("q", s, R[sess[k]][START], cs, cd);
      var sg = segs[k];
      if (sg) {
        for (var m = 0; m < sg.length && m < MAXSEGS; m++) {
          var jr = R[sg[m]];
          h += seg((S[jr[NAME]] === "agent.cleanup" ? "cl" : "tn") + (jr[ST] === 1 ? " err" : ""), jr[START], jr[END], cs, cd);
        }
      }
      var ev = evFirst[k];
      if (ev >= 0) {
        for (var x = 0; x < evCount[k] && x < MAXTICKS; x++) {
          var t = E[ev + x][1];
          if (t >= cs && t <= ce) h += '<i class="evt" style="left:' + ((t - cs) / cd * 100).toFixed(3) + '%"></i>';
        }
      }
    }
    return h + "</div>";
  }
  function rowHTML(k) {
    var r = R[k], st = r[ST], open = size[k] > 1;
    var tw = open ? (keep || !collapsed[k] ? "▾" : "▸") : "";
    var where = attr(k, "aml.source");
    var tip = S[r[LABEL]] + " — " + STATUS_TEXT[st] + " — " + fmtDur(r[DUR]) + (where ? " — " + where : "");
    return '<div class="row st-' + STATUS[st] + (k === sel ? " sel" : "") + '" data-row="' + k + '" role="treeitem" title="' + esc(tip) + '">' +
      '<div class="c-name" style="padding-left:' + (4 + depth[k] * 14) + 'px"><span class="tw">' + tw + "</span>" +
      '<span class="lb' + (isAgent(k) ? " k-agent" : "") + '">' + esc(S[r[LABEL]]) + "</span>" + (r[SUB] ? '<span class="sb">' + esc(S[r[SUB]]) + "</span>" : "") +
      (kids[k] > 1 ? '<span class="nk" title="children">' + group(kids[k]) + "</span>" : "") + "</div>" +
      '<div class="c-dur">' + fmtDur(r[DUR]) + "</div>" +
      '<div class="c-lane">' + barHTML(k) + "</div></div>";
  }
  var pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () { pending = false; render(); });
  }
  function render() {
    var top = vp.scrollTop - axisH, h = vp.clientHeight;
    var first = Math.max(0, Math.floor(top / ROWH) - OVERSCAN);
    var last = Math.min(vis.length, Math.ceil((top + h) / ROWH) + OVERSCAN);
    var out = [];
    for (var k = first; k < last; k++) out.push(rowHTML(vis[k]));
    rowsEl.style.transform = "translateY(" + first * ROWH + "px)";
    rowsEl.innerHTML = out.join("");
  }
  function renderAxis() {
    // About one labelled tick per 90 pixels of the lane.
    var ticks = Math.max(2, Math.floor((ticksEl.clientWidth || 720) / 90));
    var width = w1 - w0, step = niceStep(width / ticks), h = "", g = "";
    for (var u = Math.ceil((w0 - LO) / step - 1e-9) * step, n = 0; LO + u <= w1 + step * 1e-6 && n < 40; u += step, n++) {
      var x = pct(LO + u), cls = x < 4 ? "tick first" : x > 96 ? "tick last" : "tick";
      if (x <= 97) h += '<span class="' + cls + '" style="left:' + x.toFixed(3) + '%">' + fmtTick(u, step, width) + "</span>";
      g += '<span class="gline" style="left:' + x.toFixed(3) + '%"></span>';
    }
    ticksEl.innerHTML = h;
    glines.innerHTML = g;
    var z = document.getElementById("zlabel");
    z.textContent = w0 === LO && w1 === HI ? "" : "showing " + fmtMs(w1 - w0) + " from +" + fmtMs(Math.max(0, w0 - LO));
  }
  function setWindow(a, b) {
    var full = HI - LO, minW = Math.max(full / 1e6, 1e-3);
    if (b - a < minW) { var c = (a + b) / 2; a = c - minW / 2; b = c + minW / 2; }
    if (b - a >= full) { a = LO; b = HI; } else {
      if (a < LO) { b += LO - a; a = LO; }
      if (b > HI) { a -= b - HI; b = HI; }
    }
    w0 = a; w1 = b;
    renderAxis();
    render();
  }
  function zoom(factor, at) {
    var f = at === undefined ? 0.5 : at, t = w0 + f * (w1 - w0), w = (w1 - w0) * factor;
    setWindow(t - f * w, t + (1 - f) * w);
  }

  // ---- filtering ----
  function haystack(k) {
    if (!hay) hay = [];
    var v = hay[k];
    if (v === undefined) {
      var r = R[k];
      v = hay[k] = (S[r[LABEL]] + " " + S[r[SUB]] + " " + S[r[KIND]] + " " + S[r[NAME]] + " " + (attr(k, "aml.source") || "") + " #" + r[ID] + " " + STATUS_TEXT[r[ST]]).toLowerCase();
    }
    return v;
  }
  function applyFilter() {
    if (!query && !errorsOnly) {
      keep = null;
      document.getElementById("fstat").textContent = "";
    } else {
      keep = new Uint8Array(N);
      matches = 0;
      for (var k = N - 1; k >= 0; k--) {
        if ((!errorsOnly || R[k][ST] === 1) && (!query || haystack(k).indexOf(query) >= 0)) { keep[k] = 1; matches++; }
        if (keep[k] && par[k] >= 0) keep[par[k]] = 1;
      }
      document.getElementById("fstat").textContent = plural(matches, "matching span", "matching spans");
    }
    computeVisible();
    render();
  }

  // ---- selection and details ----
  function position(k) {
    var a = 0, b = vis.length - 1;
    while (a <= b) {
      var m = (a + b) >> 1;
      if (vis[m] === k) return m;
      if (vis[m] < k) a = m + 1; else b = m - 1;
    }
    return -1;
  }
  function scrollToRow(k, center) {
    var pos = position(k);
    if (pos < 0) return;
    var y = axisH + pos * ROWH, h = vp.clientHeight;
    if (center) vp.scrollTop = Math.max(0, y - h / 2);
    else if (y - axisH < vp.scrollTop) vp.scrollTop = y - axisH;
    else if (y + ROWH > vp.scrollTop + h) vp.scrollTop = y + ROWH - h;
  }
  function reveal(k) {
    if (keep && !keep[k]) {
      query = ""; errorsOnly = false;
      document.getElementById("q").value = "";
      document.getElementById("eonly").checked = false;
      keep = null;
      document.getElementById("fstat").textContent = "";
    }
    for (var a = par[k]; a >= 0; a = par[a]) collapsed[a] = 0;
    computeVisible();
    select(k);
    scrollToRow(k, true);
    render();
    vp.focus({ preventScroll: true });
  }
  function select(k) {
    sel = k;
    render();
    showDetails(k);
  }
  function toggle(k) {
    if (size[k] <= 1 || keep) return;
    collapsed[k] = collapsed[k] ? 0 : 1;
    computeVisible();
    render();
  }
  function kv(k, v) { return "<dt>" + esc(k) + "</dt><dd>" + v + "</dd>"; }
  function usageOf(k) {
    var sums = {}, any = false;
    for (var m = k; m < k + size[k]; m++) {
      if (kind(m) !== "agent" || name(m) !== "agent.turn") continue;
      var u = attr(m, "usage");
      if (typeof u !== "string") continue;
      try {
        var o = JSON.parse(u);
        for (var key in o) if (typeof o[key] === "number") { sums[key] = (sums[key] || 0) + o[key]; any = true; }
      } catch (err) { /* not JSON: shown as an attribute */ }
    }
    if (!any) return "";
    var parts = [];
    for (var key2 in sums) parts.push(esc(TOKEN_NAMES[key2] || key2) + " " + group(sums[key2]));
    return parts.join(" · ");
  }
  function showDetails(k) {
    var r = R[k], st = r[ST], as = attrList(r[ATTRS]);
    var h = '<h3><span class="lb">' + esc(S[r[LABEL]]) + '</span> <span class="badge st-' + STATUS[st] + '">' + STATUS_TEXT[st] + "</span></h3>";
    h += '<dl class="kv">';
    h += kv("kind", esc(kind(k)) + (name(k) ? " · " + esc(name(k)) : ""));
    h += kv("span", "<code>" + esc(r[ID]) + "</code>" + (par[k] >= 0 ? " in <code>" + esc(R[par[k]][ID]) + "</code> " + esc(S[R[par[k]][LABEL]]) : ""));
    var where = attr(k, "aml.source");
    if (where) h += kv("source", "<code>" + esc(where) + "</code>");
    h += kv("start", "+" + fmtMs(Math.max(0, r[START] - LO)) + ' <span class="muted">' + esc(clock(r[START])) + "</span>");
    h += kv("duration", r[DUR] >= 0 ? fmtDur(r[DUR]) : "unfinished (no span.end in the trace)");
    if (sess[k] >= 0) h += kv("queue wait", fmtMs(Math.max(0, R[sess[k]][START] - r[START])) + ' <span class="muted">before the session started</span>');
    var u = usageOf(k);
    if (u) h += kv("tokens", u);
    if (size[k] > 1) {
      var bad = 0, open = 0;
      for (var m = k + 1; m < k + size[k]; m++) { if (R[m][ST] === 1) bad++; else if (R[m][ST] === 2) open++; }
      h += kv("below", plural(kids[k], "child", "children") + ", " + plural(size[k] - 1, "span", "spans") + " in all" + (bad ? ", " + group(bad) + " failed" : "") + (open ? ", " + group(open) + " unfinished" : ""));
    }
    h += "</dl>";
    h += '<div class="btns"><button type="button" data-act="zoom">Zoom to span</button>' + (par[k] >= 0 ? '<button type="button" data-act="parent">Parent</button>' : "") + "</div>";
    if (st === 1) {
      var et = attr(k, "error.type"), em = attr(k, "error.message");
      h += '<div class="err-box"><div class="err-type">' + esc(et || "error") + "</div>" +
        (em !== undefined ? '<pre class="err-msg">' + esc(textOf(em)) + "</pre>" : '<div class="err-note">message not captured</div>') + "</div>";
    }
    var plain = "", content = "";
    for (var a = 0; a < as.length; a++) {
      var key = as[a][0], val = as[a][1];
      if (CONTENT[key]) {
        var body = Array.isArray(val) ? val.map(function (x, n) { return '<div class="muted">' + (n + 1) + "</div><pre>" + esc(textOf(x)) + "</pre>"; }).join("") : "<pre>" + esc(textOf(val)) + "</pre>";
        content += "<details open><summary>" + esc(key) + "</summary>" + body + "</details>";
      } else {
        plain += kv(key, "<code>" + esc(textOf(val)) + "</code>");
      }
    }
    h += "<h4>Attributes</h4>" + (plain ? '<dl class="kv">' + plain + "</dl>" : '<p class="muted">none</p>');
    if (content) h += "<h4>Content</h4>" + content;
    if (evCount[k]) {
      h += "<h4>Events (" + group(evCount[k]) + ")</h4><ul class=\"evl\">";
      for (var x = 0; x < evCount[k] && x < MAXEVENTS; x++) {
        var ev = E[evFirst[k] + x], eas = attrList(ev[3]), parts = [];
        for (var y = 0; y < eas.length; y++) {
          parts.push(CONTENT[eas[y][0]] ? "<details><summary>" + esc(eas[y][0]) + "</summary><pre>" + esc(textOf(eas[y][1])) + "</pre></details>"
            : esc(eas[y][0]) + "=<code>" + esc(textOf(eas[y][1])) + "</code>");
        }
        h += '<li><span class="muted">+' + fmtMs(Math.max(0, ev[1] - LO)) + "</span> <b>" + esc(S[ev[2]]) + "</b> " + parts.join(" ") + "</li>";
      }
      if (evCount[k] > MAXEVENTS) h += '<li class="muted">' + group(evCount[k] - MAXEVENTS) + " more events</li>";
      h += "</ul>";
    }
    details.innerHTML = h;
    details.setAttribute("data-row", String(k));
  }

  // ---- events ----
  vp.addEventListener("scroll", schedule, { passive: true });
  window.addEventListener("resize", function () { renderAxis(); schedule(); });
  rowsEl.addEventListener("click", function (ev) {
    var rowEl = ev.target.closest(".row");
    if (!rowEl) return;
    var k = +rowEl.getAttribute("data-row");
    if (ev.target.closest(".tw")) { toggle(k); return; }
    select(k);
  });
  rowsEl.addEventListener("dblclick", function (ev) {
    var rowEl = ev.target.closest(".row");
    if (!rowEl) return;
    var k = +rowEl.getAttribute("data-row");
    if (!ev.target.closest(".c-lane")) { toggle(k); return; }
    zoomTo(k);
  });
  function zoomTo(k) {
    var s = R[k][START], e = R[k][END], m = Math.max((e - s) * 0.05, 1e-3);
    setWindow(s - m, e + m);
  }
  details.addEventListener("click", function (ev) {
    var b = ev.target.closest("button");
    if (!b) return;
    var k = +details.getAttribute("data-row");
    if (b.getAttribute("data-act") === "zoom") zoomTo(k);
    else if (b.getAttribute("data-act") === "parent" && par[k] >= 0) reveal(par[k]);
  });
  var spendEl = document.getElementById("spend");
  if (spendEl) {
    spendEl.addEventListener("click", function (ev) {
      var th = ev.target.closest("th");
      if (th) {
        var col = +th.getAttribute("data-col");
        spendDesc = col === spendSort ? !spendDesc : col !== 0;
        spendSort = col;
        document.getElementById("spendtab").innerHTML = spendTable();
        return;
      }
      var tr = ev.target.closest("tr[data-row]");
      if (tr) reveal(+tr.getAttribute("data-row"));
    });
  }
  var errSection = document.getElementById("errors");
  if (errSection) {
    errSection.addEventListener("click", function (ev) {
      var more = ev.target.closest("#errmore");
      if (more) {
        document.getElementById("errlist").insertAdjacentHTML("beforeend", errorItems(ERRPAGE, F.length));
        more.parentNode.removeChild(more);
        return;
      }
      var item = ev.target.closest(".err-item");
      if (item) reveal(+item.getAttribute("data-row"));
    });
  }
  vp.addEventListener("wheel", function (ev) {
    var lane = ticksEl.getBoundingClientRect();
    if (ev.ctrlKey || ev.metaKey) {
      ev.preventDefault();
      var f = Math.min(1, Math.max(0, (ev.clientX - lane.left) / lane.width));
      zoom(ev.deltaY > 0 ? 1.25 : 0.8, f);
    } else if (ev.shiftKey && (w1 - w0) < (HI - LO)) {
      ev.preventDefault();
      var dt = (ev.deltaY || ev.deltaX) / lane.width * (w1 - w0);
      setWindow(w0 + dt, w1 + dt);
    }
  }, { passive: false });
  vp.addEventListener("keydown", function (ev) {
    if (!vis.length) return;
    var pos = sel >= 0 ? position(sel) : -1, k = -1;
    switch (ev.key) {
      case "ArrowDown": k = vis[Math.min(vis.length - 1, pos + 1)]; break;
      case "ArrowUp": k = vis[Math.max(0, pos - 1)]; break;
      case "ArrowRight":
        if (sel >= 0 && size[sel] > 1 && collapsed[sel] && !keep) { toggle(sel); ev.preventDefault(); return; }
        k = pos >= 0 ? vis[Math.min(vis.length - 1, pos + 1)] : vis[0];
        break;
      case "ArrowLeft":
        if (sel >= 0 && size[sel] > 1 && !collapsed[sel] && !keep) { toggle(sel); ev.preventDefault(); return; }
        k = sel >= 0 && par[sel] >= 0 ? par[sel] : sel;
        break;
      case "Enter": if (sel >= 0) toggle(sel); ev.preventDefault(); return;
      default: return;
    }
    ev.preventDefault();
    if (k >= 0) { select(k); scrollToRow(k, false); render(); }
  });
  var qTimer = 0;
  document.getElementById("q").addEventListener("input", function (ev) {
    clearTimeout(qTimer);
    var v = ev.target.value;
    qTimer = setTimeout(function () { query = v.trim().toLowerCase(); applyFilter(); }, 120);
  });
  document.getElementById("eonly").addEventListener("change", function (ev) { errorsOnly = ev.target.checked; applyFilter(); });
  document.getElementById("expand").addEventListener("click", function () { collapsed.fill(0); computeVisible(); render(); });
  document.getElementById("collapse").addEventListener("click", function () {
    for (var k = 0; k < N; k++) collapsed[k] = size[k] > 1 && par[k] >= 0 ? 1 : 0;
    computeVisible();
    render();
  });
  document.getElementById("zin").addEventListener("click", function () { zoom(0.5); });
  document.getElementById("zout").addEventListener("click", function () { zoom(2); });
  document.getElementById("zreset").addEventListener("click", function () { setWindow(LO, HI); });

  computeVisible();
  renderAxis();
  render();
  document.body.setAttribute("data-rows", String(N));
  document.body.dataset.ready = "1";
})();
