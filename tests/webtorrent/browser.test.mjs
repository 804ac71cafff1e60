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
import { assertDownload, assertSeed, browsers } from './browser.mjs'
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
  assertSeed(seed, SIZE, tracker.url)

  await pages.load(leechPage, { role: 'leech', tracker: tracker.url, magnet: seed.magnet })
  const got = await pages.result(leechPage, 'leecher', TRANSFER_MS)
  const ms = Date.now() - t0
  console.log(`transfer of ${SIZE} bytes took ${ms} ms; leecher wires ${JSON.stringify(got.everWires)} to ${JSON.stringify(got.addrs)}`)
  assertDownload(got, seed, SIZE)
})
