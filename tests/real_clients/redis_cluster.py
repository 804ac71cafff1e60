"""A real Redis Cluster of three masters for the cluster real-client tests, per
docs/real-servers.md and the same recipe as crates/server/tests/common/redis.rs.

Debian's `redis-server` (installed with apt-get if missing, as db_servers.py installs the
databases) runs three times in cluster mode on free loopback ports (a port and its cluster-bus
port, 10000 above, both free), each with a private directory under one temporary directory,
joined with `redis-cli --cluster create ... --cluster-replicas 0 --cluster-yes`; `start`
returns once every master says `cluster_state:ok`. `close()` stops them by PID and removes the
directory; as a backstop each server is asked (PR_SET_PDEATHSIG) to get SIGTERM when the test
process dies, so a test that is killed cannot leave one running. `stop(i)` and `restart(i)`
take one master down and bring it back with its directory (it rejoins with its slots).

A module, not a test: run.sh runs libtorrent_*.py only. Run it directly
(`/usr/bin/python3 tests/real_clients/redis_cluster.py`) to start a cluster, print its seeds
and stop it again.
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from db_servers import ServerError, install  # noqa: E402


def die_with_parent():
    """In the child, before exec: SIGTERM it when this test process dies."""
    import ctypes
    import signal
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def free_port_with_bus(taken=()):
    """A loopback TCP port, not in `taken`, whose cluster-bus port (10000 above) is free too."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            if port > 55535 or port in taken:
                continue
            with socket.socket() as bus:
                try:
                    bus.bind(("127.0.0.1", port + 10000))
                except OSError:
                    continue
            return port
    raise ServerError("no free port pair for Redis")


class RedisCluster:
    """Three masters on 127.0.0.1, joined, ready."""

    def __init__(self, directory, ports):
        self.dir = directory
        self.ports = ports
        self.servers = [None] * len(ports)

    @classmethod
    def start(cls, masters=3, timeout_s=30):
        began = time.monotonic()
        install("redis-server", "redis-server")
        ports = []
        while len(ports) < masters:
            ports.append(free_port_with_bus(ports))
        c = cls(tempfile.mkdtemp(prefix="shoal-lt-redis-"), ports)
        try:
            for i in range(masters):
                c.spawn(i)
            for i in range(masters):
                c.wait_for_ping(i, timeout_s)
            out = subprocess.run(["redis-cli", "--cluster", "create", *[f"127.0.0.1:{p}" for p in ports],
                                  "--cluster-replicas", "0", "--cluster-yes"],
                                 stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout_s)
            if out.returncode != 0:
                raise ServerError(f"redis-cli --cluster create: {out.stdout.decode(errors='replace')[-800:]}")
            c.wait_until_ok(timeout_s)
        except BaseException:
            c.close()
            raise
        print(f"  Redis Cluster of {masters} masters on {ports} ready in {time.monotonic() - began:.1f} s",
              file=sys.stderr)
        return c

    def spawn(self, i):
        port = self.ports[i]
        d = os.path.join(self.dir, str(port))
        os.makedirs(d, exist_ok=True)
        self.servers[i] = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
             "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000", "--save", "",
             "--appendonly", "no", "--protected-mode", "no", "--dir", d, "--logfile", os.path.join(d, "redis.log")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=die_with_parent)

    def cli(self, port, *args):
        try:
            out = subprocess.run(["redis-cli", "-p", str(port), *args], stdin=subprocess.DEVNULL,
                                 capture_output=True, timeout=5)
        except subprocess.TimeoutExpired:
            return ""
        return out.stdout.decode(errors="replace")

    def wait_for_ping(self, i, timeout_s):
        deadline = time.monotonic() + timeout_s
        while self.cli(self.ports[i], "ping").strip() != "PONG":
            if self.servers[i].poll() is not None or time.monotonic() > deadline:
                log = os.path.join(self.dir, str(self.ports[i]), "redis.log")
                tail = open(log, errors="replace").read()[-800:] if os.path.exists(log) else ""
                raise ServerError(f"redis-server on {self.ports[i]} did not answer: {tail}")
            time.sleep(0.05)

    def wait_until_ok(self, timeout_s=30):
        """Until every running master says cluster_state:ok."""
        deadline = time.monotonic() + timeout_s
        for i, p in enumerate(self.ports):
            if self.servers[i] is None:
                continue
            while "cluster_state:ok" not in self.cli(p, "cluster", "info"):
                if time.monotonic() > deadline:
                    raise ServerError(f"the cluster did not become ok within {timeout_s} s")
                time.sleep(0.1)

    def seeds(self):
        """The seed URLs, comma-separated, for shoal's --cluster."""
        return ",".join(f"redis://127.0.0.1:{p}" for p in self.ports)

    def stop(self, i):
        """Stops master `i` (SIGKILL, by PID)."""
        proc, self.servers[i] = self.servers[i], None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

    def restart(self, i, timeout_s=30):
        """Starts master `i` again with its directory and waits for the cluster."""
        self.spawn(i)
        self.wait_for_ping(i, timeout_s)
        self.wait_until_ok(timeout_s)

    def close(self):
        """Stops every master (SIGTERM, by PID; SIGKILL after 5 s) and removes the directory."""
        for i, proc in enumerate(self.servers):
            if proc is None:
                continue
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
            self.servers[i] = None
        shutil.rmtree(self.dir, ignore_errors=True)


if __name__ == "__main__":
    cluster = RedisCluster.start()
    try:
        print(cluster.seeds())
        print(cluster.cli(cluster.ports[0], "cluster", "info").splitlines()[0])
    finally:
        cluster.close()
