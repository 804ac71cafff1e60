"""What bench/unit3d/site_db.py and bench/gazelle/site_db.py share, nothing of either site:
free ports, a tracker process started (pinned to CPUs, its output in its work directory's
tracker.log, waited for until it listens) and stopped by PID, a private MariaDB server,
shoal as a site's announce server, CPU seconds of a process, the trackers' logs copied.

Only the standard library: SQL goes through the `mariadb` command-line client (what the
repo's tests use too), one process per batch of statements.
"""

import copy
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time


def free_port():
    """A free TCP port on 127.0.0.1 (bound, read, closed); below 32768 is not promised."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_low_port(start=20000, end=32000):
    """A port below the ephemeral range, free for TCP and UDP on 127.0.0.1."""
    for port in range(start + os.getpid() % 1000, end):
        try:
            with socket.socket() as t, socket.socket(type=socket.SOCK_DGRAM) as u:
                t.bind(("127.0.0.1", port))
                u.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
    raise RuntimeError(f"no free port in {start}..{end}")


def wait_tcp(port, proc, what, timeout=120.0):
    """Waits until 127.0.0.1:port accepts a connection; fails if `proc` exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on {port} within {timeout:.0f} s")


def stop(proc, timeout=120.0):
    """SIGTERM to `proc` (ours, by PID), then waits; SIGKILL after `timeout`."""
    if proc is None or proc.poll() is not None:
        return proc.returncode if proc else None
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def spawn(cmd, workdir, port, name, cpus=None, env=None):
    """Starts `cmd` in `workdir`, pinned to `cpus` where given, its output appended to
    workdir/tracker.log, and waits until it listens on 127.0.0.1:port. Returns (process,
    log file)."""
    if cpus:
        cmd = ["taskset", "-c", cpus] + cmd
    log = open(os.path.join(workdir, "tracker.log"), "a")
    proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT)
    wait_tcp(port, proc, name)
    return proc, log


