// The elrun dashboard's script: polls /api/job every second (the JSON of
// docs/DASHBOARD.md) and redraws the cards, the world-size timeline (SVG
// drawn here), the members and workers tables and the event list.  Text
// from the job goes through textContent only.
"use strict";
(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const MARKED = ["join", "death", "leave", "failure", "restart", "recovery"];
  const $ = (id) => document.getElementById(id);
  const set = (id, v) => { $(id).textContent = v; };
  const el = (tag, attrs, text) => {
    const e = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const clock = (ms) => new Date(ms).toLocaleTimeString([], { hour12: false });
  const fmt = (v, d) => (v === null || v === undefined ? "\u2013" : Number(v).toFixed(d));

  function cards(j) {
    set("run-id", j.job.run_id);
    set("node", j.job.node);
    set("state", j.state);
    set("round", j.round < 0 ? "\u2013" : j.round);
    set("world-nodes", j.nodes);
    set("nodes-range", j.job.min_nodes === null ? "" : "of " + j.job.min_nodes + ":" + j.job.max_nodes);
    set("world-workers", j.world);
    set("restarts", j.restarts);
    set("restarts-left", j.restarts_left === null ? "" : j.restarts_left + " left");
    set("members-round", j.round < 0 ? "\u2013" : j.round);
    const rates = j.workers.map((w) => w.steps_per_second).filter((r) => r !== null);
    set("step-rate", rates.length ? fmt(rates.reduce((a, b) => a + b, 0) / rates.length, 1) : "\u2013");
    const losses = j.workers.map((w) => w.loss).filter((l) => l !== null);
    set("loss", losses.length ? fmt(losses[0], 4) : "\u2013");
  }

  function tables(j) {
    const mb = $("members").tBodies[0];
    mb.replaceChildren(...j.members.map((m) => {
      const tr = el("tr", { "data-id": m.id, class: m.self ? "self" : "" });
      tr.append(el("td", {}, m.node_rank), el("td", {}, m.label || m.host), el("td", { class: "id" }, m.id),
        el("td", {}, m.workers), el("td", {}, clock(m.since_ms)));
      return tr;
    }));
    if (!j.members.length && j.nodes > 0) {
      const tr = el("tr", {});
      tr.append(el("td", { colspan: 5, class: "note" }, j.nodes + " node(s); this rendezvous backend does not list them"));
      mb.replaceChildren(tr);
    }
    const wb = $("workers").tBodies[0];
    wb.replaceChildren(...j.workers.map((w) => {
      const tr = el("tr", { "data-rank": w.rank });
      tr.append(el("td", {}, w.rank), el("td", {}, w.local_rank), el("td", {}, w.state), el("td", {}, w.step),
        el("td", {}, fmt(w.steps_per_second, 1)), el("td", {}, fmt(w.loss, 4)));
      return tr;
    }));
  }

  function events(j) {
    const ol = $("events");
    ol.replaceChildren(...j.events.slice().reverse().map((e) => {
      const li = el("li", { "data-kind": e.kind, "data-round": e.round });
      li.append(el("span", { class: "t" }, clock(e.t_ms)), el("span", { class: "k k-" + e.kind }, e.kind),
        document.createTextNode(e.text));
      return li;
    }));
  }

  function timeline(j) {
    const svg = $("timeline");
    const W = 900, H = 220, L = 34, R = 10, T = 10, B = 22;
    const pts = j.timeline;
    const t0 = pts.length ? Math.min(pts[0].t_ms, j.started_ms) : j.started_ms;
    const t1 = Math.max(j.now_ms, t0 + 1000);
    const ymax = Math.max(1, (j.job.max_nodes || 0) * (j.job.nproc_per_node || 0), ...pts.map((p) => p.world));
    const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
    const y = (v) => H - B - (v / ymax) * (H - T - B);
    const kids = [];
    const step = Math.max(1, Math.ceil(ymax / 5));
    for (let v = 0; v <= ymax; v += step) {
      kids.push(el("svg:line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
      kids.push(el("svg:text", { class: "axis", x: L - 6, y: y(v) + 3, "text-anchor": "end" }, v));
    }
    kids.push(el("svg:text", { class: "axis", x: L, y: H - 6 }, clock(t0)));
    kids.push(el("svg:text", { class: "axis", x: W - R, y: H - 6, "text-anchor": "end" }, clock(t1)));
    const path = (key) => {
      if (!pts.length) return "";
      let d = "M" + x(pts[0].t_ms) + "," + y(pts[0][key]);
      for (let i = 1; i < pts.length; i++) d += "H" + x(pts[i].t_ms) + "V" + y(pts[i][key]);
      return d + "H" + x(t1);
    };
    kids.push(el("svg:path", { class: "world", d: path("world"), "data-series": "world" }));
    kids.push(el("svg:path", { class: "nodes", d: path("nodes"), "data-series": "nodes" }));
    for (const p of pts)
      kids.push(el("svg:circle", { class: "point", cx: x(p.t_ms), cy: y(p.world), r: 3,
        fill: "var(--world)", "data-world": p.world, "data-nodes": p.nodes, "data-round": p.round }));
    for (const e of j.events) {
      if (!MARKED.includes(e.kind)) continue;
      const g = el("svg:g", { class: "mark mark-" + e.kind, "data-kind": e.kind });
      const col = "var(--" + e.kind + ")";
      g.append(el("svg:line", { x1: x(e.t_ms), x2: x(e.t_ms), y1: T, y2: H - B, stroke: col, "stroke-dasharray": "2 2" }),
        el("svg:circle", { cx: x(e.t_ms), cy: T + 4 + 7 * MARKED.indexOf(e.kind), r: 4, fill: col }),
        el("svg:title", {}, clock(e.t_ms) + " " + e.kind + ": " + e.text));
      kids.push(g);
    }
    svg.replaceChildren(...kids);
  }

  // Loss against time, linear, from the series' min to its max.
  function lossChart(j) {
    const pts = j.loss;
    $("loss-section").hidden = pts.length < 2;
    if (pts.length < 2) return;
    const W = 900, H = 120, L = 44, R = 10, T = 8, B = 8;
    const t0 = pts[0][0], t1 = Math.max(pts[pts.length - 1][0], t0 + 1);
    let lo = Math.min(...pts.map((p) => p[2])), hi = Math.max(...pts.map((p) => p[2]));
    if (hi === lo) hi = lo + 1;
    const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
    const y = (v) => T + (1 - (v - lo) / (hi - lo)) * (H - T - B);
    $("loss-chart").replaceChildren(
      el("svg:polyline", { class: "loss", points: pts.map((p) => x(p[0]) + "," + y(p[2])).join(" ") }),
      el("svg:text", { class: "axis", x: L - 6, y: T + 8, "text-anchor": "end" }, fmt(hi, 3)),
      el("svg:text", { class: "axis", x: L - 6, y: H - B, "text-anchor": "end" }, fmt(lo, 3)));
  }

  async function poll() {
    try {
      const r = await fetch("api/job", { cache: "no-store" });
      if (!r.ok) throw new Error("HTTP " + r.status);
      const j = await r.json();
      cards(j); timeline(j); lossChart(j); tables(j); events(j);
      set("updated", clock(j.now_ms));
      $("conn").className = "conn live"; set("conn", "live");
      document.body.dataset.loaded = "1";
    } catch (err) {
      $("conn").className = "conn down"; set("conn", "disconnected");
    }
    setTimeout(poll, 1000);
  }
  poll();
})();
