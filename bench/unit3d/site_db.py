"""A UNIT3D site's database for the benchmark and the row comparison: a private MariaDB,
UNIT3D's tables from the test fixture's DDL, groups, users and torrents inserted the way
the site inserts them, and the two announce servers that serve it (shoal with
`--schema unit3d`, UNIT3D-Announce) started and stopped by PID.

Only the standard library: SQL goes through the `mariadb` command-line client (what the
repo's tests use too), one process per batch of statements.
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

# UNIT3D's moderation statuses (torrents.status).
PENDING, APPROVED, REJECTED, POSTPONED = 0, 1, 2, 3

# The groups a fresh UNIT3D site seeds that the announce rules name, with the columns the
# site's seeder sets: (slug, name, position, level, download_slots, immune, freeleech,
# double upload). 'user' is where registered members land.
GROUPS = [
    ("validating", "Validating", 4, 0, None, 0, 0, 0),
    ("guest", "Guest", 3, 10, None, 0, 0, 0),
    ("user", "User", 6, 30, None, 0, 0, 0),
    ("administrator", "Administrator", 18, 5000, None, 1, 1, 1),
    ("banned", "Banned", 1, 0, None, 0, 0, 0),
    ("disabled", "Disabled", 2, 0, None, 0, 0, 0),
    ("leech", "Leech", 5, 20, 1, 0, 0, 0),
    ("uploader", "Uploader", 12, 250, None, 1, 1, 0),
]

DEFAULT_UPLOAD = 53_687_091_200  # what a new member starts with (50 GiB), the site's default
DEFAULT_DOWNLOAD = 1_073_741_824  # 1 GiB


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


class MariaDB:
    """A MariaDB server of our own: a data directory under `root`, a free port, root
    without a password on loopback, one database `unit3d` and its user `unit3d`."""

    def __init__(self, root, cpus=None):
        self.root = root
        self.port = free_port()
        self.data = os.path.join(root, "data")
        self.proc = None
        self.cpus = cpus
        self.database = "unit3d"
        self.url = f"mysql://unit3d:pw@127.0.0.1:{self.port}/{self.database}"

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
        self.sql(f"create database {self.database} character set utf8mb4 "
                 "collate utf8mb4_unicode_ci; "
                 "create user 'unit3d'@'127.0.0.1' identified by 'pw'; "
                 f"grant all on {self.database}.* to 'unit3d'@'127.0.0.1';",
                 database=None)
        return self

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
                            str(self.port), "-u", "root", "--skip-comments",
                            "--databases", self.database], check=True, stdout=f)

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


def insert_groups(db):
    """The site's seeded groups (those the announce rules name). Returns slug -> id."""
    values = []
    for slug, name, position, level, slots, immune, fl, du in GROUPS:
        values.append(
            f"({sql_str(name)}, {sql_str(slug)}, {position}, {level}, "
            f"{'NULL' if slots is None else slots}, '#7289DA', 'fas fa-user', 'none', "
            f"{immune}, {fl}, {du}, 1, 1, 1, 1, 1)")
    db.sql("insert into `groups` (name, slug, position, level, download_slots, color, "
           "icon, effect, is_immune, is_freeleech, is_double_upload, can_chat, "
           "can_comment, can_invite, can_request, can_upload) values "
           + ",\n".join(values))
    return {slug: int(i) for i, slug in db.sql("select id, slug from `groups`", rows=True)}


def insert_users(db, passkeys, group_id, first=1, batch=2000):
    """One member per passkey, as registration creates them: name, e-mail, password hash,
    passkey, RSS key, the group, the site's starting upload and download. Ids first, ..."""
    now = "NOW()"
    for start in range(0, len(passkeys), batch):
        values = []
        for i, key in enumerate(passkeys[start:start + batch], start + first):
            rss = f"{(i * 2654435761) % (1 << 64):016x}{i:016x}"
            values.append(
                f"({i}, 'member{i}', 'member{i}@example.org', "
                "'$2y$10$abcdefghijklmnopqrstuuJ0SRpkVbZyQ1F.Vw1oO1oVXPzx2nK9S', "
                f"{sql_str(key)}, {group_id}, 1, {DEFAULT_UPLOAD}, {DEFAULT_DOWNLOAD}, "
                f"'{rss}', 1, {now}, {now}, {now})")
        db.sql("insert into users (id, username, email, password, passkey, group_id, "
               "active, uploaded, downloaded, rsskey, can_download, created_at, updated_at, "
               "email_verified_at) values " + ",\n".join(values))


def insert_torrents(db, info_hashes, uploader, status=APPROVED, first=1, batch=2000,
                    free=None, doubleup=None):
    """One torrent per info hash (hex), as an upload creates them and a moderator approves
    them: name, description, the stored file's name, file count, folder, NFO, size, the
    hash, the uploader, the status and who moderated it (the system user for an approved
    upload). `free` and `doubleup` map a torrent's index to its
    freeleech percentage and double-upload flag."""
    free = free or {}
    doubleup = doubleup or {}
    for start in range(0, len(info_hashes), batch):
        values = []
        for n, h in enumerate(info_hashes[start:start + batch], start):
            i = n + first
            values.append(
                f"({i}, 'Torrent {i} 1080p WEB-DL', 'Description of torrent {i}.', "
                f"'{i:013x}.torrent', 1, 'Torrent.{i}.1080p', '', {1_000_000_000 + i}, "
                f"UNHEX('{h}'), {uploader}, "
                f"{status}, {free.get(n, 0)}, {doubleup.get(n, 0)}, "
                f"{'NOW()' if status != PENDING else 'NULL'}, "
                f"{uploader if status != PENDING else 'NULL'}, NOW(), NOW(), NOW())")
        db.sql("insert into torrents (id, name, description, file_name, num_file, folder, "
               "nfo, size, info_hash, user_id, status, free, doubleup, moderated_at, "
               "moderated_by, created_at, updated_at, bumped_at) values "
               + ",\n".join(values))


