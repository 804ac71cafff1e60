// Two real WebTorrent peers exchange a file through the tracker under test and nothing
// else: two headless Chromium instances (each its own fresh profile) load page.html, which
// imports the webtorrent browser bundle; one seeds random bytes with only our ws:// tracker,
// the other adds the magnet link. We check the SHA-256 of the bytes received against the
// seed's, and that every wire is `webrtc`.
//
// WebRTC gathers no ICE candidates on a loopback-only machine: run this through
// run-browser.sh, which gives it a private network namespace with a veth pair (10.77.0.1,
// 10.77.0.2) and a default route. The tracker and the page server stay on 127.0.0.1.

import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { chromium } from 'playwright-core'
import { startTracker } from './tracker.mjs'

const here = path.dirname(fileURLToPath(import.meta.url))
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium'
const SIZE = 1 << 20 // 1 MiB, 64 pieces of 16 KiB
const TRANSFER_MS = 45000 // the download (Node-free: no 5 s offer delay; ~5 s measured)
const ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--allow-loopback-in-peer-connection', '--disable-features=WebRtcHideLocalIpsWithMdns'
]

let tracker, server, pageBase
const browsers = []
const profiles = []

before(async () => {
  tracker = await startTracker()
  const files = {
    '/': [path.join(here, 'page.html'), 'text/html; charset=utf-8'],
    '/webtorrent.min.js': [path.join(here, 'node_modules/webtorrent/dist/webtorrent.min.js'), 'text/javascript']
  }
  server = http.createServer((req, res) => {
    const f = files[new URL(req.url, 'http://x').pathname]
    if (!f) { res.writeHead(404).end(); return }
    res.writeHead(200, { 'content-type': f[1], 'cache-control': 'no-store' })
    fs.createReadStream(f[0]).pipe(res)
  })
  await new Promise(resolve => server.listen(0, '127.0.0.1', resolve))
  pageBase = `http://127.0.0.1:${server.address().port}/`
})

after(async () => {
  await Promise.all(browsers.map(b => b.close().catch(() => {})))
  for (const dir of profiles) fs.rmSync(dir, { recursive: true, force: true })
  if (server) { server.closeAllConnections(); server.close() }
  if (tracker) await tracker.stop()
})

/** A fresh Chromium (own --user-data-dir) with one page; console and errors collected. */
async function openPage (name) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `shoal-wt-${name}-`))
  profiles.push(dir)
  const ctx = await chromium.launchPersistentContext(dir, {
    executablePath: CHROMIUM, headless: true, args: ARGS, timeout: 20000
  })
  browsers.push(ctx)
  const page = ctx.pages()[0] || await ctx.newPage()
  const msgs = []
  page.on('console', m => msgs.push(`${name} console.${m.type()}: ${m.text()}`))
  page.on('pageerror', e => msgs.push(`${name} pageerror: ${e.message}`))
  return { page, console: msgs }
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

async function diagnostics (p) {
  const log = await p.page.evaluate(() => window.log).catch(e => [`(no page log: ${e.message})`])
  return [...(log || []), ...p.console].join('\n') + `\ntracker output:\n${tracker.output().slice(-2000)}`
}

test('two Chromium pages exchange a file over WebRTC, introduced by the tracker', { timeout: 80000 }, async () => {
  const q = o => pageBase + '?' + new URLSearchParams(o)
  const [seedPage, leechPage] = await Promise.all([openPage('seeder'), openPage('leecher')])

  const t0 = Date.now()
  await seedPage.page.goto(q({ role: 'seed', tracker: tracker.url, size: SIZE }), { timeout: 10000 })
  const seed = await result(seedPage, 'seeder', 15000)
  assert.match(seed.sha256, /^[0-9a-f]{64}$/)
  assert.equal(seed.length, SIZE)
  // The magnet names our tracker and no other (webtorrent has no default trackers to add
  // when `announce` is given, but check), and no web seeds.
  const magnet = new URL(seed.magnet)
  assert.deepEqual(magnet.searchParams.getAll('tr'), [tracker.url])
  assert.deepEqual(magnet.searchParams.getAll('ws'), [])

  await leechPage.page.goto(q({ role: 'leech', tracker: tracker.url, magnet: seed.magnet }), { timeout: 10000 })
  const got = await result(leechPage, 'leecher', TRANSFER_MS)
  const ms = Date.now() - t0
  console.log(`transfer of ${SIZE} bytes took ${ms} ms; leecher wires ${JSON.stringify(got.everWires)} to ${JSON.stringify(got.addrs)}`)

  assert.equal(got.length, SIZE)
  assert.equal(got.sha256, seed.sha256, 'downloaded bytes differ from the seed')
  assert.ok(got.everWires.length > 0, 'no wire')
  assert.ok(got.everWires.every(t => t === 'webrtc'), `wire types ${JSON.stringify(got.everWires)}`)
  assert.ok(got.wires.every(t => t === 'webrtc'), `wire types ${JSON.stringify(got.wires)}`)
})
