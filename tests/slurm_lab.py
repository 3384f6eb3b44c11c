"""A private single-host Slurm 22.05 with slurmdbd + MariaDB accounting, for live tests.

Follows the slurm-lab recipe: every daemon runs in the foreground under its own PID (no
systemd), all state lives under one directory, ports are picked free, and :meth:`stop`
ends exactly the PIDs started here, dependents first. Needs root (munged ``--force``,
``SlurmUser=root``) and the Debian packages of ``.ci/setup.d/10-slurm.sh``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "mariadbd", "mariadb-install-db", "slurmdbd", "slurmctld", "slurmd", "sacct", "sbatch")


def missing_binaries() -> list[str]:
    """The lab's programs that are not installed (``/usr/sbin`` included)."""
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    return [b for b in DAEMONS if shutil.which(b, path=path) is None]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(predicate, timeout: float, what: str, step: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(step)
    raise TimeoutError(f"slurm lab: {what} not ready after {timeout:.0f} s")


class SlurmLab:
    """Start with :meth:`start`, submit with :meth:`sbatch`, always :meth:`stop`."""

    def __init__(self, root: Path, cluster: str = "lab"):
        self.root = root
        self.cluster = cluster
        self.host = socket.gethostname().split(".")[0]
        self.pids: dict[str, int] = {}
        self.logs: dict[str, Path] = {}
        self.env = {**os.environ, "TZ": "UTC", "SLURM_CONF": str(root / "etc" / "slurm.conf"),
                    "PATH": os.environ.get("PATH", "") + ":/usr/sbin:/sbin"}

    # ------------------------------------------------------------ lifecycle

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = self.root / "log" / f"{name}.out"
        self.logs[name] = log
        with log.open("wb") as fh:
            proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=self.env,
                                    start_new_session=True)
        self.pids[name] = proc.pid

    def run(self, *argv: str, check: bool = True, timeout: float = 60) -> str:
        """Run a Slurm client command against this lab; returns stdout."""
        done = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=timeout)
        if check and done.returncode != 0:
            raise RuntimeError(f"slurm lab: {' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
        return done.stdout

    def start(self) -> None:
        """Start munged, MariaDB, slurmdbd, slurmctld and slurmd; wait until the node is idle."""
        r = self.root
        for sub in ("munge", "state", "spool", "log", "etc", "mysql", "run", "jobs"):
            (r / sub).mkdir(parents=True, exist_ok=True)
        (r / "munge").chmod(0o700)
        key = r / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        sock = r / "munge" / "munge.socket"
        self._spawn("munged", ["munged", "-F", "--force", f"--socket={sock}", f"--key-file={key}",
                               f"--pid-file={r / 'munge' / 'munged.pid'}", f"--seed-file={r / 'munge' / 'seed'}"])
        db_port, dbd_port, ctld_port, d_port = (_free_port() for _ in range(4))
        self.run("mariadb-install-db", "--no-defaults", f"--datadir={r / 'mysql'}", "--user=root",
                 "--auth-root-authentication-method=normal", "--skip-test-db", timeout=120)
        my_sock = r / "run" / "mysql.sock"
        self._spawn("mariadbd", ["mariadbd", "--no-defaults", f"--datadir={r / 'mysql'}", "--user=root",
                                 f"--socket={my_sock}", f"--port={db_port}", "--bind-address=127.0.0.1",
                                 f"--pid-file={r / 'run' / 'mariadbd.pid'}", f"--log-error={r / 'log' / 'mariadb.err'}",
                                 "--innodb-buffer-pool-size=64M", "--skip-name-resolve"])
        sql = ["mariadb", "--no-defaults", "-S", str(my_sock), "-uroot"]
        _wait(lambda: subprocess.run([*sql, "-e", "select 1"], capture_output=True).returncode == 0, 30, "MariaDB")
        self.run(*sql, "-e", "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw'; "
                             "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';")
        auth = f"AuthType=auth/munge\nAuthInfo=socket={sock}\n"
        dbd = r / "etc" / "slurmdbd.conf"
        dbd.write_text(
            f"{auth}DbdHost=localhost\nDbdAddr=127.0.0.1\nDbdPort={dbd_port}\nSlurmUser=root\n"
            f"DebugLevel=info\nLogFile={r / 'log' / 'slurmdbd.log'}\nPidFile={r / 'run' / 'slurmdbd.pid'}\n"
            f"StorageType=accounting_storage/mysql\nStorageHost=127.0.0.1\nStoragePort={db_port}\n"
            "StorageUser=slurm\nStoragePass=slurmpw\nStorageLoc=slurm_acct_db\n"
        )
        dbd.chmod(0o600)  # slurmdbd refuses a readable config
        (r / "etc" / "slurm.conf").write_text(
            f"ClusterName={self.cluster}\nSlurmctldHost={self.host}(127.0.0.1)\n{auth}CredType=cred/munge\n"
            f"SlurmUser=root\nSlurmdUser=root\nSlurmctldPort={ctld_port}\nSlurmdPort={d_port}\n"
            f"StateSaveLocation={r / 'state'}\nSlurmdSpoolDir={r / 'spool'}/slurmd.%n\n"
            f"SlurmctldPidFile={r / 'run'}/slurmctld.pid\nSlurmdPidFile={r / 'run'}/slurmd.%n.pid\n"
            f"SlurmctldLogFile={r / 'log'}/slurmctld.log\nSlurmdLogFile={r / 'log'}/slurmd.%n.log\n"
            "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
            "JobAcctGatherType=jobacct_gather/linux\nJobAcctGatherFrequency=5\n"
            "SchedulerType=sched/backfill\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
            "ReturnToService=2\nMpiDefault=none\nMinJobAge=30\nInactiveLimit=0\nKillWait=5\nWaittime=0\n"
            f"AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=127.0.0.1\n"
            f"AccountingStoragePort={dbd_port}\n"
            # the persistent slurmdbd connection takes its munge socket from this field
            f"AccountingStoragePass={sock}\n"
            f"NodeName={self.host} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} RealMemory=1000 State=UNKNOWN\n"
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n"
        )
        self._spawn("slurmdbd", ["slurmdbd", "-D"])
        _wait(lambda: subprocess.run(["sacctmgr", "-n", "list", "cluster"], env=self.env,
                                     capture_output=True).returncode == 0, 60, "slurmdbd")
        self.run("sacctmgr", "-i", "add", "cluster", self.cluster)
        self.run("sacctmgr", "-i", "add", "account", "research", "Description=r", "Organization=o")
        self.run("sacctmgr", "-i", "add", "user", "root", "Account=research")
        self._spawn("slurmctld", ["slurmctld", "-D", "-i"])
        _wait(lambda: subprocess.run(["scontrol", "ping"], env=self.env, capture_output=True,
                                     text=True).stdout.count("UP") > 0, 60, "slurmctld")
        self._spawn("slurmd", ["slurmd", "-D"])
        _wait(lambda: "idle" in self.run("sinfo", "-h", "-o", "%T", check=False), 60, "slurmd")

    def stop(self) -> None:
        """End the lab's jobs, then every daemon started here, by PID, dependents first."""
        if "slurmctld" in self.pids:
            # slurmstepd outlives slurmd: cancel and let the steps finish before stopping daemons
            self.run("scancel", "--full", "-u", "root", check=False)
            try:
                _wait(lambda: not self.run("squeue", "-h", check=False).strip(), 30, "job cleanup")
            except TimeoutError:
                pass
        for name in ("slurmd", "slurmctld", "slurmdbd", "mariadbd", "munged"):
            pid = self.pids.pop(name, None)
            if pid is None:
                continue
            try:
                os.kill(pid, 15)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass

    def tail_logs(self, lines: int = 20) -> str:
        """The end of every daemon log, for a failure message."""
        out = []
        for path in sorted((self.root / "log").glob("*")):
            text = path.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(out)

    # ------------------------------------------------------------ jobs

    def sbatch(self, *args: str) -> str:
        """Submit a batch job; returns its job id."""
        out = self.run("sbatch", "--parsable", f"--chdir={self.root / 'jobs'}", *args)
        return out.strip().split(";")[0]

    def job_state(self, job_id: str) -> str:
        """The controller's current state of a job (``squeue``), or ``""`` when it has left."""
        return self.run("squeue", "-h", "-j", job_id, "-o", "%T", check=False).strip()

    def wait_running(self, job_id: str, timeout: float = 60) -> None:
        """Wait until ``job_id`` runs."""
        _wait(lambda: self.job_state(job_id) == "RUNNING", timeout, f"job {job_id} running")

    def wait_file(self, name: str, timeout: float = 60) -> None:
        """Wait until a job has written ``name`` in the jobs' working folder: its batch
        script started (RUNNING in the controller comes before the step on the node)."""
        _wait(lambda: (self.root / "jobs" / name).exists(), timeout, f"{name} written by a job")

    def accounted_states(self, job_ids: list[str]) -> dict[str, str]:
        """Allocation state per job (array tasks as ``<id>_<task>``) as slurmdbd records it."""
        # ask with a time window as the connector does: right after a node failure slurmdbd
        # can answer `sacct -j` before the job's record matches a windowed query
        out = self.run("sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j", ",".join(job_ids),
                       "-S", "now-1day", "-E", "now+1hour", check=False)
        return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)

    def step_exit_codes(self, job_id: str) -> dict[str, str]:
        """``ExitCode`` (``code:signal``) per step of ``job_id`` that slurmdbd has ended."""
        out = self.run("sacct", "-n", "-P", "-o", "JobID,State,ExitCode", "-j", job_id,
                       "-S", "now-1day", "-E", "now+1hour", check=False)
        rows = (line.split("|") for line in out.splitlines() if line.count("|") == 2)
        return {step: code for step, state, code in rows
                if "." in step and not state.startswith(("RUNNING", "PENDING", "COMPLETING"))}

    def wait_step_accounted(self, job_id: str, step: str, timeout: float = 60) -> None:
        """Wait until slurmdbd has the end of ``<job_id>.<step>`` (:meth:`step_exit_codes`).

        The allocation's record can be final while a step's end is still on its way from
        slurmd through slurmctld, and a cancelled job's SIGTERM is only on its batch step."""
        _wait(lambda: f"{job_id}.{step}" in self.step_exit_codes(job_id), timeout,
              f"accounting of step {job_id}.{step}", step=1)

    def wait_accounted_running(self, job_id: str, timeout: float = 60) -> None:
        """Wait until slurmdbd has recorded the start of ``job_id`` (it lags the controller)."""
        _wait(lambda: self.accounted_states([job_id]).get(job_id) == "RUNNING", timeout,
              f"accounting of job {job_id} running")

    def wait_accounted(self, job_ids: list[str], expect: int, timeout: float) -> dict[str, str]:
        """Wait until sacct shows ``expect`` allocations of ``job_ids``, none still active."""
        active = ("PENDING", "RUNNING", "COMPLETING", "REQUEUED", "CONFIGURING")
        states: dict[str, str] = {}

        def done() -> bool:
            states.clear()  # a pending array summary (5_[2-3]) disappears once its tasks start
            states.update(self.accounted_states(job_ids))
            return len(states) >= expect and not any(s.startswith(active) for s in states.values())

        _wait(done, timeout, f"accounting of jobs {job_ids}", step=1)
        return states
