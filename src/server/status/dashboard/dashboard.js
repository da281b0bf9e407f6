// The KCoral dashboard (issue 28): follows GET /api/status/stream (the server's status, pushed
// once a second) and draws it; where the stream is not served (HTTPS, or too many viewers) it
// polls GET /api/status instead. No libraries: tables are DOM, charts are SVG drawn here. Text
// from the server is only ever set as textContent or an attribute, never parsed as HTML.
//
// Keys: when the server answers 401 or 403 the page asks for a key, keeps it in this tab's
// sessionStorage and sends it as "Authorization: Bearer <key>"; it is never put in a URL.
//
// Tests drive it through window.kcoralDashboard: stop() ends following, render(status) draws
// any status object (a recorded one, tests/e2e/data/gpu_status_snapshot.json), start() follows
// again. It gives the page nothing the page could not already do.
"use strict";

// A block, not a function: its names stay private to the page's script all the same.
{
  const KEY_STORE = "kcoral.dashboard.key";
  const SVG_NS = "http://www.w3.org/2000/svg";
  // nvmlClocksEventReasons bits (native/clock_events.h).
  const THROTTLE_BITS = [
    [0x1, "gpu idle"], [0x2, "applications clocks setting"], [0x4, "sw power cap"],
    [0x8, "hw slowdown"], [0x10, "sync boost"], [0x20, "sw thermal slowdown"],
    [0x40, "hw thermal slowdown"], [0x80, "hw power brake slowdown"],
    [0x100, "display clock setting"],
  ];
  const PALETTE = ["#c53030", "#dd6b20", "#b7791f", "#805ad5", "#2b6cb0", "#319795", "#d53f8c",
    "#718096"];

  let timer = null;
  let stream = null;  // the stream's AbortController
  let polling = false;
  let lastStatus = null;
  let nextDelay = 1000;
  const openRequests = new Set();

  // --- small DOM helpers -------------------------------------------------------------------

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (name === "class") node.className = value;
      else if (name === "text") node.textContent = value;
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value);
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (name === "text") node.textContent = value;
      else node.setAttribute(name, value);
    }
    for (const child of children) if (child) node.append(child);
    return node;
  }

  function replace(id, ...children) {
    const target = document.getElementById(id);
    target.replaceChildren(...children.filter((c) => c !== null && c !== undefined));
  }

  function table(headers, rows, attrs) {
    const head = el("tr", {}, ...headers.map((h) => {
      const [label, cls] = Array.isArray(h) ? h : [h, ""];
      return el("th", { class: cls, text: label });
    }));
    return el("table", attrs || {}, el("thead", {}, head), el("tbody", {}, ...rows));
  }

  function td(value, cls) {
    return el("td", { class: cls || "" }, value === null || value === undefined ? "–" : value);
  }

  function pill(text, kind) {
    return el("span", { class: "pill " + kind, text: text });
  }

  function fmt(value, digits) {
    if (value === null || value === undefined || Number.isNaN(value)) return "–";
    return Number(value).toFixed(digits === undefined ? 0 : digits);
  }

  function fmtMs(ms) {
    if (ms === null || ms === undefined) return "–";
    if (ms >= 10000) return (ms / 1000).toFixed(1) + " s";
    if (ms >= 100) return ms.toFixed(0) + " ms";
    if (ms >= 1) return ms.toFixed(1) + " ms";
    return (ms * 1000).toFixed(0) + " µs";
  }

  function shortId(id) {
    return id && id.length > 13 ? id.slice(0, 8) + "…" + id.slice(-4) : id || "";
  }

  function clock(unixMs) {
    const d = new Date(unixMs);
    return d.toTimeString().slice(0, 8);
  }

  function throttleNames(mask) {
    if (mask === null || mask === undefined) return null;
    if (mask === 0) return [];
    const names = THROTTLE_BITS.filter(([bit]) => (mask & bit) !== 0).map(([, name]) => name);
    const known = THROTTLE_BITS.reduce((all, [bit]) => all | bit, 0);
    if ((mask & ~known) !== 0) names.push("0x" + (mask & ~known).toString(16));
    return names;
  }

  // --- sections ----------------------------------------------------------------------------

  function renderHeader(status) {
    const server = status.server || {};
    const target = server.target || {};
    const parts = [
      (server.device || "?").toUpperCase() + " server",
      target.arch ? "target " + target.arch : null,
      server.node_url || null,
      "instance " + shortId(server.instance_id || ""),
      "auth " + (server.auth || "?"),
    ].filter(Boolean);
    const viewer = status.viewer || {};
    if (viewer.role === "tenant") parts.push("viewing as tenant " + viewer.tenant);
    else if (viewer.role === "operator") parts.push("viewing as operator");
    if (server.shutting_down) parts.push("SHUTTING DOWN");
    document.getElementById("server-line").textContent = parts.join(" · ");
  }

  function renderGpus(status) {
    const gpus = status.gpus || [];
    if (gpus.length === 0) {
      replace("gpus", el("div", { class: "empty", text: "No GPUs: this is a CPU server." }));
      return;
    }
    const rows = gpus.map((g) => {
      const names = throttleNames(g.clock_event_reasons);
      const throttle = names === null ? "–" : names.length === 0 ? pill("none", "ok")
        : el("span", {}, ...names.map((n) => pill(n, n === "gpu idle" ? "idle" : "warn")));
      const holder = g.lease_holder
        ? el("span", { class: "mono", title: g.lease_holder }, shortId(g.lease_holder),
          el("span", { class: "muted", text: " " + fmt(g.lease_held_seconds, 1) + " s" }))
        : pill("free", "idle");
      return el("tr", { "data-gpu": g.gpu },
        td(el("span", {}, "gpu" + g.gpu, el("br"), el("span", { class: "muted", text: g.name || "" }))),
        td(holder),
        td(g.span_in_progress ? pill("timing", "info") : pill("no", "idle")),
        td(fmt(g.sm_mhz) + " / " + fmt(g.max_sm_mhz), "num"),
        td(fmt(g.mem_mhz) + " / " + fmt(g.max_mem_mhz), "num"),
        td(g.temp_c === null || g.temp_c === undefined ? "–" : fmt(g.temp_c) + " °C", "num"),
        td(g.power_w === null || g.power_w === undefined ? "–" : fmt(g.power_w) + " W", "num"),
        td(fmt((g.duty_last_60s || 0) * 100, 1) + " %", "num"),
        td(throttle),
        g.error ? td(el("span", { class: "muted", text: g.error })) : null);
    });
    replace("gpus", table(["GPU", "Lease holder", "Span", ["SM MHz (max)", "num"],
      ["Mem MHz (max)", "num"], ["Temp", "num"], ["Power", "num"], ["Duty 60 s", "num"],
      "Throttle reasons"], rows));
  }

  function renderWorkers(status) {
    const devices = status.devices || [];
    if (devices.length === 0) {
      replace("workers", el("div", { class: "empty", text: "No devices reported." }));
      return;
    }
    const rows = devices.map((d) => el("tr", { "data-device": d.name },
      td(d.name, "mono"), td(d.seats, "num"), td(d.busy, "num"), td(d.standby, "num"),
      td(d.preparing, "num"), td(d.retiring, "num")));
    replace("workers", table(["Device", ["Seats", "num"], ["Busy", "num"], ["Stand-by", "num"],
      ["Preparing", "num"], ["Retiring", "num"]], rows));
  }

  function renderQueue(status) {
    const q = status.queue || {};
    const stats = el("div", { class: "stats" },
      el("div", {}, el("span", { text: "waiting" }), el("b", { class: "big", id: "queue-waiting", text: fmt(q.waiting) })),
      el("div", {}, el("span", { text: "running" }), el("b", { class: "big", text: fmt(q.in_progress) })),
      el("div", {}, el("span", { text: "seats" }), el("b", { class: "big", text: fmt(q.capacity) })));
    const byTenant = q.by_tenant || {};
    const tenants = Object.keys(byTenant).sort();
    const rows = tenants.map((t) => {
      const entry = byTenant[t];
      // {in_flight, waiting}: requests admitted and not answered, and of those, waiting for a seat.
      const waiting = typeof entry === "object" && entry !== null ? entry.waiting : null;
      const inFlight = typeof entry === "object" && entry !== null ? entry.in_flight : entry;
      return el("tr", { "data-tenant": t }, td(t === "" ? "(no keys)" : t),
        td(fmt(inFlight), "num"), td(fmt(waiting), "num"));
    });
    replace("queue", stats, tenants.length === 0
      ? el("div", { class: "empty", text: "Nothing in flight." })
      : table(["Tenant", ["In flight", "num"], ["Waiting", "num"]], rows));
  }

  function renderCluster(status) {
    const cluster = status.cluster;
    const card = document.getElementById("cluster-card");
    card.hidden = !cluster;
    if (!cluster) return;
    const nodes = (cluster.nodes || []).map((n) => {
      const pools = n.pools || [];
      const pool = (k) => pools.reduce((sum, p) => sum + (p[k] || 0), 0);
      return el("tr", { "data-node": n.node_id || n.url || "" }, td(n.node_id || "?", "mono"), td(n.url || "", "mono"),
        td(pools.map((p) => p.pool).join(", ")), td(pool("request_capacity"), "num"),
        td(pool("requests_in_progress"), "num"), td(pool("requests_waiting"), "num"),
        td(n.shutting_down ? pill("leaving", "warn") : pill("up", "ok")));
    });
    const pools = (cluster.pools || []).map((p) => el("tr", {}, td(p.pool || "?", "mono"),
      td(Array.isArray(p.nodes) ? String(p.nodes.length) : fmt(p.nodes), "num"),
      td(fmt(p.request_capacity), "num"), td(fmt(p.requests_in_progress), "num"),
      td(fmt(p.requests_waiting), "num")));
    const sync = cluster.broker_sync || {};  // do the brokers sync before they acknowledge?
    replace("cluster",
      el("div", { class: "muted", text: (cluster.connected ? "connected to " : "NOT connected to ")
        + (cluster.connected_url || (cluster.servers || []).join(", ")) }),
      sync.warning ? el("div", { id: "broker-sync" }, pill("brokers: " + sync.state, "warn"),
        el("span", { class: "muted", text: " " + sync.message })) : null,
      table(["Node", "URL", "Pools", ["Seats", "num"], ["Running", "num"], ["Waiting", "num"], "State"], nodes),
      pools.length ? table(["Pool", ["Nodes", "num"], ["Seats", "num"], ["Running", "num"], ["Waiting", "num"]], pools) : null);
  }

  // --- charts ------------------------------------------------------------------------------

  const W = 360, H = 150, PAD_L = 34, PAD_B = 16, PAD_T = 6, PAD_R = 4;

  function niceMax(value) {
    if (!(value > 0)) return 1;
    const exp = Math.pow(10, Math.floor(Math.log10(value)));
    for (const m of [1, 2, 2.5, 5, 10]) if (value <= m * exp) return m * exp;
    return 10 * exp;
  }

  function axes(chart, max, points, unit) {
    const plotH = H - PAD_B - PAD_T;
    for (const frac of [0, 0.5, 1]) {
      const y = PAD_T + plotH * (1 - frac);
      chart.append(svg("line", { x1: PAD_L, x2: W - PAD_R, y1: y, y2: y, stroke: "#e5e9ee" }));
      const v = max * frac;
      chart.append(svg("text", { x: PAD_L - 4, y: y + 3, "text-anchor": "end",
        text: (v >= 100 || v === 0 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)) + (unit || "") }));
    }
    const n = points.length;
    const plotW = W - PAD_L - PAD_R;
    for (const minutes of [60, 45, 30, 15, 0]) {
      const x = PAD_L + plotW * (1 - minutes / 60);
      chart.append(svg("text", { x: Math.min(x, W - 14), y: H - 3, "text-anchor": "middle",
        text: minutes === 0 ? "now" : "-" + minutes + "m" }));
    }
    return { plotH, plotW, n };
  }

  function barChart(name, points, series, unit) {
    // series: [{key, color, value(point)}], stacked.
    const chart = svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, "data-chart": name });
    const totals = points.map((p) => series.reduce((sum, s) => sum + s.value(p), 0));
    const max = niceMax(Math.max(0, ...totals));
    const { plotH, plotW, n } = axes(chart, max, points, unit);
    const bw = plotW / Math.max(n, 1);
    points.forEach((p, i) => {
      let y = PAD_T + plotH;
      for (const s of series) {
        const v = s.value(p);
        if (!(v > 0)) continue;
        const h = (v / max) * plotH;
        y -= h;
        chart.append(svg("rect", { x: PAD_L + i * bw, y: y, width: Math.max(bw - 0.3, 1.5), height: h,
          fill: s.color, "data-t": p.t, "data-series": s.key, "data-value": v,
          "data-count": s.count ? s.count(p) : v },
        svg("title", { text: `${clock(p.t)}  ${s.key}: ${+v.toFixed(3)}${unit || ""}` })));
      }
    });
    return chart;
  }

  function lineChart(name, points, series, unit) {
    const chart = svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, "data-chart": name });
    const all = points.flatMap((p) => series.map((s) => s.value(p)).filter((v) => v !== null));
    const max = niceMax(Math.max(0, ...all));
    const { plotH, plotW, n } = axes(chart, max, points, unit);
    const bw = plotW / Math.max(n, 1);
    for (const s of series) {
      const at = points.map((p, i) => {
        const v = s.value(p);
        return v === null ? null : [PAD_L + (i + 0.5) * bw, PAD_T + plotH * (1 - v / max), v, p];
      });
      let d = "", pen = "M";
      for (const a of at) {
        if (a === null) { pen = "M"; continue; }
        d += pen + a[0].toFixed(1) + "," + a[1].toFixed(1) + " ";
        pen = "L";
      }
      chart.append(svg("path", { d: d.trim(), fill: "none", stroke: s.color, "stroke-width": 1.5,
        "vector-effect": "non-scaling-stroke" }));
      for (const a of at) {
        if (a === null) continue;
        chart.append(svg("circle", { cx: a[0], cy: a[1], r: 1.6, fill: s.color, "data-t": a[3].t,
          "data-series": s.key, "data-value": a[2] },
        svg("title", { text: `${clock(a[3].t)}  ${s.key}: ${+a[2].toFixed(3)}${unit || ""}` })));
      }
    }
    return chart;
  }

  function legend(items) {
    return el("div", { class: "legend" }, ...items.map(([label, color]) => {
      const swatch = el("i");
      swatch.style.background = color;
      return el("span", {}, swatch, label);
    }));
  }

  // The server sends only the intervals with something in them, and where the hour starts.
  function hourOf(history, step) {
    const sent = history.points || [];
    if (!history.first_t || !history.intervals) return sent;
    const byT = new Map(sent.map((p) => [p.t, p]));
    const hour = [];
    for (let k = 0; k < history.intervals; k++) {
      const t = history.first_t + k * step * 1000;
      hour.push(byT.get(t) || { t, requests: 0, errors: {}, p50_ms: 0, p99_ms: 0,
        lease_held_seconds: 0, span_seconds: 0 });
    }
    return hour;
  }

  function renderCharts(status) {
    const history = status.history || { points: [], step_seconds: 10, gpu_count: 0 };
    const step = history.step_seconds || 10;
    const points = hourOf(history, step);
    const gpus = history.gpu_count || 0;
    document.getElementById("charts-step").textContent =
      `(${step} s intervals; ${points.reduce((s, p) => s + p.requests, 0)} requests)`;
    replace("chart-requests", barChart("requests", points,
      [{ key: "requests/s", color: "#2b6cb0", value: (p) => p.requests / step, count: (p) => p.requests }], ""));

    // Duty (pool/duty_meter.h): timing-span seconds per wall second per GPU; beside it the
    // lease-held fraction, labelled as such.
    const caption = document.getElementById("gpu-time-caption");
    if (gpus > 0) {
      caption.textContent = "Duty and lease-held fraction (per GPU)";
      replace("chart-gpu-time",
        lineChart("gpu-time", points, [
          { key: "lease-held fraction", color: "#805ad5", value: (p) => p.lease_held_seconds / (step * gpus) },
          { key: "duty (timing spans)", color: "#dd6b20", value: (p) => p.span_seconds / (step * gpus) },
        ], ""),
        legend([["lease-held fraction", "#805ad5"], ["duty (timing spans)", "#dd6b20"]]));
    } else {
      caption.textContent = "Lease-held fraction";
      replace("chart-gpu-time", el("div", { class: "empty", text: "No GPUs: nothing holds a lease on a CPU server." }));
    }

    replace("chart-latency",
      lineChart("latency", points, [
        { key: "p50", color: "#2b6cb0", value: (p) => (p.requests ? p.p50_ms : null) },
        { key: "p99", color: "#c53030", value: (p) => (p.requests ? p.p99_ms : null) },
      ], ""),
      legend([["p50", "#2b6cb0"], ["p99", "#c53030"]]));

    const kinds = [...new Set(points.flatMap((p) => Object.keys(p.errors || {})))].sort();
    const colors = Object.fromEntries(kinds.map((k, i) => [k, PALETTE[i % PALETTE.length]]));
    replace("chart-errors",
      barChart("errors", points, kinds.map((k) => ({ key: k, color: colors[k],
        value: (p) => (p.errors || {})[k] || 0 })), ""),
      kinds.length ? legend(kinds.map((k) => [k, colors[k]])) : el("div", { class: "legend", text: "no errors" }));
  }

  // --- requests ----------------------------------------------------------------------------

  function outcomePill(r) {
    const reason = r.finish_reason || String(r.http_status);
    if (reason === "completed") return pill("completed", "ok");
    if (reason === "program_failed" || reason === "cache_miss") return pill(reason, "warn");
    return pill(reason, "bad");
  }

  function integrityPill(verdict) {
    if (!verdict) return el("span", { class: "muted", text: "–" });
    return pill(verdict, verdict === "trusted" ? "ok" : verdict === "flagged" ? "warn" : "bad");
  }

  function timeline(r) {
    const steps = r.timeline || [];
    if (steps.length === 0) {
      return el("div", { class: "empty", text: "No instruction timeline: the request did not run on a worker here." });
    }
    const total = steps.reduce((s, t) => s + t.ms, 0) || 1;
    const rowH = 18, labelW = 170, width = 900;
    const chart = svg("svg", { class: "timeline", width: "100%", height: steps.length * rowH + 20,
      viewBox: `0 0 ${width} ${steps.length * rowH + 20}`, "data-request": r.request_id });
    let start = 0;
    steps.forEach((t, i) => {
      const y = i * rowH + 2;
      const scale = (width - labelW - 90) / total;
      chart.append(svg("text", { x: 0, y: y + 12, "font-size": 11, fill: "#4a5868",
        text: `#${t.index} ${t.op || "?"}${t.id ? " " + t.id : ""}`.slice(0, 28) }));
      const x = labelW + start * scale;
      if (t.lease_wait_ms > 0) {
        chart.append(svg("rect", { x: x, y: y, width: Math.max(t.lease_wait_ms * scale, 1), height: rowH - 5,
          fill: "#e2d9f3" }, svg("title", { text: `waited ${fmtMs(t.lease_wait_ms)} for the GPU lease` })));
      }
      chart.append(svg("rect", { x: x + t.lease_wait_ms * scale, y: y,
        width: Math.max((t.ms - t.lease_wait_ms) * scale, 1.5), height: rowH - 5,
        fill: t.leased ? "#805ad5" : "#2b6cb0", "data-step": t.index },
      svg("title", { text: `${t.op} ${t.id}: ${fmtMs(t.ms)}${t.leased ? " (held the lease)" : ""}` })));
      chart.append(svg("text", { x: x + Math.max(t.ms * scale, 1.5) + 4, y: y + 12, "font-size": 11,
        fill: "#66727f", text: fmtMs(t.ms) }));
      start += t.ms;
    });
    return el("div", {}, chart, legend([["instruction", "#2b6cb0"], ["holding the GPU lease", "#805ad5"],
      ["waiting for the lease", "#e2d9f3"]]),
    el("div", { class: "muted", text: [`worker ${r.worker_id || "?"}`, `queued ${fmtMs(r.queue_ms)}`,
      r.lease_held_ms ? `lease held ${fmtMs(r.lease_held_ms)}` : null,
      r.lease_wait_ms ? `waited ${fmtMs(r.lease_wait_ms)} for the lease` : null,
      r.span_held_ms ? `timing spans ${fmtMs(r.span_held_ms)}` : null,
      `total ${fmtMs(r.total_ms)}`].filter(Boolean).join(" · ") }),
    r.error_message ? el("div", { class: "muted", text: "error: " + r.error_message }) : null);
  }

  function renderRequests(status) {
    const requests = (status.requests || []).slice().reverse();  // newest first
    document.getElementById("requests-count").textContent =
      `(${requests.length} shown of ${status.requests_finished === undefined ? "?" : status.requests_finished} finished)`;
    if (requests.length === 0) {
      replace("requests", el("div", { class: "empty", text: "No requests yet." }));
      return;
    }
    const rows = [];
    for (const r of requests) {
      const open = openRequests.has(r.request_id);
      const toggle = () => {
        if (openRequests.has(r.request_id)) openRequests.delete(r.request_id);
        else openRequests.add(r.request_id);
        if (lastStatus) renderRequests(lastStatus);
      };
      rows.push(el("tr", { class: "request" + (open ? " open" : ""), "data-request-id": r.request_id,
        "data-error-kind": r.error_kind || "", onclick: toggle },
      td(clock(r.finished_unix_ms), "mono"),
      td(el("span", { class: "mono", title: r.request_id, text: shortId(r.request_id) })),
      td(r.tenant === "" ? "–" : r.tenant),
      td(outcomePill(r)),
      td(r.error_kind ? el("span", { class: "mono", text: r.error_kind }) : "–"),
      td(el("span", { class: "error-text", title: r.error_message || "", text: r.error_message || "" })),
      td(fmtMs(r.total_ms), "num"),
      td(r.lease_held_ms > 0 ? fmtMs(r.lease_held_ms) : "–", "num"),
      td(integrityPill(r.integrity))));
      if (open) rows.push(el("tr", { class: "timeline" }, el("td", { colspan: 9 }, timeline(r))));
    }
    replace("requests", table(["Finished", "Request", "Tenant", "Outcome", "Error kind", "Message",
      ["Total", "num"], ["Lease held", "num"], "Integrity"], rows, { id: "requests-table" }));
  }

  // --- polling and keys --------------------------------------------------------------------

  // Requests arrive with their empty members left out and each timeline step as an array in
  // the order of status.timeline_fields (a recorded status may hold objects: both are read).
  function normalise(status) {
    const fields = status.timeline_fields || ["index", "op", "id", "ms", "lease_wait_ms", "leased"];
    status.requests = (status.requests || []).map((r) => ({
      tenant: "", error_kind: "", error_message: "", integrity: "", worker_id: "",
      queue_ms: 0, lease_wait_ms: 0, lease_held_ms: 0, span_held_ms: 0, ...r,
      timeline: (r.timeline || []).map((step) => (Array.isArray(step)
        ? Object.fromEntries(fields.map((name, k) => [name, step[k]])) : step)),
    }));
    return status;
  }

  function render(status) {
    status = normalise(status);
    lastStatus = status;
    renderHeader(status);
    renderGpus(status);
    renderWorkers(status);
    renderQueue(status);
    renderCluster(status);
    renderCharts(status);
    renderRequests(status);
    document.body.setAttribute("data-generated", String(status.generated_unix_ms || 0));
    document.getElementById("freshness").textContent =
      (polling ? "live · " : "saved status · ") + "as of " + clock(status.generated_unix_ms || Date.now());
    document.body.setAttribute("data-snapshot-builds", String(status.snapshot_builds || 0));
  }

  function askForKey(reason) {
    document.getElementById("board").hidden = true;
    document.getElementById("key-form").hidden = false;
    document.getElementById("key-reason").textContent = reason;
    document.getElementById("key-input").focus();
  }

  function show(status, key) {
    document.getElementById("board").hidden = false;
    document.getElementById("key-form").hidden = true;
    document.getElementById("key-button").hidden = !key;
    render(status);
  }

  function refused(response, key) {
    if (response.status !== 401 && response.status !== 403) return false;
    askForKey(key ? "The server refused this key (" + response.status + "). Enter another."
      : "This server needs an API key to show its status.");
    return true;  // following resumes when a key is given
  }

  // The stream: one "data: <status>" event per build. fetch(), not EventSource, so that the key
  // goes in a header.
  async function follow() {
    if (!polling) return;
    const key = sessionStorage.getItem(KEY_STORE);
    const mine = new AbortController();  // stop() aborts it; a later start() makes another
    stream = mine;
    try {
      const response = await fetch("/api/status/stream", { cache: "no-store", credentials: "omit",
        headers: key ? { Authorization: "Bearer " + key } : {}, signal: mine.signal });
      if (refused(response, key)) return;
      if (!response.ok || response.body === null) {  // 501 over HTTPS, 503 when full
        poll();
        return;
      }
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let pending = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        pending += value;
        for (let cut = pending.indexOf("\n\n"); cut >= 0; cut = pending.indexOf("\n\n")) {
          const event = pending.slice(0, cut);
          pending = pending.slice(cut + 2);
          if (!event.startsWith("data: ") || mine.signal.aborted) continue;
          show(JSON.parse(event.slice(6)), key);
        }
      }
    } catch (e) {
      if (mine.signal.aborted) return;  // stopped
      document.getElementById("freshness").textContent = "cannot reach the server (" + e.message + ")";
    }
    // The stream ended (the server stopped, or its keys were reloaded): follow it again.
    if (!mine.signal.aborted) timer = setTimeout(follow, 1000);
  }

  async function poll() {
    if (!polling) return;
    const key = sessionStorage.getItem(KEY_STORE);
    nextDelay = 1000;
    try {
      const response = await fetch("/api/status", { cache: "no-store", credentials: "omit",
        headers: key ? { Authorization: "Bearer " + key } : {} });
      if (refused(response, key)) return;
      if (!response.ok) throw new Error("HTTP " + response.status);
      // Come back just after the server's next snapshot (it builds one a second for everyone).
      const age = Number(response.headers.get("X-KCoral-Snapshot-Age-Ms"));
      const every = Number(response.headers.get("X-KCoral-Snapshot-Every-Ms")) || 1000;
      nextDelay = Number.isFinite(age) ? Math.min(Math.max(every - age + 30, 250), every + 30) : 1000;
      const status = await response.json();
      if (polling) show(status, key);
    } catch (e) {
      document.getElementById("freshness").textContent = "cannot reach the server (" + e.message + ")";
    }
    if (polling) timer = setTimeout(poll, nextDelay);
  }

  function start() {
    stop();
    polling = true;
    follow();
  }

  function stop() {
    polling = false;
    if (timer) clearTimeout(timer);
    timer = null;
    if (stream) stream.abort();
    stream = null;
  }

  document.addEventListener("DOMContentLoaded", () => {
    document.getElementById("key-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const input = document.getElementById("key-input");
      if (input.value.trim()) sessionStorage.setItem(KEY_STORE, input.value.trim());
      input.value = "";
      start();
    });
    document.getElementById("key-button").addEventListener("click", () => {
      sessionStorage.removeItem(KEY_STORE);
      stop();
      askForKey("Enter another API key.");
    });
    start();
  });

  window.kcoralDashboard = { start, stop, render };
}
