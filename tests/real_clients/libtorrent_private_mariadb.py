#!/usr/bin/python3
"""The PostgreSQL real-client test of private mode (libtorrent_private_postgres.py) against
a real MariaDB server instead (Debian's mariadb-server, installed if missing, started here on
a free loopback port with a private data directory): the accounting scenarios and the
outage. Same options as libtorrent_private_postgres.py."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
import libtorrent_private_postgres  # noqa: E402

if __name__ == "__main__":
    libtorrent_private_postgres.finish(libtorrent_private_postgres.main("mariadb"))
