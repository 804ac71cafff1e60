// shoal status page: polls /status.json and draws the charts as SVG polylines.
// Hand-written, served by shoal itself; no libraries.
"use strict";
(function () {
  const NS = "http://www.w3.org/2000/svg";
  const H = 180, PAD_L = 48, PAD_B = 18, PAD_T = 8, PAD_R = 8;

  function fmt(n) {
    if (n === null || n === undefined) return "–";
    const a = Math.abs(n);
    if (a >= 1e9) return (n / 1e9).toFixed(1) + "G";
    if (a >= 1e6) return (n / 1e6).toFixed(1) + "M";
    if (a >= 1e4) return (n / 1e3).toFixed(1) + "k";
    if (a >= 100 || Number.isInteger(n)) return Math.round(n).toLocaleString("en");
    return n.toFixed(1);
  }
  function duration(s) {
    if (s === null || s === undefined) return "–";
    if (s < 120) return s + " s";
    if (s < 7200) return Math.round(s / 60) + " min";
    return (s / 3600).toFixed(1) + " h";
  }
  function el(name, attrs, text) {
    const e = document.createElementNS(NS, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function niceMax(v) {
    if (v <= 0) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  // series: [{key, color}]; samples: [{t, ...}]
  function draw(svg, samples, series) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    // One user unit per CSS pixel, so the labels are not stretched.
    const W = Math.max(200, Math.round(svg.getBoundingClientRect().width) || 600);
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    if (samples.length === 0) return;
    const t0 = samples[0].t, t1 = Math.max(samples[samples.length - 1].t, t0 + 1);
    let max = 0;
    for (const s of samples) for (const k of series) max = Math.max(max, s[k.key] || 0);
    max = niceMax(max);
    const x = t => PAD_L + (W - PAD_L - PAD_R) * (t - t0) / (t1 - t0);
    const y = v => PAD_T + (H - PAD_T - PAD_B) * (1 - v / max);
    for (let i = 0; i <= 4; i++) {
      const v = max * i / 4;
      svg.appendChild(el("line", { class: "grid", x1: PAD_L, x2: W - PAD_R, y1: y(v), y2: y(v) }));
      svg.appendChild(el("text", { x: PAD_L - 6, y: y(v) + 3, "text-anchor": "end" }, fmt(v)));
    }
    const span = t1 - t0;
    svg.appendChild(el("text", { x: PAD_L, y: H - 4 }, "-" + duration(span)));
    svg.appendChild(el("text", { x: W - PAD_R, y: H - 4, "text-anchor": "end" }, "now"));
    for (const k of series) {
      const pts = samples.map(s => x(s.t).toFixed(1) + "," + y(s[k.key] || 0).toFixed(1));
      if (pts.length === 1) pts.push((W - PAD_R) + "," + pts[0].split(",")[1]);
      svg.appendChild(el("polyline", { points: pts.join(" "), stroke: k.color, "data-series": k.key }));
    }
  }

  function setText(id, v) { document.getElementById(id).textContent = v; }

  function render(d) {
    const css = getComputedStyle(document.documentElement);
    const c = n => css.getPropertyValue(n).trim();
    setText("version", "v" + d.version);
    setText("uptime", "up " + duration(d.uptime_seconds));
    const t = d.totals;
    setText("t-torrents", fmt(t.torrents));
    setText("t-peers", fmt(t.seeders + t.leechers));
    setText("t-seeders", fmt(t.seeders));
    setText("t-leechers", fmt(t.leechers));
    setText("t-v6", fmt(t.peers_v6));
    setText("t-ws-torrents", fmt(t.ws_torrents));
    setText("t-ws-peers", fmt(t.ws_seeders + t.ws_leechers));
    setText("t-ws-conns", fmt(t.ws_connections));
    const last = d.samples[d.samples.length - 1] || { udp: 0, http: 0, ws: 0 };
    setText("t-rps", fmt(last.udp + last.http + last.ws));
    setText("t-snapshot", d.handover_waiting ? "hand-over" : duration(d.snapshot_age_seconds));
    const cl = d.cluster;
    document.getElementById("tile-cluster").hidden = !cl;
    if (cl) {
      setText("t-cluster", `${fmt(cl.nodes_seen)} · ${duration(cl.lag_seconds)} · ${fmt(cl.errors)}`);
    }
    // The first sample has no rate yet: leave it out of the requests chart.
    draw(document.getElementById("chart-requests"), d.samples.slice(1),
         [{ key: "udp", color: c("--udp") }, { key: "http", color: c("--http") },
          { key: "ws", color: c("--ws") }]);
    draw(document.getElementById("chart-peers"), d.samples,
         [{ key: "seeders", color: c("--seed") }, { key: "leechers", color: c("--leech") }]);
    draw(document.getElementById("chart-torrents"), d.samples,
         [{ key: "torrents", color: c("--torr") }]);
    const body = document.getElementById("top");
    body.textContent = "";
    for (const r of d.top) {
      const tr = document.createElement("tr");
      const h = document.createElement("td");
      const code = document.createElement("code");
      code.textContent = r.info_hash;
      h.appendChild(code);
      tr.appendChild(h);
      for (const k of ["seeders", "leechers", "completed"]) {
        const td = document.createElement("td");
        td.className = "n";
        td.textContent = fmt(r[k]);
        tr.appendChild(td);
      }
      body.appendChild(tr);
    }
    setText("config", d.config);
    document.body.dataset.samples = String(d.samples.length);
  }

  let interval = 5;
  async function poll() {
    try {
      const r = await fetch("/status.json", { cache: "no-store" });
      if (!r.ok) throw new Error("HTTP " + r.status);
      const d = await r.json();
      interval = Math.max(1, d.interval || 5);
      render(d);
      setText("error", "");
    } catch (e) {
      setText("error", "cannot reach shoal: " + e.message);
    }
    setTimeout(poll, interval * 1000);
  }
  poll();
})();
