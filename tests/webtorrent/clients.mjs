// Recording `bittorrent-tracker` npm clients for the WebTorrent tests (client.test.mjs,
// private.test.mjs): each client's WebSocket messages, sent and received, and its warnings
// are kept, so that a test checks what went through the tracker and can wait for it.
//
// One module for both suites, so that the open and the private tracker are driven by the
// same client code.

import { randomBytes } from 'node:crypto'
import Client from 'bittorrent-tracker'

export const STEP_MS = 30000 // bound for each wait (offers/answers take ~5 s each)

// 20-byte ids as the wire carries them: "binary" strings, one char per byte.
export const bin = hex => Buffer.from(hex, 'hex').toString('latin1')
const text = d => typeof d === 'string' ? d : Buffer.from(d).toString('utf8')

/** The clients of one torrent (`infoHash`, hex) against one tracker (from startTracker). */
export class Swarm {
  constructor (tracker, infoHash = randomBytes(20).toString('hex')) {
    this.tracker = tracker
    this.infoHash = infoHash
    this.clients = []
    this.rtcPeers = []
  }

  /**
   * A client announcing to `announceUrl` with `left` bytes to go, recorded. The npm client
   * shares one WebSocket per URL within a process: give each client its own URL.
   */
  client (name, announceUrl, left) {
    const peerId = Buffer.concat([Buffer.from('-SHT001-'), randomBytes(12)]).toString('hex')
    const client = new Client({
      infoHash: this.infoHash,
      peerId,
      announce: [announceUrl],
      port: 6881,
      rtcConfig: { iceServers: [] },
      getAnnounceOpts: () => ({ left })
    })
    this.clients.push(client)
    const rec = { name, client, peerId, swarm: this, sent: [], received: [], warnings: [], waiters: [] }
    const settle = () => { rec.waiters = rec.waiters.filter(w => !w()) }
    client.on('warning', err => { rec.warnings.push(err.message); settle() })
    client.on('error', err => { rec.warnings.push(`error: ${err.message}`); settle() })
    client.on('peer', peer => { this.rtcPeers.push(peer); peer.on('error', () => {}) })
    const socket = client._trackers[0].socket
    const send = socket.send.bind(socket)
    socket.send = msg => { rec.sent.push(JSON.parse(text(msg))); return send(msg) }
    socket.on('data', d => {
      rec.received.push(JSON.parse(text(d)))
      settle()
    })
    rec.socket = socket
    return rec
  }

  async destroy () {
    for (const p of this.rtcPeers) { try { p.destroy() } catch {} }
    await Promise.all(this.clients.map(c => new Promise(resolve => {
      const t = setTimeout(resolve, 3000)
      c.destroy(() => { clearTimeout(t); resolve() })
    })))
  }
}

/** What `rec` has seen so far, for a failure message. */
function seen (rec) {
  return `received ${JSON.stringify(rec.received).slice(0, 2000)}; warnings ` +
    `${JSON.stringify(rec.warnings)}; tracker output:\n${rec.swarm.tracker.output().slice(-2000)}`
}

/** Resolves with `find()` once it is truthy (checked now and on each message or warning). */
function waitUntil (rec, what, find, ms) {
  const found = find()
  if (found) return Promise.resolve(found)
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${rec.name}: no ${what} within ${ms} ms; ${seen(rec)}`)), ms)
    rec.waiters.push(() => {
      const found = find()
      if (!found) return false
      clearTimeout(timer)
      resolve(found)
      return true
    })
  })
}

/** The first received message (already or within `ms`) for which pred holds. */
export function waitFor (rec, what, pred, ms = STEP_MS) {
  return waitUntil(rec, what, () => rec.received.find(pred), ms)
}

/** The first warning (already or within `ms`) for which pred holds. */
export function waitWarning (rec, what, pred, ms = STEP_MS) {
  return waitUntil(rec, what, () => rec.warnings.find(pred), ms)
}

export function waitSent (rec, what, pred, ms = STEP_MS) {
  const deadline = Date.now() + ms
  return new Promise((resolve, reject) => {
    const poll = () => {
      const m = rec.sent.find(pred)
      if (m) return resolve(m)
      if (Date.now() > deadline) return reject(new Error(`${rec.name}: did not send ${what} within ${ms} ms`))
      setTimeout(poll, 50)
    }
    poll()
  })
}

/** Scrape through `rec`'s client; resolves with the 'scrape' event for its info hash. */
export function scrape (rec, ms = 5000) {
  const infoHash = rec.swarm.infoHash
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      rec.client.removeListener('scrape', onScrape)
      reject(new Error(`${rec.name}: no scrape response within ${ms} ms; warnings ${JSON.stringify(rec.warnings)}`))
    }, ms)
    function onScrape (data) {
      if (data.infoHash !== infoHash) return
      clearTimeout(timer)
      rec.client.removeListener('scrape', onScrape)
      resolve(data)
    }
    rec.client.on('scrape', onScrape)
    rec.client.scrape()
  })
}
