// Real-browser test of shoal's status page.
//
// Starts the shoal binary (SHOAL_BIN, default ../../target/debug/shoal) on loopback with a
// one-second sample interval, feeds it UDP announces (BEP 15, written by hand below) over
// several torrents while the page is open, loads the page in headless Chromium, checks in
// the DOM that every chart drew lines from real samples, that the top-torrents table and
// the configuration are filled in, and saves a screenshot to docs/status-page.png.
// Exits non-zero on any failure. Talks to 127.0.0.1 only; every loop is bounded.

import { spawn } from "node:child_process";
import dgram from "node:dgram";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const bin = process.env.SHOAL_BIN || path.join(root, "target/debug/shoal");
const screenshot = path.join(root, "docs/status-page.png");

function fail(msg) {
  console.error("FAIL: " + msg);
  process.exitCode = 1;
  throw new Error(msg);
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "shoal-status-"));
const configPath = path.join(dir, "shoal.toml");
fs.writeFileSync(configPath, [
  "workers = 2",
  "[udp]", 'listen = ["127.0.0.1:0"]',
  "[state]", `file = ${JSON.stringify(path.join(dir, "shoal.state"))}`,
  "[admin]", 'listen = ["127.0.0.1:0"]', "sample_interval = 1",
  ""].join("\n"));

const shoal = spawn(bin, ["--config", configPath], { stdio: ["ignore", "pipe", "pipe"] });
let output = "";
shoal.stdout.on("data", d => { output += d; });
shoal.stderr.on("data", d => { output += d; });

async function waitFor(pred, what, ms) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const v = pred();
    if (v) return v;
    await new Promise(r => setTimeout(r, 50));
  }
  fail(`timed out waiting for ${what}; output:\n${output}`);
}

// --- a minimal BEP 15 client -----------------------------------------------------------
const sock = dgram.createSocket("udp4");
const pending = new Map();
sock.on("message", msg => {
  if (msg.length < 8) return;
  const tid = msg.readUInt32BE(4);
  const done = pending.get(tid);
  if (done) { pending.delete(tid); done(msg); }
});
let nextTid = 1;
function request(buf, port) {
  const tid = nextTid++;
  buf.writeUInt32BE(tid, 12);
  return new Promise(resolve => {
    const timer = setTimeout(() => { pending.delete(tid); resolve(null); }, 1000);
    pending.set(tid, msg => { clearTimeout(timer); resolve(msg); });
    sock.send(buf, port, "127.0.0.1");
  });
}
async function connect(port) {
  const b = Buffer.alloc(16);
  b.writeBigUInt64BE(0x41727101980n, 0);
  b.writeUInt32BE(0, 8);
  const r = await request(b, port);
  if (!r || r.readUInt32BE(0) !== 0) fail("no connect reply");
  return r.readBigUInt64BE(8);
}
function announce(port, cid, torrent, peer, seeder) {
  const b = Buffer.alloc(98);
  b.writeBigUInt64BE(cid, 0);
  b.writeUInt32BE(1, 8);
  b.fill(torrent, 16, 36);               // info hash: one byte repeated
  b.writeUInt32BE(peer, 36);             // peer id: the peer's number, then padding
  b.fill(0x2d, 40, 56);
  b.writeBigUInt64BE(seeder ? 0n : 1000n, 64);
  b.writeUInt32BE(seeder ? 1 : 2, 80);   // completed / started
  b.writeInt32BE(10, 92);
  b.writeUInt16BE(1024 + (peer % 60000), 96);
  return request(b, port);
}