def reset_activity(db):
    """Forgets every announce's effect: no peers, no history, no unregistered hashes,
    torrent counters at zero, members' upload and download back to the start."""
    db.sql("delete from peers; delete from history; "
           "delete from unregistered_info_hashes; "
           "update torrents set seeders = 0, leechers = 0, times_completed = 0, "
           "balance = NULL; "
           f"update users set uploaded = {DEFAULT_UPLOAD}, downloaded = {DEFAULT_DOWNLOAD};")


class Unit3dAnnounce:
    """UNIT3D-Announce, run from `workdir` (which gets its `.env`), pinned to `cpus`."""

    name = "unit3d-announce"

    def __init__(self, binary, workdir, db_url, port, apikey, cpus=None, env=None):
        self.binary = os.path.abspath(binary)
        self.workdir = workdir
        self.port = port
        self.cpus = cpus
        self.proc = None
        os.makedirs(workdir, exist_ok=True)
        values = {
            "DATABASE_URL": db_url,
            "FLUSH_INTERVAL": "3",
            "NUMWANT_DEFAULT": "25",
            "NUMWANT_MAX": "50",
            "ANNOUNCE_MIN": "1800",
            "ANNOUNCE_MAX": "3600",
            "UPLOAD_FACTOR": "100",
            "DOWNLOAD_FACTOR": "100",
            "PEER_EXPIRY_INTERVAL": "1800",
            "ACTIVE_PEER_TTL": "7200",
            "INACTIVE_PEER_TTL": "1814400",
            "MAX_PEERS_PER_TORRENT_PER_USER": "3",
            "APIKEY": apikey,
            "LISTENING_IP_ADDRESS": "127.0.0.1",
            "LISTENING_PORT": str(port),
            "IS_CONNECTIVITY_CHECK_ENABLED": "false",
            "CONNECTIVITY_CHECK_INTERVAL": "1800",
            "IS_ANNOUNCE_LOGGING_ENABLED": "false",
            # Newer releases' keys; this one ignores what it does not read.
            "ANNOUNCE_MIN_ENFORCED": "0",
        }
        values.update(env or {})
        with open(os.path.join(workdir, ".env"), "w") as f:
            for k, v in values.items():
                f.write(f"{k}={v}\n")

    def start(self):
        cmd = [self.binary]
        if self.cpus:
            cmd = ["taskset", "-c", self.cpus] + cmd
        env = dict(os.environ)
        env.pop("DATABASE_URL", None)
        # One tokio worker, as shoal runs one worker: the tracker has one core.
        env["TOKIO_WORKER_THREADS"] = "1"
        self.log = open(os.path.join(self.workdir, "tracker.log"), "a")
        self.proc = subprocess.Popen(cmd, cwd=self.workdir, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        wait_tcp(self.port, self.proc, self.name)
        return self

    def stop(self):
        return stop(self.proc)

    def announce_url(self, passkey):
        return f"http://127.0.0.1:{self.port}/announce/{passkey}"


class Shoal:
    """shoal with `--private --schema unit3d`, HTTP and UDP on one port, pinned to `cpus`;
    its config file holds the site's key (`[private] site_api_key`) and `unit3d`, the
    lines of its `[unit3d]` section."""

    name = "shoal"

    def __init__(self, binary, workdir, db_url, port, unit3d="", apikey="s" * 32,
                 cpus=None, extra=()):
        self.binary = os.path.abspath(binary)
        self.workdir = workdir
        self.port = port
        self.cpus = cpus
        self.proc = None
        os.makedirs(workdir, exist_ok=True)
        self.config = os.path.join(workdir, "shoal.toml")
        with open(self.config, "w") as f:
            f.write(f'[private]\nsite_api_key = "{apikey}"\n\n[unit3d]\n{unit3d}')
        self.cmd = [self.binary, "--private", "--schema", "unit3d", "--database", db_url,
                    "--http", f"127.0.0.1:{port}", "--udp", f"127.0.0.1:{port}",
                    "--workers", "1", "--state-file", os.path.join(workdir, "shoal.state"),
                    "--config", self.config, "--log-level", "warn", *extra]

    def start(self):
        for f in ("shoal.state", "shoal.state.ledger"):
            p = os.path.join(self.workdir, f)
            if os.path.exists(p):
                os.remove(p)
        cmd = self.cmd
        if self.cpus:
            cmd = ["taskset", "-c", self.cpus] + cmd
        env = dict(os.environ)
        env.pop("RUST_BACKTRACE", None)
        self.log = open(os.path.join(self.workdir, "tracker.log"), "a")
        self.proc = subprocess.Popen(cmd, cwd=self.workdir, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        wait_tcp(self.port, self.proc, self.name)
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
