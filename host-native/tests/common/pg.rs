//! A throw-away PostgreSQL cluster for the tests: PostgreSQL 15 from the
//! distribution's packages (installed with apt-get when missing and this
//! runs as root), `initdb` as the unprivileged `postgres` user in a temp
//! folder, on a free loopback port, stopped and deleted when dropped. Every
//! wait is bounded.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian puts the server binaries.
pub const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

/// A running cluster; its database superuser is `tnx`, with no password
/// (trust, on 127.0.0.1 only).
pub struct PgCluster {
    pub port: u16,
    dir: PathBuf,
    child: Option<std::process::Child>,
}

fn bin(name: &str) -> PathBuf {
    Path::new(PG_BIN).join(name)
}

/// Installs PostgreSQL 15 from the distribution's packages if its binaries
/// are missing (root only: otherwise the error says what to install).
pub fn ensure_installed() {
    if bin("initdb").exists() {
        return;
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    assert!(
        root,
        "PostgreSQL 15 is not installed ({PG_BIN}): run `apt-get install -y postgresql` as root"
    );
    let run = |args: &[&str]| {
        let status = Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .expect("apt-get");
        assert!(status.success(), "apt-get {args:?} failed");
    };
    run(&["update", "-q"]);
    run(&[
        "install",
        "-y",
        "-q",
        "--no-install-recommends",
        "postgresql",
    ]);
    assert!(
        bin("initdb").exists(),
        "apt-get installed no {PG_BIN}/initdb"
    );
}

/// Runs `program` as the `postgres` user when we are root (initdb refuses
/// root), else as ourselves.
fn as_postgres(program: &Path) -> Command {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

impl PgCluster {
    /// A new cluster, running and accepting connections.
    pub fn start() -> PgCluster {
        ensure_installed();
        let dir = std::env::temp_dir().join(format!(
            "toolnexus-pg-{}-{}",
            std::process::id(),
            super::free_port()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        // The postgres user owns it (initdb runs as that user).
        let _ = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(&dir)
            .status();
        let data = dir.join("data");
        let out = as_postgres(&bin("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-U", "tnx", "-A", "trust", "--no-sync", "-E", "UTF8"])
            .stdout(Stdio::null())
            .output()
            .expect("initdb");
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = super::free_port();
        let mut cluster = PgCluster {
            port,
            dir,
            child: None,
        };
        cluster.run();
        cluster
    }

    /// Starts the server on the cluster's folder and port; returns once it
    /// accepts connections (bounded: 60 s).
    fn run(&mut self) {
        let child = as_postgres(&bin("postgres"))
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-p", &self.port.to_string(), "-k"])
            .arg(&self.dir)
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=300",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start postgres");
        self.child = Some(child);
        let port = self.port;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ready = Command::new(bin("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "tnx"])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "PostgreSQL did not accept connections within 60 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the server as a database restart does (`pg_ctl stop -m fast`:
    /// connections cut, what was committed written out), bounded.
    #[allow(dead_code)]
    pub fn stop(&mut self) {
        self.halt("fast");
    }

    /// Starts it again after [`PgCluster::stop`], on the same port.
    #[allow(dead_code)]
    pub fn restart(&mut self) {
        if self.child.is_none() {
            self.run();
        }
    }

    /// `pg_ctl stop -m <mode>`, then waits (bounded) for the server to end.
    fn halt(&mut self, mode: &str) {
        if let Some(mut child) = self.child.take() {
            let _ = as_postgres(&bin("pg_ctl"))
                .arg("-D")
                .arg(self.dir.join("data"))
                .args(["stop", "-m", mode, "-w", "-t", "10"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// A fresh database `name` in the cluster; its URL.
    pub fn database(&self, name: &str) -> String {
        self.sql("postgres", &format!("CREATE DATABASE {name}"));
        self.url(name)
    }

    /// The URL of database `name`.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://tnx@127.0.0.1:{}/{name}", self.port)
    }

    /// Runs one SQL statement in `db`; its output (unaligned, tuples only).
    pub fn sql(&self, db: &str, statement: &str) -> String {
        let out = Command::new(bin("psql"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "tnx",
                "-d",
                db,
                "-At",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                statement,
            ])
            .output()
            .expect("psql");
        assert!(
            out.status.success(),
            "{statement}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for PgCluster {
    /// Stops the server at once (immediate shutdown: a throw-away cluster
    /// needs no checkpoint), waits for it (bounded), deletes it.
    fn drop(&mut self) {
        self.halt("immediate");
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
