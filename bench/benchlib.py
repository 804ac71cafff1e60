"""Helpers shared by bench/http_compare.py and bench/ws_compare.py (the same approach as
bench/udp_compare.py, whose helpers these are, generalised to TCP): /proc readers for the CPU of
the tracker, the load generator and everything else over the steady window, free-port checks,
stop-by-PID, min / median / max tables. Standard library only.
"""
import os
import resource
import signal
import shutil
import socket
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK_TCK = os.sysconf("SC_CLK_TCK")
NOFILE = 65536  # open-file limit given to trackers, load generators and the idle-connection client

_prefix = ["bench"]


def set_log_prefix(name):
    _prefix[0] = name


def log(msg):
    print(f"[{_prefix[0]} {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def find_tool(env, name):
    if os.environ.get(env):
        return os.environ[env]
    cand = os.path.join("/work/tools/bin", name)
    if os.access(cand, os.X_OK):
        return cand
    return shutil.which(name) or name


def have(path):
    return os.access(path, os.X_OK) or shutil.which(path) is not None


# ---------------------------------------------------------------- /proc readers

def proc_cpu_ticks(pid):
    """utime + stime of the whole process (all threads), in clock ticks. Readable for a zombie that
    has not been reaped yet, which is how a load generator's CPU is taken right after it exits."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of stat(5)


def proc_state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


def pid_alive(pid):
    st = proc_state(pid)
    return st is not None and st not in ("Z", "X")


def wait_exit_unreaped(pid, timeout_s):
    """Wait until pid has exited but is not reaped yet (a zombie): its /proc/PID/stat then still
    holds its final CPU times. Does not reap (never calls wait). True if it exited in time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.02)
    return False


def proc_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def proc_affinities(pid):
    """Cpus_allowed_list of every thread of pid."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("Cpus_allowed_list:"):
                        out[tid] = line.split()[1]
        except FileNotFoundError:
            pass
    return out


def system_ticks():
    """(busy, softirq) ticks of all CPUs from /proc/stat; busy excludes idle and iowait."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (v + [0] * 8)[:8]
    return user + nice + system + irq + softirq + steal, softirq


def ksoftirqd_pids():
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/comm") as f:
                    if f.read().startswith("ksoftirqd/"):
                        pids.append(int(d))
            except OSError:
                pass
    return pids


KSOFTIRQD = ksoftirqd_pids()


def tcp_counters():
    """Machine-wide TCP counters from /proc/net/snmp (PassiveOpens = connections accepted)."""
    with open("/proc/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Tcp:")]
    return dict(zip(rows[0][1:], (int(x) for x in rows[1][1:])))


def snapshot(tracker_pid, load_pid):
    tcp = tcp_counters()
    busy, softirq = system_ticks()
    ksoft = 0
    for pid in KSOFTIRQD:
        try:
            ksoft += proc_cpu_ticks(pid)
        except OSError:
            pass
    return {
        "t": time.monotonic(),
        "tracker": proc_cpu_ticks(tracker_pid),
        "load": proc_cpu_ticks(load_pid),
        "busy": busy,
        "softirq": softirq,
        "ksoftirqd": ksoft,
        "accepts": tcp.get("PassiveOpens", 0),
        "out_rsts": tcp.get("OutRsts", 0),
    }


def window(s0, s1):
    """CPU figures between two snapshots, in seconds and % of one core. "others" is all busy CPU of
    the machine minus tracker, load generator and ksoftirqd (on loopback that is the benchmark's
    own packet delivery, shown on its own)."""
    w = s1["t"] - s0["t"]
    tr = (s1["tracker"] - s0["tracker"]) / CLK_TCK
    lg = (s1["load"] - s0["load"]) / CLK_TCK
    busy = (s1["busy"] - s0["busy"]) / CLK_TCK
    soft = (s1["softirq"] - s0["softirq"]) / CLK_TCK
    ksoft = (s1["ksoftirqd"] - s0["ksoftirqd"]) / CLK_TCK
    others = max(0.0, busy - tr - lg - ksoft)
    return {
        "window_s": w,
        "tracker_cpu_s": tr,
        "tracker_cpu_pct": round(100 * tr / w, 1),
        "load_cpu_pct": round(100 * lg / w, 1),
        "others_cpu_pct": round(100 * others / w, 1),
        "softirq_pct": round(100 * soft / w, 1),
        "ksoftirqd_pct": round(100 * ksoft / w, 1),
        # machine-wide, but only the benchmark runs: connections accepted and resets sent per second
        "tcp_accepts_per_s": round((s1["accepts"] - s0["accepts"]) / w),
        "tcp_out_rsts_per_s": round((s1["out_rsts"] - s0["out_rsts"]) / w),
    }


