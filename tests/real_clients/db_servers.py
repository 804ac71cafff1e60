"""Real PostgreSQL and MariaDB servers for the private-mode real-client tests, per
docs/real-servers.md and the same recipe as crates/accounts/tests/servers/mod.rs.

A server is installed if missing (Debian packages `postgresql`, `mariadb-server`), started
once per test file with a private data directory under the temporary directory and a free
loopback port, and stopped by its PID: `close()` at the end of the test, and as a backstop
a small watcher shell that waits for the test process to end, then stops the server and
removes its directory, so a test that dies cannot leave a server behind. `stop()` and
`start()` take the server down and bring it back on the same port and data (an outage).

A module, not a test: run.sh runs libtorrent_*.py only. Run it directly
(`/usr/bin/python3 tests/real_clients/db_servers.py`) to start both servers, create a
database on each and stop them again.
"""
import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time


class ServerError(Exception):
    """A server could not be installed, started or stopped; the message says why."""


def free_tcp_port():
    """A loopback TCP port that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(directory, label, cmd, timeout=120):
    """Runs `cmd` with its output in DIRECTORY/LABEL.log; raises ServerError with the log's
    tail if it fails or outlives `timeout` seconds."""
    path = os.path.join(directory, f"{label}.log")
    with open(path, "w") as out:
        try:
            status = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            status = "timeout"
        except OSError as e:
            raise ServerError(f"{label}: {e}")
    if status == 0:
        return
    with open(path, errors="replace") as f:
        tail = " | ".join(f.read().strip().splitlines()[-8:])
    raise ServerError(f"{label} exited with {status}: {tail}")


def install(package, program):
    """`apt-get install` the package unless `program` is already there (after an
    `apt-get update` if the first try fails)."""
    if program_exists(program):
        return
    began = time.monotonic()
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "--no-install-recommends", package]
    for attempt in (cmd, ["apt-get", "update"], cmd):
        done = subprocess.run(attempt, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, env=env, timeout=300)
        if attempt is cmd and done.returncode == 0:
            print(f"  installed {package} in {time.monotonic() - began:.1f} s", file=sys.stderr)
            return
    raise ServerError(f"apt-get install {package} failed: {done.stderr.decode(errors='replace')[-500:]}")


def program_exists(program):
    return os.path.exists(program) if os.path.isabs(program) else shutil.which(program) is not None


def postgres_bin():
    """The newest /usr/lib/postgresql/<version>/bin that has an initdb, or None."""
    found = []
    for initdb in glob.glob("/usr/lib/postgresql/*/bin/initdb"):
        version = initdb.split("/")[4]
        if version.isdigit():
            found.append((int(version), os.path.dirname(initdb)))
    return max(found)[1] if found else None


def watch(directory, stop):
    """Starts a watcher that, once this process has exited, runs `stop` (a shell command
    that signals the server by PID), waits for the server to go and removes `directory`."""
    script = (f"while kill -0 {os.getpid()} 2>/dev/null; do sleep 0.5; done; {stop}; "
              f"for _ in $(seq 100); do [ -e {directory}/data/postmaster.pid ] || [ -e {directory}/pid ] || break; "
              f"sleep 0.2; done; rm -rf {directory}")
    subprocess.Popen(["sh", "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)


class Server:
    """A running database server of this test file. `kind` is "postgres" or "mariadb"."""

    def __init__(self, kind, directory, port):
        self.kind = kind
        self.dir = directory
        self.port = port
        self.up = False

    # -- PostgreSQL ---------------------------------------------------------------------

    @classmethod
    def postgres(cls):
        began = time.monotonic()
        if postgres_bin() is None:
            install("postgresql", "/usr/lib/postgresql")
        if postgres_bin() is None:
            raise ServerError("postgresql installed, but no /usr/lib/postgresql/*/bin/initdb")
        server = cls("postgres", tempfile.mkdtemp(prefix="shoal-lt-pg-"), free_tcp_port())
        os.chmod(server.dir, 0o755)
        shutil.chown(server.dir, "postgres")
        server.bin = postgres_bin()
        server.as_postgres("initdb", f"{server.bin}/initdb -D {server.dir}/data -U shoal --auth=trust")
        # The postmaster's PID changes when an outage test restarts it: read it at the end.
        watch(server.dir, f"kill -INT $(head -1 {server.dir}/data/postmaster.pid)")
        server.start()
        print(f"  PostgreSQL ready on 127.0.0.1:{server.port} in {time.monotonic() - began:.1f} s", file=sys.stderr)
        return server

    def as_postgres(self, label, command, timeout=120):
        run(self.dir, label, ["su", "postgres", "-s", "/bin/sh", "-c", command], timeout)

    # -- MariaDB ------------------------------------------------------------------------

    @classmethod
    def mariadb(cls):
        began = time.monotonic()
        install("mariadb-server", "mariadbd")
        server = cls("mariadb", tempfile.mkdtemp(prefix="shoal-lt-mariadb-"), free_tcp_port())
        run(server.dir, "mariadb-install-db", ["mariadb-install-db", "--no-defaults", f"--datadir={server.dir}/data",
                                                "--user=root", "--auth-root-authentication-method=normal"])
        server.daemon = None
        watch(server.dir, f"kill $(cat {server.dir}/pid)")
        server.start()
        server.mariadb_sql("create-user", "CREATE USER 'shoal'@'127.0.0.1' IDENTIFIED BY 'pw'")
        print(f"  MariaDB ready on 127.0.0.1:{server.port} in {time.monotonic() - began:.1f} s", file=sys.stderr)
        return server

    def mariadb_sql(self, label, sql):
        run(self.dir, label, ["mariadb", "--no-defaults", "-h", "127.0.0.1", "-P", str(self.port), "-u", "root",
                              "-e", sql], timeout=30)

    # -- both ---------------------------------------------------------------------------

    def start(self, timeout_s=60):
        """Starts the server (again) on its port and data; returns when it answers."""
        if self.kind == "postgres":
            self.as_postgres("pg_ctl-start", f"{self.bin}/pg_ctl -D {self.dir}/data -o '-p {self.port} -k {self.dir} "
                             f"-c listen_addresses=127.0.0.1' -l {self.dir}/pg.log -w -t {timeout_s} start",
                             timeout_s + 10)
        else:
            log = open(os.path.join(self.dir, "mariadbd.log"), "a")
            self.daemon = subprocess.Popen(
                ["mariadbd", "--no-defaults", f"--datadir={self.dir}/data", "--user=root", f"--port={self.port}",
                 "--bind-address=127.0.0.1", f"--socket={self.dir}/sock", f"--pid-file={self.dir}/pid"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            log.close()
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    self.mariadb_sql("ping", "SELECT 1")
                    break
                except ServerError:
                    if self.daemon.poll() is not None or time.monotonic() > deadline:
                        with open(os.path.join(self.dir, "mariadbd.log"), errors="replace") as f:
                            tail = " | ".join(f.read().strip().splitlines()[-6:])
                        raise ServerError(f"mariadbd did not answer within {timeout_s} s "
                                          f"(exit status {self.daemon.poll()}): {tail}")
                    time.sleep(0.2)
        self.up = True

    def stop(self, timeout_s=60):
        """Stops the server (fast: sessions are cut), as an outage; returns once it is gone."""
        if not self.up:
            return
        if self.kind == "postgres":
            self.as_postgres("pg_ctl-stop", f"{self.bin}/pg_ctl -D {self.dir}/data -m fast -w -t {timeout_s} stop",
                             timeout_s + 10)
        elif self.daemon is not None:
            self.daemon.terminate()
            try:
                self.daemon.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait(timeout=10)
            self.daemon = None
        self.up = False

    def create_database(self, name):
        """A new, empty database on this server; its URL for shoal's --database."""
        if self.kind == "postgres":
            run(self.dir, "createdb", [f"{self.bin}/createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "shoal",
                                       name], timeout=30)
            return f"postgres://shoal@127.0.0.1:{self.port}/{name}"
        self.mariadb_sql("create-database", f"CREATE DATABASE {name}; GRANT ALL ON {name}.* TO 'shoal'@'127.0.0.1'")
        return f"mysql://shoal:pw@127.0.0.1:{self.port}/{name}"

    def close(self):
        """Stops the server and removes its directory (the watcher then finds nothing to do)."""
        try:
            self.stop(timeout_s=30)
        except ServerError as e:
            print(f"  stopping {self.kind}: {e}", file=sys.stderr)
        shutil.rmtree(self.dir, ignore_errors=True)


def start(kind):
    """The server of this kind, started; raises ServerError with the reason if it cannot be."""
    return Server.postgres() if kind == "postgres" else Server.mariadb()


if __name__ == "__main__":
    for kind in ("postgres", "mariadb"):
        server = start(kind)
        try:
            print(kind, server.create_database("shoal_selftest"))
            server.stop()
            server.start()
            print(kind, "stopped and started again")
        finally:
            server.close()