let browser, profile;
try {
  const udpLine = await waitFor(() => output.match(/udp:\/\/127\.0\.0\.1:(\d+)/), "the UDP listener", 20000);
  const adminLine = await waitFor(() => output.match(/http:\/\/(127\.0\.0\.1:\d+)\//), "the admin listener", 20000);
  const udpPort = Number(udpLine[1]);
  const admin = "http://" + adminLine[1] + "/";
  const cid = await connect(udpPort);

  // Swarms grow over ~8 s: torrent k gets peers in proportion to k, so the top table has
  // an order, the peer and torrent charts climb and the request rate is not flat.
  let peer = 0, answered = 0;
  const perTorrent = new Map();
  const started = Date.now();
  for (let round = 0; round < 16; round++) {
    const batch = [];
    const torrents = 2 + round;
    for (let k = 1; k <= torrents; k++) {
      // Torrent 4 gets ten extra a round, so the largest swarm is not a tie.
      for (let i = 0; i < k * (1 + round % 4) + (k === 4 ? 10 : 0); i++) {
        peer++;
        batch.push([k, peer]);
        perTorrent.set(k, (perTorrent.get(k) || 0) + 1);
      }
    }
    // At most 32 in flight, so neither socket buffer overflows.
    for (let i = 0; i < batch.length; i += 32) {
      const replies = await Promise.all(batch.slice(i, i + 32)
        .map(([k, p]) => announce(udpPort, cid, k, p, p % 5 === 0)));
      answered += replies.filter(r => r && r.readUInt32BE(0) === 1).length;
    }
    await new Promise(r => setTimeout(r, Math.max(0, started + (round + 1) * 500 - Date.now())));
  }
  if (answered < peer * 0.99) fail(`only ${answered} of ${peer} announces answered`);
  console.log(`announced ${peer} peers (${answered} answered)`);

  // A fresh profile directory (Playwright passes it as --user-data-dir).
  profile = fs.mkdtempSync(path.join(os.tmpdir(), "shoal-chromium-"));
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 1280, height: 1000 },
  });
  const page = browser.pages()[0] || await browser.newPage();
  const requests = [];
  page.on("request", r => requests.push(r.url()));
  const errors = [];
  page.on("pageerror", e => errors.push(String(e)));
  await page.goto(admin, { waitUntil: "load", timeout: 15000 });
  await page.waitForFunction(() => Number(document.body.dataset.samples || 0) >= 8, null, { timeout: 20000 });
  // Keep a little traffic going so the last request-rate samples are not zero.
  for (let i = 0; i < 20; i++) await announce(udpPort, cid, 1, 1_000_000 + i, false);
  await page.waitForTimeout(2200);

  const dom = await page.evaluate(() => {
    const chart = id => [...document.querySelectorAll(`#${id} polyline`)].map(p => ({
      series: p.dataset.series,
      points: p.getAttribute("points").trim().split(/\s+/).map(xy => xy.split(",").map(Number)),
    }));
    return {
      requests: chart("chart-requests"),
      peers: chart("chart-peers"),
      torrents: chart("chart-torrents"),
      top: [...document.querySelectorAll("#top tr")].map(tr => [...tr.children].map(td => td.textContent)),
      config: document.getElementById("config").textContent,
      tiles: {
        torrents: document.getElementById("t-torrents").textContent,
        peers: document.getElementById("t-peers").textContent,
      },
      error: document.getElementById("error").textContent,
    };
  });

  const bottom = 180 - 18; // the charts' baseline (viewBox height minus bottom padding)
  function checkChart(name, lines, series) {
    const got = lines.map(l => l.series).sort().join(",");
    if (got !== [...series].sort().join(",")) fail(`${name}: series ${got}`);
    for (const l of lines) {
      if (l.points.length < 5) fail(`${name}/${l.series}: only ${l.points.length} points`);
      if (l.points.some(([x, y]) => !Number.isFinite(x) || !Number.isFinite(y))) fail(`${name}: bad point`);
    }
  }
  checkChart("requests", dom.requests, ["udp", "http", "ws"]);
  checkChart("peers", dom.peers, ["seeders", "leechers"]);
  checkChart("torrents", dom.torrents, ["torrents"]);
  const above = l => l.points.some(([, y]) => y < bottom - 1);
  if (!above(dom.requests.find(l => l.series === "udp"))) fail("the UDP request rate never rose");
  if (!above(dom.peers.find(l => l.series === "leechers"))) fail("no leechers drawn");
  const tline = dom.torrents[0].points;
  if (!(tline[tline.length - 1][1] < tline[0][1])) fail("the torrents line does not climb");
  if (dom.top.length < 10) fail(`top torrents: ${dom.top.length} rows`);
  // The largest swarm, as announced (the probe peers below went to torrent 1, which is
  // far from the top).
  const [bigK] = [...perTorrent].sort((a, b) => b[1] - a[1])[0];
  const bigHex = bigK.toString(16).padStart(2, "0").repeat(20);
  if (dom.top[0][0] !== bigHex) fail(`top torrent is ${dom.top[0][0]}, expected ${bigHex}`);
  if (!dom.config.includes("[state]") || !dom.config.includes("sample_interval = 1")) fail("config not shown");
  if (dom.tiles.torrents !== "17") fail(`torrents tile: ${dom.tiles.torrents}`);
  if (dom.error) fail(`page error banner: ${dom.error}`);
  if (errors.length) fail(`script errors: ${errors.join("; ")}`);
  const foreign = requests.filter(u => !u.startsWith(admin));
  if (foreign.length) fail(`requests outside shoal: ${foreign.join(", ")}`);

  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(`charts: ${dom.requests[0].points.length} samples; top torrent ${dom.top[0][0]} ` +
              `(${dom.top[0][1]} seeders, ${dom.top[0][2]} leechers); screenshot ${screenshot}`);
  console.log("PASS");
} catch (e) {
  if (!process.exitCode) { console.error(e); process.exitCode = 1; }
} finally {
  if (browser) await browser.close();
  if (profile) fs.rmSync(profile, { recursive: true, force: true });
  sock.close();
  shoal.kill("SIGTERM");
  await new Promise(r => { shoal.once("exit", r); setTimeout(r, 10000); });
  fs.rmSync(dir, { recursive: true, force: true });
}
