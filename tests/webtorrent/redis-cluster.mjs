// A real Redis for browser-cluster.test.mjs, per docs/real-servers.md (the same recipe as
// tests/real_clients/redis_cluster.py and crates/server/tests/common/redis.rs): Debian's
// `redis-server` (run.sh installs it when missing), either a Redis Cluster of three masters in
// cluster mode on free 127.0.0.1 ports (the port and its cluster-bus port, 10000 above, both
// free), joined with `redis-cli --cluster create ... --cluster-replicas 0 --cluster-yes` and
// ready once every master says cluster_state:ok, or one plain redis-server (`masters: 1`).
// Each has a private directory under one temporary directory; `stop()` stops them by PID
// and removes it. Every wait is bounded.

import { spawn, execFile } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'

function listen (port) {
  return new Promise(resolve => {
    const srv = net.createServer()
    srv.once('error', () => resolve(null))
    srv.listen(port, '127.0.0.1', () => {
      const got = srv.address().port
      srv.close(() => resolve(got))
    })
  })
}

/** A free port, not in `taken`, whose cluster-bus port (10000 above) is free too. */
async function freePortWithBus (taken) {
  for (let i = 0; i < 200; i++) {
    const port = await listen(0)
    if (port && port <= 55535 && !taken.includes(port) && await listen(port + 10000)) return port
  }
  throw new Error('no free port pair for Redis')
}

function cli (args, timeout = 10000) {
  return new Promise(resolve => {
    execFile('redis-cli', args, { timeout }, (err, stdout) => resolve(err && !stdout ? '' : String(stdout)))
  })
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

/** Starts Redis; returns { seeds (for shoal's --cluster), ports, stop() }. */
export async function startRedis ({ masters = 3, timeoutMs = 30000 } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shoal-wt-redis-'))
  const ports = []
  while (ports.length < masters) ports.push(await freePortWithBus(ports))
  const children = []
  async function stop () {
    await Promise.all(children.map(child => new Promise(resolve => {
      if (child.exitCode !== null || child.signalCode !== null) { resolve(); return }
      child.once('exit', resolve)
      process.kill(child.pid, 'SIGTERM')
      setTimeout(() => { if (child.exitCode === null && child.signalCode === null) process.kill(child.pid, 'SIGKILL') }, 5000).unref()
    })))
    fs.rmSync(dir, { recursive: true, force: true })
  }
  try {
    for (const port of ports) {
      const d = path.join(dir, String(port))
      fs.mkdirSync(d)
      const cluster = masters > 1
        ? ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000']
        : []
      const child = spawn('redis-server', [
        '--port', String(port), '--bind', '127.0.0.1', ...cluster, '--save', '', '--appendonly', 'no',
        '--protected-mode', 'no', '--dir', d, '--logfile', path.join(d, 'redis.log')
      ], { stdio: 'ignore' })
      child.once('error', () => {}) // a missing binary shows as no PONG below
      children.push(child)
    }
    const deadline = Date.now() + timeoutMs
    for (const port of ports) {
      while ((await cli(['-p', String(port), 'ping'])).trim() !== 'PONG') {
        if (Date.now() > deadline) throw new Error(`redis-server on ${port} did not answer within ${timeoutMs} ms`)
        await sleep(50)
      }
    }
    if (masters > 1) {
      const out = await cli(['--cluster', 'create', ...ports.map(p => `127.0.0.1:${p}`),
        '--cluster-replicas', '0', '--cluster-yes'], timeoutMs)
      if (!out.includes('[OK] All 16384 slots covered')) throw new Error(`redis-cli --cluster create:\n${out}`)
      for (const port of ports) {
        while (!(await cli(['-p', String(port), 'cluster', 'info'])).includes('cluster_state:ok')) {
          if (Date.now() > deadline) throw new Error(`the Redis Cluster was not ok within ${timeoutMs} ms`)
          await sleep(100)
        }
      }
    }
  } catch (err) {
    await stop()
    throw err
  }
  const seeds = ports.map(p => `redis://127.0.0.1:${p}`).join(',')
  return { seeds, ports, stop }
}
