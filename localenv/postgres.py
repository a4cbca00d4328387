"""The Airflow deployment's metadata database: PostgreSQL outside the cluster, where a managed one is.

Debian's PostgreSQL 15 (localenv/build.sh installs it) runs as the ``postgres`` system user, which
cannot enter root's home, so its data directory is under that user's home (``/var/lib/postgresql``),
named after the environment, and removed by ``down``. It listens on every address for the pods on the
bridge; the pod network's guard lets only loopback and the bridge reach it, and its ``pg_hba.conf``
takes passwords from loopback and the pod subnet only.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from localenv import processes
from localenv.processes import ComponentError

COMPONENT = "postgres"
POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")
SYSTEM_USER = "postgres"
DATA_ROOT = Path("/var/lib/postgresql")
USER = "airflow"
# The local environment's, like its S3 keys.
PASSWORD = "local-airflow-password"
DATABASE = "airflow"
START_TIMEOUT_SECONDS = 60


def url(*, host: str, port: int, database: str = DATABASE) -> str:
    """The SQLAlchemy URL of ``database`` as Airflow's user, as Airflow's settings take it."""
    return f"postgresql+psycopg2://{USER}:{PASSWORD}@{host}:{port}/{database}"


def data_dir_for(home: Path) -> Path:
    """The data directory of the environment whose state directory is ``home``."""
    return DATA_ROOT / f"kai-scale-pipeline-{hashlib.sha256(str(home).encode()).hexdigest()[:12]}"


@dataclass(frozen=True, kw_only=True)
class PostgresServer:
    """One environment's server: its data directory, port, logs and pid file."""

    data_dir: Path
    port: int
    pod_subnet: ipaddress.IPv4Network
    logs_dir: Path
    run_dir: Path

    @property
    def log_path(self) -> Path:
        """The server's log."""
        return self.logs_dir / f"{COMPONENT}.log"

    def running(self) -> bool:
        """Whether the server process runs."""
        return processes.running_pid(name=COMPONENT, run_dir=self.run_dir) is not None

    def start(self) -> None:
        """Create the database cluster (first start only) and start the server; returns once it answers."""
        if not (POSTGRES_BIN / "postgres").exists():
            raise ComponentError(
                f"postgres: no {POSTGRES_BIN / 'postgres'}; install Debian's postgresql-15 "
                "(`make local-deps` does)"
            )
        fresh = not (self.data_dir / "PG_VERSION").exists()
        if fresh:
            self._init()
        processes.start(
            name=COMPONENT,
            argv=[
                *_as_postgres(),
                str(POSTGRES_BIN / "postgres"),
                "-D",
                str(self.data_dir),
                "-p",
                str(self.port),
                "-c",
                "listen_addresses=*",
                "-c",
                f"unix_socket_directories={self.data_dir}",
                # Airflow's components each keep a pool; the scheduler, the api-server's workers, the
                # dag-processor, the triggerer and one worker pod per task.
                "-c",
                "max_connections=300",
            ],
            log_dir=self.logs_dir,
            run_dir=self.run_dir,
        )
        processes.wait_until(
            self.answers,
            timeout=START_TIMEOUT_SECONDS,
            component=COMPONENT,
            log_path=self.log_path,
            what="accepting connections",
            alive=self.running,
        )
        if fresh:
            self._psql(f"CREATE DATABASE {DATABASE} OWNER {USER}")

    def answers(self) -> bool:
        """Whether the server accepts connections (pg_isready on its socket)."""
        result = subprocess.run(
            [str(POSTGRES_BIN / "pg_isready"), "-q", "-h", str(self.data_dir), "-p", str(self.port)],
            capture_output=True,
            check=False,
        )
        return result.returncode == 0

    def stop(self) -> None:
        """Stop the server (fast shutdown: connected clients are told, not waited for); the data stays.

        By its data directory's pid file, so that a server whose pid file of ours was lost stops too.
        """
        if (self.data_dir / "postmaster.pid").exists():
            pg_ctl = [str(POSTGRES_BIN / "pg_ctl"), "stop", "-D", str(self.data_dir), "-m", "fast"]
            # A server that does not stop in time is killed with its process group below.
            with contextlib.suppress(subprocess.TimeoutExpired):
                subprocess.run([*_as_postgres(), *pg_ctl], capture_output=True, check=False, timeout=60)
        processes.stop(name=COMPONENT, run_dir=self.run_dir)

    def remove(self) -> None:
        """Stop the server and remove its data directory."""
        self.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def _init(self) -> None:
        shutil.rmtree(self.data_dir, ignore_errors=True)
        self.data_dir.mkdir(parents=True)
        shutil.chown(self.data_dir, SYSTEM_USER, SYSTEM_USER)
        self.data_dir.chmod(0o700)
        with tempfile.NamedTemporaryFile("w", suffix=".pw") as password_file:
            password_file.write(PASSWORD)
            password_file.flush()
            shutil.chown(password_file.name, SYSTEM_USER, SYSTEM_USER)
            initdb = subprocess.run(
                [
                    *_as_postgres(),
                    str(POSTGRES_BIN / "initdb"),
                    "-D",
                    str(self.data_dir),
                    f"--username={USER}",
                    f"--pwfile={password_file.name}",
                    "--auth=scram-sha-256",
                    "--encoding=UTF8",
                    "--locale=C",
                ],
                capture_output=True,
                text=True,
                check=False,
            )
        if initdb.returncode != 0:
            raise ComponentError(f"postgres: initdb failed: {initdb.stderr.strip()[-2000:]}")
        # initdb's lines take passwords on the socket and from loopback; the pods' subnet too.
        with (self.data_dir / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all {self.pod_subnet} scram-sha-256\n")

    def query(self, statement: str, *, database: str = DATABASE) -> str:
        """Run a statement as the cluster's superuser, over the socket; its rows, ``|``-separated."""
        return self._psql(statement, database=database)

    def _psql(self, statement: str, *, database: str = "postgres") -> str:
        result = subprocess.run(
            [
                *_as_postgres(),
                str(POSTGRES_BIN / "psql"),
                "-h",
                str(self.data_dir),
                "-p",
                str(self.port),
                f"--username={USER}",
                f"--dbname={database}",
                "--tuples-only",
                "--no-align",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                statement,
            ],
            capture_output=True,
            text=True,
            check=False,
            env={"PGPASSWORD": PASSWORD, "PATH": "/usr/bin:/bin"},
        )
        if result.returncode != 0:
            raise ComponentError(f"postgres: {statement!r} failed: {result.stderr.strip()}")
        return result.stdout.strip()


def _as_postgres() -> list[str]:
    """The prefix that runs a command as the ``postgres`` system user (PostgreSQL refuses root)."""
    return ["setpriv", f"--reuid={SYSTEM_USER}", f"--regid={SYSTEM_USER}", "--init-groups", "--"]
