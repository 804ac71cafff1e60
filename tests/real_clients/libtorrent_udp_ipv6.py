#!/usr/bin/python3
"""The UDP real-client test (libtorrent_udp.py) over IPv6: tracker and both libtorrent
sessions on ::1, tracker URL udp://[::1]:PORT/announce. Same options as libtorrent_udp.py."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
import libtorrent_udp  # noqa: E402

if __name__ == "__main__":
    sys.argv[1:1] = ["--ipv6"]
    sys.exit(libtorrent_udp.main())
