// The `bittorrent-tracker` npm client against shoal in private mode: a client whose announce
// URL carries a registered passkey (`ws://host:port/<passkey>/announce`) is served, gets the
// other user's peer and can scrape; without a passkey, with an unknown one, or for a torrent
// the site did not register it is refused, and the client shows the tracker's failure reason
// (its 'warning' event).  Run: node --test private.test.mjs
//
// shoal itself is started (SHOAL_BIN, see tracker.mjs; SHOAL_WS_CMD does not apply: the
// reference tracker has no private mode) with `--private`, an SQLite database and a state
// file in a fresh temporary directory, and its admin listener with a bearer token; the users
// and the torrent are registered through the admin API, as a site would.

import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { startTracker, freePort, SHOAL_BIN } from './tracker.mjs'
import { Swarm, STEP_MS, bin, waitFor, waitWarning, scrape } from './clients.mjs'

const TOKEN = 'private-test-token'
const KEYS = ['0123456789abcdef0123456789abcdef', 'user-two.key_~']
const RELAY_MS = 10000 // bound for a relay once the message to relay was sent

let dir, tracker, adminPort, swarm
const others = [] // swarms of the refused clients

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'shoal-private-ws-'))
  writeFileSync(path.join(dir, 'shoal.toml'), `[admin]\ntoken = "${TOKEN}"\n`)
  adminPort = await freePort()
  tracker = await startTracker({
    command: `${SHOAL_BIN} --http 127.0.0.1:{port} --private --database sqlite://${dir}/shoal.db ` +
      `--admin 127.0.0.1:${adminPort} --state-file ${dir}/shoal.state --config ${dir}/shoal.toml`
  })
  swarm = new Swarm(tracker)
})

after(async () => {
  for (const s of [swarm, ...others]) if (s) await s.destroy()
  if (tracker) await tracker.stop()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

/** One admin API call; { status, body } (body parsed when it is JSON). */
async function admin (method, apiPath, body) {
  const res = await fetch(`http://127.0.0.1:${adminPort}${apiPath}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body)
  })
  const text = await res.text()
  let parsed = text
  try { parsed = JSON.parse(text) } catch {}
  return { status: res.status, body: parsed }
}

/** An admin call that must answer 200, retried while the admin listener is starting. */
async function admin200 (method, apiPath, body) {
  const deadline = Date.now() + 10000
  for (;;) {
    let r
    try {
      r = await admin(method, apiPath, body)
    } catch (err) {
      if (Date.now() > deadline) throw err
      await new Promise(resolve => setTimeout(resolve, 100))
      continue
    }
    assert.equal(r.status, 200, `${method} ${apiPath}: ${JSON.stringify(r.body)}; ` +
      `tracker output:\n${tracker.output().slice(-2000)}`)
    return r.body
  }
}

const announceUrl = key => `${tracker.url}/${key}/announce`
const isResponse = m => m.action === 'announce' && m.complete !== undefined

/** Starts a client that must be refused with `reason`; checks the warning and the message. */
async function refused (rec, reason) {
  rec.client.start()
  const warning = await waitWarning(rec, `warning "${reason}"`, w => w.includes(reason))
  assert.equal(warning, reason, 'the client shows the failure reason as sent')
  const msg = rec.received.find(m => m['failure reason'] !== undefined)
  assert.equal(msg['failure reason'], reason)
  assert.equal(msg.action, 'announce', 'the failure names its action (the client needs it)')
  assert.equal(msg.info_hash, bin(rec.swarm.infoHash), 'the failure names its torrent')
  assert.ok(!rec.received.some(isResponse), `no announce response: ${JSON.stringify(rec.received)}`)
}

let seeder, leecher
const done = {}

test('the site registers users and a torrent through the admin API', { timeout: 20000 }, async () => {
  for (const [i, passkey] of KEYS.entries()) {
    await admin200('PUT', `/api/users/${i + 1}`, { passkey })
  }
  await admin200('PUT', `/api/torrents/${swarm.infoHash}`, {})
  const user = await admin200('GET', '/api/users/1')
  assert.equal(user.user_id, 1)
  assert.ok(Array.isArray(user.torrents), JSON.stringify(user))
  // Without the token the API refuses.
  const res = await fetch(`http://127.0.0.1:${adminPort}/api/users/1`)
  assert.equal(res.status, 401)
  done.registered = true
})

test('a client with a passkey URL is served', { timeout: STEP_MS + 5000 }, async () => {
  assert.ok(done.registered, 'needs the registration test')
  seeder = swarm.client('seeder', announceUrl(KEYS[0]), 0)
  seeder.client.start()
  const res = await waitFor(seeder, 'announce response', isResponse)
  assert.equal(res['failure reason'], undefined)
  assert.equal(res.info_hash, bin(swarm.infoHash))
  assert.equal(res.complete, 1, 'the seeder itself is the one complete peer')
  assert.equal(res.incomplete, 0)
  assert.ok(Number.isInteger(res.interval) && res.interval > 0, `interval ${res.interval}`)
  assert.deepEqual(seeder.warnings, [])
  done.seeder = true
})

test("another user's client is served and its offers reach the first", { timeout: STEP_MS + RELAY_MS + 5000 }, async () => {
  assert.ok(done.seeder, 'needs the served seeder')
  leecher = swarm.client('leecher', announceUrl(KEYS[1]), 1000)
  leecher.client.start()
  const res = await waitFor(leecher, 'announce response', isResponse)
  assert.equal(res.complete, 1)
  assert.equal(res.incomplete, 1)
  const relayed = await waitFor(seeder, 'relayed offer', m => m.offer !== undefined, RELAY_MS)
  assert.equal(relayed.peer_id, bin(leecher.peerId), 'offer names the offering peer')
  assert.deepEqual(leecher.warnings, [])
  done.leecher = true
})

test('a client with a passkey URL can scrape', { timeout: 15000 }, async () => {
  assert.ok(done.leecher, 'needs both peers announced')
  const s = await scrape(seeder)
  assert.equal(s.complete, 1)
  assert.equal(s.incomplete, 1)
})

test('without a passkey the client is refused: passkey required', { timeout: STEP_MS + 5000 }, async () => {
  assert.ok(done.registered, 'needs the registration test')
  const s = new Swarm(tracker, swarm.infoHash)
  others.push(s)
  await refused(s.client('no passkey', `${tracker.url}/announce`, 0), 'passkey required')
})

test('with a wrong passkey the client is refused: unknown passkey', { timeout: STEP_MS + 5000 }, async () => {
  assert.ok(done.registered, 'needs the registration test')
  const s = new Swarm(tracker, swarm.infoHash)
  others.push(s)
  await refused(s.client('wrong passkey', announceUrl('not-a-registered-key'), 0), 'unknown passkey')
})

test('a torrent the site did not register is refused: torrent not registered', { timeout: STEP_MS + 5000 }, async () => {
  assert.ok(done.registered, 'needs the registration test')
  const s = new Swarm(tracker) // a random info hash
  others.push(s)
  // The other accepted form, /announce/<passkey> (and its own WebSocket).
  const rec = s.client('unregistered torrent', `${tracker.url}/announce/${KEYS[0]}`, 0)
  await refused(rec, 'torrent not registered')
})