class MariaDB:
    """A MariaDB server of our own: a data directory under `root`, a free port, root
    without a password on loopback, one database and its user, both named `database` (a
    subclass's), password `pw`. With `sql_mode`, the server's global sql_mode (every
    connection's, the trackers' too); with `hex_blob`, `dump_to` writes binary columns in
    hex."""

    database = None
    sql_mode = None
    hex_blob = False

    def __init__(self, root, cpus=None):
        self.root = root
        self.port = free_port()
        self.data = os.path.join(root, "data")
        self.proc = None
        self.cpus = cpus
        self.url = f"mysql://{self.database}:pw@127.0.0.1:{self.port}/{self.database}"

    def start(self):
        if shutil.which("mariadbd") is None:
            raise RuntimeError("mariadbd not found: apt-get install -y mariadb-server")
        os.makedirs(self.root, exist_ok=True)
        subprocess.run(
            ["mariadb-install-db", "--no-defaults", f"--datadir={self.data}", "--user=root",
             "--auth-root-authentication-method=normal"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cmd = ["mariadbd", "--no-defaults", f"--datadir={self.data}", "--user=root",
               f"--port={self.port}", "--bind-address=127.0.0.1",
               f"--socket={self.root}/sock", f"--pid-file={self.root}/pid",
               "--innodb-buffer-pool-size=512M", "--max-connections=500",
               "--skip-log-bin"]
        if self.cpus:
            cmd = ["taskset", "-c", self.cpus] + cmd
        self.log = open(os.path.join(self.root, "mariadb.log"), "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            r = subprocess.run(self._client("root") + ["-e", "select 1"],
                               capture_output=True)
            if r.returncode == 0:
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"MariaDB did not start; see {self.root}/mariadb.log")
            time.sleep(0.2)
        self._create(self.database)
        if self.sql_mode:
            self.sql(f"set global sql_mode = '{self.sql_mode}'", database=None)
        return self

    def _create(self, name):
        """Database `name` and its user `name`, password `pw`."""
        self.sql(f"create database {name} character set utf8mb4 collate utf8mb4_unicode_ci; "
                 f"create user '{name}'@'127.0.0.1' identified by 'pw'; "
                 f"grant all on {name}.* to '{name}'@'127.0.0.1';",
                 database=None)

    def add_database(self, name):
        """Another database `name` on this (started) server, with its user `name`: this
        server seen through it (`sql`, `load_ddl`, `url` name it; `status` and `proc` are
        the server's). Stop the server through the object `start` returned."""
        self._create(name)
        other = copy.copy(self)
        other.database = name
        other.url = f"mysql://{name}:pw@127.0.0.1:{self.port}/{name}"
        return other

    def stop(self):
        stop(self.proc, 60)

    def _client(self, user="root"):
        return ["mariadb", "--no-defaults", "-h", "127.0.0.1", "-P", str(self.port),
                "-u", user, "--batch", "--raw", "--skip-column-names"]

    def sql(self, text, database="", rows=False):
        """Runs `text` (statements separated by ';'); with `rows`, the rows of the last
        result, tab-separated fields (NULL as None)."""
        db = self.database if database == "" else database
        cmd = self._client() + ([db] if db else [])
        r = subprocess.run(cmd, input=text.encode(), capture_output=True)
        if r.returncode != 0:
            raise RuntimeError(f"SQL failed: {r.stderr.decode().strip()}\n{text[:400]}")
        if not rows:
            return None
        out = []
        for line in r.stdout.decode().splitlines():
            out.append([None if f == "NULL" else f for f in line.split("\t")])
        return out

    def load_ddl(self, path):
        with open(path) as f:
            self.sql(f.read())

    def dump_to(self, path):
        """The whole database as SQL, for fresh copies (see `restore`)."""
        with open(path, "wb") as f:
            subprocess.run(["mariadb-dump", "--no-defaults", "-h", "127.0.0.1", "-P",
                            str(self.port), "-u", "root", "--skip-comments"]
                           + (["--hex-blob"] if self.hex_blob else [])
                           + ["--databases", self.database], check=True, stdout=f)

    def restore(self, path):
        self.sql(f"drop database if exists {self.database}", database=None)
        with open(path) as f:
            self.sql(f.read(), database=None)

    def status(self):
        """MariaDB's global counters of writes: statements (`Com_*`) and rows written,
        updated and deleted by the storage engine (`Handler_*`)."""
        names = ("Com_insert", "Com_update", "Com_delete", "Com_commit", "Handler_write",
                 "Handler_update", "Handler_delete", "Handler_commit", "Queries")
        rows = self.sql("show global status where Variable_name in ("
                        + ",".join(f"'{n}'" for n in names) + ")", rows=True)
        return {k: int(v) for k, v in rows}


def sql_str(s):
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


class Tracker:
    """An announce server run from `workdir` (made if missing) on `port`, pinned to `cpus`;
    `proc` once started."""

    def __init__(self, binary, workdir, port, cpus=None):
        self.binary = os.path.abspath(binary)
        self.workdir = workdir
        self.port = port
        self.cpus = cpus
        self.proc = None
        os.makedirs(workdir, exist_ok=True)


class Shoal(Tracker):
    """shoal with `--private --schema SCHEMA` (`schema`, a subclass's) on `db_url`, HTTP and
    UDP on one port, pinned to `cpus`; `config` is its config file's text. Each start is on
    a fresh state file."""

    name = "shoal"
    schema = None

    def __init__(self, binary, workdir, db_url, port, config, cpus=None, extra=()):
        super().__init__(binary, workdir, port, cpus)
        self.config = os.path.join(workdir, "shoal.toml")
        with open(self.config, "w") as f:
            f.write(config)
        self.cmd = [self.binary, "--private", "--schema", self.schema, "--database", db_url,
                    "--http", f"127.0.0.1:{port}", "--udp", f"127.0.0.1:{port}",
                    "--workers", "1", "--state-file", os.path.join(workdir, "shoal.state"),
                    "--config", self.config, "--log-level", "warn", *extra]

    def start(self):
        for f in ("shoal.state", "shoal.state.ledger"):
            p = os.path.join(self.workdir, f)
            if os.path.exists(p):
                os.remove(p)
        env = dict(os.environ)
        env.pop("RUST_BACKTRACE", None)
        self.proc, self.log = spawn(self.cmd, self.workdir, self.port, self.name, self.cpus, env)
        return self

    def stop(self):
        return stop(self.proc)


def tempdir(prefix):
    return tempfile.mkdtemp(prefix=prefix)


def proc_cpu_seconds(pid):
    """User + system CPU seconds of process `pid`, all its threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def copy_logs(work, out):
    """Each tracker's log (WORK/<name>/tracker.log) to OUT/<name>.log."""
    for name in os.listdir(work):
        log = os.path.join(work, name, "tracker.log")
        if os.path.exists(log):
            shutil.copy(log, os.path.join(out, f"{name}.log"))
