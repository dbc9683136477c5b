#!/usr/bin/env python3
"""Side by side with Slurm: the same burst of one-core `/bin/true` jobs on one 64-core node.

Run by hand, as root, from the repository's root (not in CI; README.md in this folder):

    cargo build --release -p shardsched
    apt-get install -y slurm-wlm munge
    python3 benches/peer/compare.py [--jobs 2000] [--submitters 8] [--systems slurm,shardsched]

Each system runs in a cgroup of its own (daemons, submitters, jobs), so its CPU time is read
whole from the cgroup's accounting, whatever else the machine runs. Figures, per system:
submit wall (median and p99 of every submit command), the submit phase, first submit → last
job ended (the end seen by polling the system's own job list, every 20 ms near the end), jobs/s over that,
CPU per job (everything in the cgroup from first submit to last end; the driver's polls
run outside it, though the daemons' work to answer them is inside), and the wall of the
client's `--version` beside the submit median (issue 20 item 5's yardstick). Each system's
work directory is a fresh journaled ext4 of its own (`--fs fresh`, see `FreshFs`).
"""
import argparse, glob, json, os, shutil, socket, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
POLL_S = 0.02


class Cgroup:
    """A CPU-accounting cgroup (v1 cpuacct, else v2) that children join before exec."""

    def __init__(self, name):
        v1 = "/sys/fs/cgroup/cpuacct"
        if os.path.isdir(v1):
            self.path, self.v2 = os.path.join(v1, name), False
        else:
            root = "/sys/fs/cgroup/unified" if os.path.isdir("/sys/fs/cgroup/unified") else "/sys/fs/cgroup"
            self.path, self.v2 = os.path.join(root, name), True
        os.makedirs(self.path, exist_ok=True)

    def join(self):
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    def cpu_s(self):
        if self.v2:
            for line in open(os.path.join(self.path, "cpu.stat")):
                k, v = line.split()
                if k == "usage_usec":
                    return int(v) / 1e6
        return int(open(os.path.join(self.path, "cpuacct.usage")).read()) / 1e9

    def remove(self):
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)


