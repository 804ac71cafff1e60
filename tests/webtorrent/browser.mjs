// What the headless-Chromium tests (browser.test.mjs, browser-cluster.test.mjs) share: the
// page server (page.html and the webtorrent browser bundle on 127.0.0.1), a fresh Chromium
// per page with the flags WebRTC needs here, and reading a page's result or, failing that,
// everything that says why (the page's log, its console, the trackers' output), and the
// checks of a seeder's and a leecher's results.
//
// Both tests run through run-browser.sh, inside a private network namespace: WebRTC gathers
// no ICE candidates on a loopback-only machine.

import assert from 'node:assert/strict'
import http from 'node:http'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { chromium } from 'playwright-core'

const here = path.dirname(fileURLToPath(import.meta.url))
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium'
const ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--allow-loopback-in-peer-connection', '--disable-features=WebRtcHideLocalIpsWithMdns'
]

const hex = s => Buffer.from(String(s), 'latin1').toString('hex').slice(-12)

/** One WebTorrent tracker message in a line: action, event, counts, peer ids (hex, cut), offer ids. */
function frameSummary (payload) {
  let m
  try { m = JSON.parse(String(payload)) } catch { return String(payload).slice(0, 80) }
  const parts = [m.action]
  if (m.event) parts.push(`event=${m.event}`)
  if (m.complete !== undefined) parts.push(`complete=${m.complete} incomplete=${m.incomplete}`)
  if (m.peer_id) parts.push(`peer=${hex(m.peer_id)}`)
  if (m.to_peer_id) parts.push(`to=${hex(m.to_peer_id)}`)
  if (m.offers) parts.push(`offers=[${m.offers.map(o => hex(o.offer_id)).join(',')}]`)
  const candidates = d => (String(d.sdp || '').match(/a=candidate/g) || []).length
  if (m.offer) parts.push(`offer ${hex(m.offer_id)} (${candidates(m.offer)} candidates)`)
  if (m.answer) parts.push(`answer ${hex(m.offer_id)} (${candidates(m.answer)} candidates)`)
  if (m['failure reason']) parts.push(`failure: ${m['failure reason']}`)
  return parts.join(' ')
}

/**
 * Serves page.html and the bundle on a free 127.0.0.1 port; opens Chromium pages on it.
 * `trackerOutput()` gives the text shown after a page's diagnostics. Returns { open(name),
 * load(p, query), result(p, name, ms), diagnostics(p), close() }.
 */
export async function browsers (trackerOutput) {
  const files = {
    '/': [path.join(here, 'page.html'), 'text/html; charset=utf-8'],
    '/webtorrent.min.js': [path.join(here, 'node_modules/webtorrent/dist/webtorrent.min.js'), 'text/javascript']
  }
  const server = http.createServer((req, res) => {
    const f = files[new URL(req.url, 'http://x').pathname]
    if (!f) { res.writeHead(404).end(); return }
    res.writeHead(200, { 'content-type': f[1], 'cache-control': 'no-store' })
    fs.createReadStream(f[0]).pipe(res)
  })
  await new Promise(resolve => server.listen(0, '127.0.0.1', resolve))
  const pageBase = `http://127.0.0.1:${server.address().port}/`
  const contexts = []
  const profiles = []

  /** A fresh Chromium (own --user-data-dir) with one page; console and errors collected. */
  async function open (name) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `shoal-wt-${name}-`))
    profiles.push(dir)
    const ctx = await chromium.launchPersistentContext(dir, {
      executablePath: CHROMIUM, headless: true, args: ARGS, timeout: 20000
    })
    contexts.push(ctx)
    const page = ctx.pages()[0] || await ctx.newPage()
    const msgs = []
    page.on('console', m => msgs.push(`${name} console.${m.type()}: ${m.text()}`))
    page.on('pageerror', e => msgs.push(`${name} pageerror: ${e.message}`))
    // The tracker messages, in short: who offered and answered what, through which socket.
    const t0 = Date.now()
    page.on('websocket', ws => {
      const note = dir => frame => msgs.push(`${name} ${((Date.now() - t0) / 1000).toFixed(2)}s ${dir} ${ws.url()} ${frameSummary(frame.payload)}`)
      ws.on('framesent', note('sent'))
      ws.on('framereceived', note('received'))
    })
    return { page, console: msgs }
  }

  /** Loads page.html with these query parameters (role, tracker, ...). */
  async function load (p, query) {
    await p.page.goto(pageBase + '?' + new URLSearchParams(query), { timeout: 10000 })
  }

  async function diagnostics (p) {
    const log = await p.page.evaluate(() => window.log).catch(e => [`(no page log: ${e.message})`])
    return [...(log || []), ...p.console].join('\n') + `\ntracker output:\n${trackerOutput().slice(-3000)}`
  }

  /** window.result once set (or throws with window.failure, the page log and console). */
  async function result (p, name, ms) {
    try {
      await p.page.waitForFunction(() => window.result || window.failure, null, { timeout: ms, polling: 100 })
    } catch (err) {
      throw new Error(`${name}: no result within ${ms} ms\n${await diagnostics(p)}`)
    }
    const { result, failure } = await p.page.evaluate(() => ({ result: window.result, failure: window.failure }))
    if (failure) throw new Error(`${name}: ${failure}\n${await diagnostics(p)}`)
    return result
  }

  async function close () {
    await Promise.all(contexts.map(b => b.close().catch(() => {})))
    for (const dir of profiles) fs.rmSync(dir, { recursive: true, force: true })
    server.closeAllConnections()
    server.close()
  }

  return { open, load, result, diagnostics, close }
}

/** A seeder page's result: `size` bytes, a magnet naming `trackerUrl` and no other tracker
 * (webtorrent adds no default trackers when `announce` is given, but check), no web seeds. */
export function assertSeed (seed, size, trackerUrl) {
  assert.match(seed.sha256, /^[0-9a-f]{64}$/)
  assert.equal(seed.length, size)
  const magnet = new URL(seed.magnet)
  assert.deepEqual(magnet.searchParams.getAll('tr'), [trackerUrl])
  assert.deepEqual(magnet.searchParams.getAll('ws'), [])
}

/** A leecher page's result: the seed's bytes, and WebRTC wires only. */
export function assertDownload (got, seed, size) {
  assert.equal(got.length, size)
  assert.equal(got.sha256, seed.sha256, 'downloaded bytes differ from the seed')
  assert.ok(got.everWires.length > 0, 'no wire')
  assert.ok(got.everWires.every(t => t === 'webrtc'), `wire types ${JSON.stringify(got.everWires)}`)
  assert.ok(got.wires.every(t => t === 'webrtc'), `wire types ${JSON.stringify(got.wires)}`)
}
