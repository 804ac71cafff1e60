// Starts and stops the tracker under test for the WebTorrent tests.
//
// The command comes from SHOAL_WS_CMD with `{port}` replaced by a free port on 127.0.0.1
// (split on spaces, run without a shell, so the PID we keep is the tracker's own), and
// defaults to `$SHOAL_BIN --http 127.0.0.1:{port}` (SHOAL_BIN: target/release/shoal unless
// set): the HTTP listener serves ws:// on the same port. A suite that needs shoal itself
// with flags of its own (private.test.mjs) passes its own `command` template.

import { spawn } from 'node:child_process'
import net from 'node:net'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, '..', '..')
const target = process.env.CARGO_TARGET_DIR || path.join(root, 'target')

export const SHOAL_BIN = process.env.SHOAL_BIN || `${target}/release/shoal`
export const DEFAULT_CMD = `${SHOAL_BIN} --http 127.0.0.1:{port}`

/** A port that was free on 127.0.0.1 a moment ago. */
export function freePort () {
  return new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.unref()
    srv.on('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address()
      srv.close(() => resolve(port))
    })
  })
}

function canConnect (port) {
  return new Promise(resolve => {
    const sock = net.connect({ host: '127.0.0.1', port })
    sock.setTimeout(500)
    sock.once('connect', () => { sock.destroy(); resolve(true) })
    sock.once('error', () => resolve(false))
    sock.once('timeout', () => { sock.destroy(); resolve(false) })
  })
}

/**
 * Spawns the tracker (`command`, else SHOAL_WS_CMD, else DEFAULT_CMD) on a free port and
 * waits (at most `timeoutMs`) until it accepts TCP connections. Returns { port, url, pid,
 * stop(), output() }.
 */
export async function startTracker ({ timeoutMs = 15000, command } = {}) {
  const template = command || process.env.SHOAL_WS_CMD || DEFAULT_CMD
  const port = await freePort()
  const argv = template.replaceAll('{port}', String(port)).trim().split(/\s+/)
  const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.on('data', d => { out += d })
  child.stderr.on('data', d => { out += d })
  let exited = null
  const exitedP = new Promise(resolve => child.once('exit', (code, sig) => {
    exited = { code, sig }
    resolve()
  }))
  let spawnError = null
  child.once('error', err => { spawnError = err })

  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (spawnError) throw new Error(`cannot start tracker \`${argv.join(' ')}\`: ${spawnError.message}`)
    if (exited) throw new Error(`tracker \`${argv.join(' ')}\` exited (${JSON.stringify(exited)}) before listening:\n${out}`)
    if (await canConnect(port)) break
    if (Date.now() > deadline) {
      child.kill('SIGKILL')
      throw new Error(`tracker \`${argv.join(' ')}\` not listening on 127.0.0.1:${port} after ${timeoutMs} ms:\n${out}`)
    }
    await new Promise(resolve => setTimeout(resolve, 100))
  }

  async function stop () {
    if (exited) return
    process.kill(child.pid, 'SIGTERM')
    const killer = setTimeout(() => { if (!exited) process.kill(child.pid, 'SIGKILL') }, 3000)
    await exitedP
    clearTimeout(killer)
  }

  return { port, url: `ws://127.0.0.1:${port}`, pid: child.pid, stop, output: () => out }
}