def pinning_note(pid, cpus):
    aff = proc_affinities(pid)
    bad = {t: c for t, c in aff.items() if c != cpus}
    return len(aff), (f"threads not pinned to {cpus}: {bad}; " if bad else "")


# ---------------------------------------------------------------- ports, processes

def tcp_port_free(port, host="127.0.0.1"):
    """A bind without SO_REUSEADDR: fails also while TIME_WAIT sockets hold the port."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def udp_port_free(port, host="127.0.0.1"):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def pick_tcp_port(base, also_udp=False):
    for port in range(base, base + 200):
        if tcp_port_free(port) and (not also_udp or udp_port_free(port)):
            return port
    raise RuntimeError(f"no free TCP port in {base}..{base + 199}")


def wait_tcp(port, pid, timeout_s=10.0):
    """Wait until something accepts TCP connections on 127.0.0.1:port (and pid is alive)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def stop(proc, name):
    """Stop one process we started, by its PID: SIGTERM, then SIGKILL after 5 s."""
    if proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        log(f"{name} (pid {proc.pid}) ignored SIGTERM; SIGKILL")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


def child_env():
    env = dict(os.environ)
    env.pop("RUST_BACKTRACE", None)
    env.pop("RUST_LIB_BACKTRACE", None)
    return env


def raise_nofile(n=NOFILE):
    """Raise RLIMIT_NOFILE (soft and, if allowed, hard) in this process; used as preexec_fn."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(n, soft), max(n, hard)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def machine():
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "kernel": os.uname().release, "cpu": model}


def make_cert(outdir):
    """Self-signed RSA-2048 certificate and PKCS#8 key (PEM), made once per output directory."""
    cert, key = os.path.join(outdir, "cert.pem"), os.path.join(outdir, "key.pem")
    if not (os.path.exists(cert) and os.path.exists(key)):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "30", "-subj", "/CN=localhost"], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    return cert, key


# ---------------------------------------------------------------- report

def mmm(vals, fmt="{:,.0f}"):
    if not vals:
        return "-"
    return " / ".join(fmt.format(v) for v in (min(vals), statistics.median(vals), max(vals)))


def med(rows, key, fmt="{:.0f}"):
    vals = [r[key] for r in rows if r.get(key, "") != ""]
    return fmt.format(statistics.median(vals)) if vals else "-"


def used_runs(rows, name, keep_noisy):
    mine = [r for r in rows if r["contender"] == name]
    ok = [r for r in mine if r["ok"]]
    used = ok if keep_noisy else [r for r in ok if not r.get("noisy")]
    return mine, used


def table(rows, contenders, keep_noisy, rate_cols, extra_cols=()):
    """Markdown table. rate_cols: [(key, label)] shown as min / median / max; extra_cols:
    [(key, label, fmt)] shown as medians. Returns (lines, {contender: {key: median}})."""
    head = ["contender", "runs used (dropped)"] + [f"{lab} min / median / max" for _, lab in rate_cols] + \
        ["tracker CPU % (median)", "load gen CPU % (median)", "others CPU % (median)"] + \
        [lab for _, lab, _ in extra_cols]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    medians = {}
    for name in contenders:
        mine, used = used_runs(rows, name, keep_noisy)
        if not mine:
            continue
        cells = [name, f"{len(used)} ({len(mine) - len(used)})"]
        medians[name] = {}
        for key, _ in rate_cols:
            vals = [r[key] for r in used if r.get(key, "") != ""]
            cells.append(mmm(vals))
            if vals:
                medians[name][key] = statistics.median(vals)
        cells += [med(used, "tracker_cpu_pct"), med(used, "load_cpu_pct"), med(used, "others_cpu_pct", "{:.1f}")]
        cells += [med(used, key, fmt) for key, _, fmt in extra_cols]
        out.append("| " + " | ".join(cells) + " |")
    return out, medians


def notes(rows, noisy_limit, keep_noisy):
    out = []
    noisy = [f"{r.get('scenario', '')} round {r['round']} {r['contender']}: others {r['others_cpu_pct']}%"
             for r in rows if r["ok"] and r.get("noisy")]
    if noisy:
        out.append(f"Noisy runs (others > {noisy_limit}% of a core){' (kept)' if keep_noisy else ' (dropped)'}: "
                   + "; ".join(noisy))
    n = [f"{r.get('scenario', '')} round {r['round']} {r['contender']}: {r['note'].strip().rstrip(';')}"
         for r in rows if r["note"]]
    if n:
        out.append("Run notes: " + "; ".join(n))
    return out
