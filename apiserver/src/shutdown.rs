//! Stopping without failing anyone. kube-apiserver sends every request for hns's group, every
//! namespace deletion's discovery and every webhook call to a ready endpoint of hns's Service;
//! a replica that stopped accepting the moment it was told to stop would fail the requests that
//! still reach it while its endpoint leaves the EndpointSlices and kube-apiserver's view of them,
//! and an APIService whose check fails that way is Unavailable for every client in the cluster.
//! So, on SIGTERM (or SIGINT):
//!
//! 1. **Draining**, for `--shutdown-delay-duration`: `/readyz` fails (check `shutdown`), every
//!    request is still served, and every answer says `Connection: close`, so that kube-apiserver
//!    takes its pooled connections elsewhere as it learns the endpoint is gone (the pod is
//!    terminating, so the EndpointSlice controller has marked it not ready already).
//! 2. **Stopping**: open watches end, with a bookmark where the client allows them, so that it
//!    resumes from there on another replica without listing again; the server stops accepting
//!    connections and finishes the requests in flight (actix's shutdown timeout); the process
//!    releases its Lease and exits.
//!
//! As kube-apiserver's own `--shutdown-delay-duration`.

use std::time::Duration;

use tokio::sync::watch;

/// Where a replica is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Serving, ready.
    Serving,
    /// Told to stop: still serving, not ready, closing connections after each answer.
    Draining,
    /// Ending watches and in-flight requests; no new connections.
    Stopping,
}

/// The phase, shared by the handlers (readiness, connections, watches) and the signal task.
pub struct Shutdown {
    phase: watch::Sender<Phase>,
    /// Whether SIGTERM or SIGINT came.
    told: watch::Sender<bool>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown { phase: watch::Sender::new(Phase::Serving), told: watch::Sender::new(false) }
    }
}

impl Shutdown {
    /// The phase now.
    pub fn phase(&self) -> Phase {
        *self.phase.borrow()
    }

    /// Whether the replica has been told to stop.
    pub fn is_draining(&self) -> bool {
        self.phase() != Phase::Serving
    }

    /// Wakes on every change of phase.
    pub fn subscribe(&self) -> watch::Receiver<Phase> {
        self.phase.subscribe()
    }

    /// Moves to `phase`.
    pub fn enter(&self, phase: Phase) {
        self.phase.send_replace(phase);
    }

    /// Listens for SIGTERM and SIGINT from now on. In a container hns-apiserver is PID 1, which
    /// the kernel gives no default action for these signals: without a handler, one sent while
    /// the replica still starts would be ignored, and the kubelet would wait out the whole grace
    /// period before killing it.
    pub fn listen(self: &std::sync::Arc<Self>) {
        let me = self.clone();
        tokio::spawn(async move {
            signalled().await;
            me.told.send_replace(true);
        });
    }

    /// Returns once told to stop (see [`Shutdown::listen`]).
    pub async fn told(&self) {
        let mut told = self.told.subscribe();
        let _ = told.wait_for(|t| *t).await;
    }

    /// Once told to stop, drains for `delay`, then stops `server` gracefully.
    pub async fn on_signal(&self, delay: Duration, server: actix_web::dev::ServerHandle) {
        self.told().await;
        tracing::info!(
            delay_seconds = delay.as_secs_f64(),
            "told to stop: not ready, still serving while endpoints drop this replica"
        );
        self.enter(Phase::Draining);
        tokio::time::sleep(delay).await;
        tracing::info!("stopping: ending watches and finishing requests in flight");
        self.enter(Phase::Stopping);
        // Watches end on the phase change; a moment lets their last bookmarks go out.
        tokio::time::sleep(Duration::from_millis(200)).await;
        server.stop(true).await;
    }
}

/// Returns on SIGTERM or SIGINT.
async fn signalled() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; only SIGINT stops this replica gracefully");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = term => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_replica_told_to_stop_knows_it() {
        let shutdown = Shutdown::default();
        assert!(tokio::time::timeout(Duration::from_millis(10), shutdown.told()).await.is_err());
        shutdown.told.send_replace(true);
        tokio::time::timeout(Duration::from_millis(10), shutdown.told()).await.expect("told");
    }

    #[test]
    fn a_replica_drains_before_it_stops() {
        let shutdown = Shutdown::default();
        let mut phases = shutdown.subscribe();
        assert!(!shutdown.is_draining());
        shutdown.enter(Phase::Draining);
        assert!(shutdown.is_draining() && phases.has_changed().unwrap());
        assert_eq!(*phases.borrow_and_update(), Phase::Draining);
        shutdown.enter(Phase::Stopping);
        assert_eq!(*phases.borrow_and_update(), Phase::Stopping);
    }
}
