// The `bittorrent-tracker` npm client (the reference WebTorrent tracker client) against the
// tracker under test (see tracker.mjs for SHOAL_WS_CMD): announce, offers relayed, the answer
// relayed back, scrape, stopped.  Run: node --test client.test.mjs
//
// Real offers and answers: in Node the client's simple-peer uses `webrtc-polyfill`
// (node-datachannel 0.33) by default, so every announce carries real SDP offers and the
// peer that receives one answers with a real SDP answer (each takes ~5 s: ICE gathering
// without trickle). Whether the WebRTC connection then forms does not matter here (the
// browser test covers that); we check what goes through the tracker, by recording the
// messages each client sends and receives on its WebSocket.
//
// The two clients use different announce URLs (`/a`, `/b`): the npm client shares one
// WebSocket per URL within a process, and peers on the same connection would make the relay
// checks weaker. The recording clients are in clients.mjs.

import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { startTracker } from './tracker.mjs'
import { Swarm, STEP_MS, bin, waitFor, waitSent, scrape } from './clients.mjs'

let tracker
let swarm

before(async () => {
  tracker = await startTracker()
  swarm = new Swarm(tracker)
})

after(async () => {
  if (swarm) await swarm.destroy()
  if (tracker) await tracker.stop()
})

/** A recorded client announcing to `${tracker.url}/${name}`. */
const makeClient = (name, left) => swarm.client(name, `${tracker.url}/${name}`, left)

let seeder, leecher
// Each test needs the one before it; they fail at once (not after a wait) if it failed.
const done = {}
const RELAY_MS = 10000 // bound for a relay once the message to relay was sent

test('announce gets a response with complete, incomplete and interval', { timeout: STEP_MS + RELAY_MS + 5000 }, async () => {
  seeder = makeClient('a', 0)
  seeder.client.start()
  const res = await waitFor(seeder, 'announce response',
    m => m.action === 'announce' && m.complete !== undefined)
  assert.equal(res.info_hash, bin(swarm.infoHash))
  assert.equal(res['failure reason'], undefined)
  assert.equal(res.complete, 1, 'the seeder itself is the one complete peer')
  assert.equal(res.incomplete, 0)
  assert.ok(Number.isInteger(res.interval) && res.interval > 0, `interval ${res.interval}`)
  // The client generated real offers and sent them with the announce.
  const sent = seeder.sent.find(m => m.action === 'announce' && m.event === 'started')
  assert.ok(sent && sent.offers.length > 0 && /^v=0/.test(sent.offers[0].offer.sdp))
  done.announce = true
})

test("a second peer's offers are relayed to the first", { timeout: STEP_MS + RELAY_MS + 5000 }, async () => {
  assert.ok(done.announce, 'needs the announce test')
  leecher = makeClient('b', 1000)
  leecher.client.start()
  const res = await waitFor(leecher, 'announce response',
    m => m.action === 'announce' && m.complete !== undefined)
  assert.equal(res.complete, 1)
  assert.equal(res.incomplete, 1)
  done.leecher = true

  const announce = await waitSent(leecher, 'announce with offers', m => m.action === 'announce' && m.offers)
  const offers = new Map(announce.offers.map(o => [o.offer_id, o.offer]))
  assert.ok(offers.size > 0)

  const relayed = await waitFor(seeder, 'relayed offer', m => m.offer !== undefined, RELAY_MS)
  assert.equal(relayed.action, 'announce')
  assert.equal(relayed.info_hash, bin(swarm.infoHash))
  assert.equal(relayed.peer_id, bin(leecher.peerId), 'offer names the offering peer')
  assert.ok(offers.has(relayed.offer_id), 'offer_id is one the leecher sent')
  assert.deepEqual(relayed.offer, offers.get(relayed.offer_id), 'SDP relayed unchanged')
  // One swarm of two: at most one of the leecher's offers can go to the seeder.
  assert.equal(seeder.received.filter(m => m.offer !== undefined).length, 1)
  // Nobody was in the swarm when the seeder announced: its offers went nowhere.
  assert.equal(leecher.received.filter(m => m.offer !== undefined).length, 0)
  done.offer = true
})

test('the answer is relayed back to the offerer', { timeout: STEP_MS + RELAY_MS + 5000 }, async () => {
  assert.ok(done.offer, 'needs the offer test')
  const offer = seeder.received.find(m => m.offer !== undefined)
  const answer = await waitSent(seeder, 'answer', m => m.answer !== undefined)
  assert.equal(answer.to_peer_id, bin(leecher.peerId))
  assert.equal(answer.offer_id, offer.offer_id)
  assert.equal(answer.answer.type, 'answer')

  const relayed = await waitFor(leecher, 'relayed answer', m => m.answer !== undefined, RELAY_MS)
  assert.equal(relayed.action, 'announce')
  assert.equal(relayed.info_hash, bin(swarm.infoHash))
  assert.equal(relayed.peer_id, bin(seeder.peerId), 'answer names the answering peer')
  assert.equal(relayed.offer_id, offer.offer_id, 'answer carries the offer id')
  assert.deepEqual(relayed.answer, answer.answer, 'SDP relayed unchanged')
})

test('scrape reports the counts', { timeout: 15000 }, async () => {
  assert.ok(done.leecher, 'needs both peers announced')
  const s = await scrape(seeder)
  assert.equal(s.complete, 1)
  assert.equal(s.incomplete, 1)
  assert.ok(Number.isInteger(s.downloaded), `downloaded ${s.downloaded}`)
  // The raw response: `files` keyed by the binary info hash.
  const raw = seeder.received.filter(m => m.action === 'scrape').at(-1)
  assert.deepEqual(Object.keys(raw.files), [bin(swarm.infoHash)])
})

test('stopped removes the peer (and only that peer)', { timeout: 20000 }, async () => {
  assert.ok(done.leecher, 'needs both peers announced')
  const before = await scrape(seeder)
  assert.equal(before.incomplete, 1)
  leecher.client.stop()
  await waitSent(leecher, 'stopped', m => m.event === 'stopped', 2000)
  // The leecher's connection stays open: the removal must come from `stopped`, not a close.
  let s
  const deadline = Date.now() + 10000
  do {
    await new Promise(resolve => setTimeout(resolve, 200))
    s = await scrape(seeder)
  } while (s.incomplete !== 0 && Date.now() < deadline)
  assert.equal(s.incomplete, 0, 'stopped leecher still counted')
  assert.equal(s.complete, 1, 'the seeder must stay')
  assert.ok(leecher.socket.connected, 'leecher connection still open')
  assert.ok(!leecher.socket.destroyed)
})