def run(cmd, cg, env=None, check=True):
    """Runs `cmd` to its end, in cgroup `cg` (None: outside, e.g. the driver's own polls)."""
    t = time.monotonic()
    p = subprocess.run(cmd, env=env, preexec_fn=cg.join if cg else None, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - t
    if check and p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    return p, wall


def process_cpu_s(pid):
    """User + system CPU time of process `pid` so far (0 if it is gone)."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for(what, predicate, timeout_s=600):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            sys.exit(f"timed out waiting for {what}")
        time.sleep(POLL_S)
    return time.monotonic()


class Slurm:
    name = "slurm"

    def __init__(self, workdir, cg):
        self.dir, self.cg, self.procs = workdir, cg, []
        host = socket.gethostname()
        conf = open(os.path.join(HERE, "slurm.conf.in")).read()
        conf = conf.replace("@HOST@", host).replace("@DIR@", workdir)
        for sub in ("state", "spool"):
            os.makedirs(os.path.join(workdir, sub), exist_ok=True)
        self.conf = os.path.join(workdir, "slurm.conf")
        open(self.conf, "w").write(conf)
        self.env = dict(os.environ, SLURM_CONF=self.conf)

    def start(self):
        if not os.path.exists("/etc/munge/munge.key"):
            subprocess.run(["mungekey", "--create"], check=True)
        os.makedirs("/run/munge", exist_ok=True)
        self.procs.append(subprocess.Popen(["munged", "--foreground", "--force"],
                                           preexec_fn=self.cg.join))
        time.sleep(0.5)
        for cmd in (["slurmctld", "-D", "-c", "-f", self.conf], ["slurmd", "-D", "-f", self.conf]):
            self.procs.append(subprocess.Popen(cmd, env=self.env, preexec_fn=self.cg.join,
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for("the node to be idle", lambda: run(
            ["sinfo", "-h", "-o", "%t"], self.cg, self.env, check=False)[0].stdout.strip() == "idle", 120)

    def daemons(self):
        """The long-lived processes whose CPU per job is reported apart, by name."""
        return {p.args[0]: p.pid for p in self.procs}

    def version_cmd(self):
        return ["sbatch", "--version"]

    def submit_cmd(self):
        return ["sbatch", "-n", "1", "-o", "/dev/null", "--wrap", "/bin/true"]

    def active(self):
        out = run(["squeue", "-h", "-o", "%i"], None, self.env, check=False)[0].stdout
        return len(out.split())

    def completed(self):
        out = run(["squeue", "-h", "-t", "all", "-o", "%T"], None, self.env, check=False)[0].stdout
        return out.split().count("COMPLETED")

    def stop(self):
        for p in reversed(self.procs):
            p.terminate()
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()


class Shardsched:
    name = "shardsched"

    def __init__(self, workdir, cg, binary):
        self.dir, self.cg, self.bin, self.proc = workdir, cg, binary, None
        self.env = dict(os.environ, SHARDSCHED_DIR=workdir)

    def start(self):
        self.proc = subprocess.Popen(
            [self.bin, "up", "--config", os.path.join(HERE, "config.toml"), "--dir", self.dir,
             "--executor", "exec"], env=self.env, preexec_fn=self.cg.join,
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.dir, "up.log"), "w"))
        wait_for("the queue", lambda: run([self.bin, "queue", "list"], self.cg, self.env,
                                          check=False)[0].returncode == 0, 120)

    def daemons(self):
        """`up` and its children (the coordinator, the shard), by subcommand."""
        pids = {"up": self.proc.pid}
        for task in os.listdir(f"/proc/{self.proc.pid}/task"):
            for pid in open(f"/proc/{self.proc.pid}/task/{task}/children").read().split():
                name = open(f"/proc/{pid}/cmdline").read().split("\0")[1]
                pids[name] = int(pid)
        return pids

    def version_cmd(self):
        return [self.bin, "--version"]

    def submit_cmd(self):
        return [self.bin, "submit", "-n", "1", "--", "/bin/true"]

    def listing(self, *flags):
        out = run([self.bin, "jobs", "-A", *flags, "--format", "{id}", "--no-header"],
                  None, self.env, check=False)[0].stdout
        return len(out.split())

    def active(self):
        return self.listing()

    def completed(self):
        return self.listing("--state", "completed")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class FreshFs:
    """A journaled ext4 file system made for one system's run (a sparse image on a loop
    device, mounted at its work directory), so that each system's state, spool and job
    files live on a file system as a site's spool would, untouched by what ran before.

    Why: this machine's root is ext4 *without* a journal, where allocating an inode skips
    every inode freed in the last minute or more (`recently_deleted`, reading each one's
    inode block): the cost of every file a job makes then grows with what the previous run,
    or another session's build, deleted, and the same binary measured 9.6 and 16.2 ms of
    CPU per job a few minutes apart. `--fs root` keeps the old way (the work directory on
    the root file system)."""

    SIZE = "4G"

    def __init__(self, workdir):
        self.mount, self.image = workdir, workdir + ".img"
        for cmd in (["truncate", "-s", self.SIZE, self.image],
                    ["mkfs.ext4", "-q", "-F", self.image],
                    ["mount", "-o", "loop", self.image, self.mount]):
            try:
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                why = p.stdout.strip() if p.returncode != 0 else None
            except OSError as e:
                why = str(e)
            if why is not None:
                if os.path.exists(self.image):
                    os.unlink(self.image)
                os.rmdir(self.mount)
                sys.exit(f"cannot make a file system for the run ({' '.join(cmd)}: {why}); "
                         "without loop devices, use --fs root")

    def remove(self):
        # A process left holding a file keeps a plain unmount from succeeding: detach it
        # lazily then, so that no mount outlives the run.
        if subprocess.run(["umount", self.mount], check=False).returncode != 0:
            subprocess.run(["umount", "-l", self.mount], check=False)
        os.unlink(self.image)


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def measure(system, jobs, submitters):
    cg = system.cg
    versions = [run(system.version_cmd(), cg, system.env)[1] for _ in range(20)]
    per = [jobs // submitters + (1 if i < jobs % submitters else 0) for i in range(submitters)]
    daemons = system.daemons()
    daemons0 = {name: process_cpu_s(pid) for name, pid in daemons.items()}
    cpu0, t0 = cg.cpu_s(), time.monotonic()
    # Each submitter is a shell loop timing its own commands: the python driver spawns none.
    # The clock is bash's own $EPOCHREALTIME (µs), not `$(date +%s%N)`: two `date`
    # processes per submit cost ~4 ms of CPU inside the cgroup, counted against each job.
    script = 'for i in $(seq "$1"); do s=${EPOCHREALTIME/[.,]/}; "${@:2}" >/dev/null || exit 1; ' \
             'e=${EPOCHREALTIME/[.,]/}; echo $(((e - s) * 1000)); done'
    loops = [subprocess.Popen(["bash", "-c", script, "submitter", str(n), *system.submit_cmd()],
                              env=system.env, preexec_fn=cg.join, stdout=subprocess.PIPE, text=True)
             for n in per]
    walls = []
    for p in loops:
        out, _ = p.communicate()
        if p.returncode != 0:
            sys.exit(f"{system.name}: a submit failed")
        walls += [int(x) / 1e9 for x in out.split()]
    t_submitted = time.monotonic()
    # Polls cost the daemons CPU that is counted: poll seldom while many jobs remain, every
    # 20 ms near the end (the end's resolution).
    deadline = time.monotonic() + 1800
    while (remaining := system.active()) > 0:
        if time.monotonic() > deadline:
            sys.exit(f"{system.name}: {remaining} jobs still active after 30 minutes")
        time.sleep(min(1.0, max(POLL_S, remaining * 0.002)))
    t_end = time.monotonic()
    cpu1 = cg.cpu_s()
    # The daemons' share of the CPU per job; the rest is the submit commands (and their
    # shell loops), the supervisors or `slurmstepd`, and the jobs.
    daemons_ms = {f"{name}_cpu_ms_per_job": (process_cpu_s(pid) - daemons0[name]) * 1e3 / jobs
                  for name, pid in daemons.items()}
    done = system.completed()
    return {
        "system": system.name, "jobs": jobs, "submitters": submitters, "completed": done,
        "version_median_ms": statistics.median(versions) * 1e3,
        "submit_median_ms": statistics.median(walls) * 1e3,
        "submit_p99_ms": percentile(walls, 0.99) * 1e3,
        "submit_max_ms": max(walls) * 1e3,
        "submit_phase_s": t_submitted - t0,
        "submit_rate": jobs / (t_submitted - t0),
        "end_to_end_s": t_end - t0,
        "jobs_per_s": jobs / (t_end - t0),
        "cpu_ms_per_job": (cpu1 - cpu0) * 1e3 / jobs,
        "load_avg": os.getloadavg()[0],
        **daemons_ms,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--submitters", type=int, default=8)
    ap.add_argument("--systems", default="slurm,shardsched")
    ap.add_argument("--shardsched", default="target/release/shardsched")
    ap.add_argument("--dir", default="/tmp/peer-bench")
    ap.add_argument("--fs", choices=["fresh", "root"], default="fresh",
                    help="fresh: each system on a new journaled ext4 (loop device) under --dir; "
                         "root: directly in --dir")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: Slurm's daemons and the cgroups need it")
    results = []
    for name in a.systems.split(","):
        workdir = os.path.join(a.dir, f"{name}-{os.getpid()}")
        os.makedirs(workdir)
        fs = FreshFs(workdir) if a.fs == "fresh" else None
        try:
            cg = Cgroup(f"peer-{name}-{os.getpid()}")
            system = Slurm(workdir, cg) if name == "slurm" else Shardsched(workdir, cg, os.path.abspath(a.shardsched))
            try:
                system.start()
                results.append({**measure(system, a.jobs, a.submitters), "fs": a.fs})
            finally:
                system.stop()
                cg.remove()
        finally:
            if fs:
                fs.remove()
            shutil.rmtree(workdir, ignore_errors=True)
        print(json.dumps(results[-1]), flush=True)
    keys = ["completed", "version_median_ms", "submit_median_ms", "submit_p99_ms", "submit_rate",
            "end_to_end_s", "jobs_per_s", "cpu_ms_per_job", "load_avg"]
    print("\n| system | " + " | ".join(keys) + " |")
    print("|---|" + "---:|" * len(keys))
    for r in results:
        print(f"| {r['system']} | " + " | ".join(
            f"{r[k]:.1f}" if isinstance(r[k], float) else str(r[k]) for k in keys) + " |")


if __name__ == "__main__":
    main()
