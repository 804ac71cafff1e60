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
import { browsers } from './browser.mjs'
import { startTracker } from './tracker.mjs'

const SIZE = 1 << 20 // 1 MiB, 64 pieces of 16 KiB
const TRANSFER_MS = 45000 // the download (Node-free: no 5 s offer delay; ~5 s measured)

let tracker, pages

before(async () => {
  tracker = await startTracker()
  pages = await browsers(() => tracker.output())
})

after(async () => {
  if (pages) await pages.close()
  if (tracker) await tracker.stop()
})

test('two Chromium pages exchange a file over WebRTC, introduced by the tracker', { timeout: 80000 }, async () => {
  const [seedPage, leechPage] = await Promise.all([pages.open('seeder'), pages.open('leecher')])

  const t0 = Date.now()
  await pages.load(seedPage, { role: 'seed', tracker: tracker.url, size: SIZE })
  const seed = await pages.result(seedPage, 'seeder', 15000)
  assert.match(seed.sha256, /^[0-9a-f]{64}$/)
  assert.equal(seed.length, SIZE)
  // The magnet names our tracker and no other (webtorrent has no default trackers to add
  // when `announce` is given, but check), and no web seeds.
  const magnet = new URL(seed.magnet)
  assert.deepEqual(magnet.searchParams.getAll('tr'), [tracker.url])
  assert.deepEqual(magnet.searchParams.getAll('ws'), [])

  await pages.load(leechPage, { role: 'leech', tracker: tracker.url, magnet: seed.magnet })
  const got = await pages.result(leechPage, 'leecher', TRANSFER_MS)
  const ms = Date.now() - t0
  console.log(`transfer of ${SIZE} bytes took ${ms} ms; leecher wires ${JSON.stringify(got.everWires)} to ${JSON.stringify(got.addrs)}`)

  assert.equal(got.length, SIZE)
  assert.equal(got.sha256, seed.sha256, 'downloaded bytes differ from the seed')
  assert.ok(got.everWires.length > 0, 'no wire')
  assert.ok(got.everWires.every(t => t === 'webrtc'), `wire types ${JSON.stringify(got.everWires)}`)
  assert.ok(got.wires.every(t => t === 'webrtc'), `wire types ${JSON.stringify(got.wires)}`)
})
