//! The processes of the local control plane (`hack/control-plane.sh`, `hack/hns-up.sh`): find
//! them by their pid files, SIGKILL them, and start them again exactly as they were (same command
//! line, environment and log file), as a supervisor such as the kubelet would.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};

/// A process started from a pid file in `<dir>/pids/<name>.pid`, logging to `<dir>/logs/<name>.log`.
pub struct Processes {
    dir: PathBuf,
    /// Processes this program started again; kept so that killing them reaps them too.
    children: Mutex<HashMap<String, Child>>,
}

/// A process killed by [`Processes::kill`].
pub struct Stopped {
    name: String,
    captured: Captured,
}

/// What it takes to start a process again.
struct Captured {
    argv: Vec<String>,
    env: Vec<(String, String)>,
    cwd: PathBuf,
}

impl Processes {
    pub fn new(dir: &Path) -> Processes {
        Processes { dir: dir.to_path_buf(), children: Mutex::new(HashMap::new()) }
    }

    /// The pid of process `name`, if its pid file names a live process.
    pub fn pid(&self, name: &str) -> Option<u32> {
        let pid: u32 =
            std::fs::read_to_string(self.dir.join(format!("pids/{name}.pid"))).ok()?.trim().parse().ok()?;
        Path::new(&format!("/proc/{pid}")).exists().then_some(pid)
    }

    /// The CPU time process `name` has used (all its threads, user and system), in seconds.
    pub fn cpu_seconds(&self, name: &str) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid(name)?)).ok()?;
        // Fields after the command, which is in parentheses and may hold spaces: utime and stime
        // are the 14th and 15th of the line, in clock ticks (USER_HZ, 100 on Linux).
        let after = stat.rsplit_once(')')?.1;
        let mut fields = after.split_whitespace().skip(11);
        let user: f64 = fields.next()?.parse().ok()?;
        let system: f64 = fields.next()?.parse().ok()?;
        Some((user + system) / 100.0)
    }

    /// The CPU time every pod on the control plane's nodes has used, in seconds: each node of
    /// hack/nodes.sh (`nodes/NAME`) keeps its pods under its own cgroup root, `/NAME`, which
    /// cgroup v1's cpuacct counts. `None` without nodes or without cpuacct.
    pub fn node_pods_cpu_seconds(&self) -> Option<f64> {
        let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
        let cpuacct = mounts
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|f| f.len() > 3 && f[2] == "cgroup" && f[3].split(',').any(|o| o == "cpuacct"))?[1]
            .to_string();
        let mut nanoseconds = 0u64;
        for node in std::fs::read_dir(self.dir.join("nodes")).ok()?.flatten() {
            let usage = Path::new(&cpuacct).join(node.file_name()).join("cpuacct.usage");
            nanoseconds += std::fs::read_to_string(usage).ok()?.trim().parse::<u64>().ok()?;
        }
        Some(nanoseconds as f64 / 1e9)
    }

    /// Resident memory of process `name` in MiB.
    pub fn rss_mib(&self, name: &str) -> Option<f64> {
        self.status_mib(name, "VmRSS:")
    }

    /// The most resident memory process `name` has had since [`Self::reset_peak_rss`] (or since
    /// it started), in MiB.
    pub fn peak_rss_mib(&self, name: &str) -> Option<f64> {
        self.status_mib(name, "VmHWM:")
    }

    /// Starts measuring process `name`'s peak resident memory afresh (Linux's `clear_refs` 5).
    pub fn reset_peak_rss(&self, name: &str) -> bool {
        self.pid(name).is_some_and(|pid| std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok())
    }

    fn status_mib(&self, name: &str, field: &str) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid(name)?)).ok()?;
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix(field))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kib / 1024.0)
    }

    /// SIGKILLs process `name` and starts it again after `down`; returns once it runs again.
    pub async fn kill_and_restart(&self, name: &str, down: Duration) -> anyhow::Result<()> {
        let stopped = self.kill(name).await?;
        tokio::time::sleep(down).await;
        self.start(stopped)
    }

    /// SIGKILLs process `name`; returns once it is gone, with what it takes to start it again.
    pub async fn kill(&self, name: &str) -> anyhow::Result<Stopped> {
        let pid = self.pid(name).ok_or_else(|| anyhow::anyhow!("{name} is not running"))?;
        let captured = capture(pid)?;
        let status = Command::new("kill").args(["-9", &pid.to_string()]).status()?;
        anyhow::ensure!(status.success(), "kill -9 {pid} ({name}) failed");
        if let Some(mut child) = self.children.lock().unwrap().remove(name) {
            let _ = child.wait();
        }
        while Path::new(&format!("/proc/{pid}")).exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(Stopped { name: name.to_string(), captured })
    }

    /// Starts a killed process again, exactly as it ran.
    pub fn start(&self, stopped: Stopped) -> anyhow::Result<()> {
        self.respawn(&stopped.name, stopped.captured)
    }

    fn respawn(&self, name: &str, c: Captured) -> anyhow::Result<()> {
        let log =
            OpenOptions::new().append(true).create(true).open(self.dir.join(format!("logs/{name}.log")))?;
        let child = Command::new(&c.argv[0])
            .args(&c.argv[1..])
            .env_clear()
            .envs(c.env)
            .current_dir(c.cwd)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        std::fs::write(self.dir.join(format!("pids/{name}.pid")), format!("{}\n", child.id()))?;
        self.children.lock().unwrap().insert(name.to_string(), child);
        Ok(())
    }
}

fn capture(pid: u32) -> anyhow::Result<Captured> {
    let split = |bytes: Vec<u8>| -> Vec<String> {
        bytes
            .split(|b| *b == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect()
    };
    let argv = split(std::fs::read(format!("/proc/{pid}/cmdline"))?);
    let env = split(std::fs::read(format!("/proc/{pid}/environ"))?)
        .into_iter()
        .filter_map(|kv| kv.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
        .collect();
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd"))?;
    anyhow::ensure!(!argv.is_empty(), "process {pid} has no command line");
    Ok(Captured { argv, env, cwd })
}

/// The hns-apiserver replicas started by `hack/hns-up.sh` (HNS_REPLICAS).
pub struct Replicas {
    /// Process names, replica 0 first, as `hack/hns-up.sh` wrote them in the env file.
    pub names: Vec<String>,
}

/// Which replica a fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Leader,
    Follower,
}

impl Replicas {
    pub fn new(names: Vec<String>) -> Replicas {
        Replicas { names }
    }

    /// The replica holding the controller's Lease (its holder identity is `<name>_<pid>`), or
    /// `None` while nobody holds it.
    pub async fn leader(&self, client: &Client, processes: &Processes) -> Option<String> {
        let lease =
            Api::<Lease>::namespaced(client.clone(), "hns-system").get("hns-controller").await.ok()?;
        let holder = lease.spec?.holder_identity?;
        let (name, pid) = holder.rsplit_once('_')?;
        let live = processes.pid(name).map(|p| p.to_string());
        (self.names.iter().any(|n| n == name) && live.as_deref() == Some(pid)).then(|| name.to_string())
    }

    /// The replica with `role`, waiting (up to a minute) for a live leader first.
    pub async fn pick(&self, role: Role, client: &Client, processes: &Processes) -> anyhow::Result<String> {
        for _ in 0..600 {
            if let Some(leader) = self.leader(client, processes).await {
                return Ok(match role {
                    Role::Leader => leader,
                    Role::Follower => self.names.iter().find(|n| **n != leader).cloned().unwrap_or(leader),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        anyhow::bail!("no live replica holds the hns-controller Lease")
    }
}
