//! Whether a replica is there: a TCP connection to its serving port.
//!
//! A connection is all it takes to tell the two failures that matter here: a process that died
//! (its port refuses at once) and a node that was lost (nothing answers). A replica that is
//! there but unwell is its kubelet's business (liveness and readiness probes). No request is
//! sent, so no TLS handshake is spent and nothing is logged on the other side.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::Instant;

/// How long a connection may take. Replicas are a hop or two apart.
const TIMEOUT: Duration = Duration::from_secs(1);

/// Whether something accepts connections at `address`.
pub async fn connects(address: SocketAddr) -> bool {
    matches!(tokio::time::timeout(TIMEOUT, TcpStream::connect(address)).await, Ok(Ok(_)))
}

/// When each replica was last reached, on this replica's clock (so clocks that differ between
/// nodes cannot make a live replica look gone).
#[derive(Debug)]
pub struct Reached<K> {
    last: HashMap<K, Instant>,
}

impl<K: Hash + Eq + Clone> Default for Reached<K> {
    fn default() -> Self {
        Reached { last: HashMap::new() }
    }
}

impl<K: Hash + Eq + Clone> Reached<K> {
    /// Records a probe of `key` at `now`. A replica seen for the first time counts as reached:
    /// it is given the full time to answer.
    pub fn record(&mut self, key: &K, reached: bool, now: Instant) {
        match self.last.get_mut(key) {
            Some(at) if reached => *at = now,
            Some(_) => {}
            None => {
                self.last.insert(key.clone(), now);
            }
        }
    }

    /// Whether `key` has not been reached for `within` (false for one never probed).
    pub fn gone(&self, key: &K, within: Duration, now: Instant) -> bool {
        self.last.get(key).is_some_and(|at| now.duration_since(*at) >= within)
    }

    /// Starts `key`'s count again, as if reached now (after acting on it, so as to act again
    /// only after another `within`).
    pub fn reset(&mut self, key: &K, now: Instant) {
        self.last.insert(key.clone(), now);
    }

    /// Forgets every replica but those `keep` says to.
    pub fn retain(&mut self, keep: impl Fn(&K) -> bool) {
        self.last.retain(|k, _| keep(k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_is_gone_after_a_time_without_an_answer() {
        let mut reached = Reached::default();
        let t0 = Instant::now();
        let within = Duration::from_secs(3);
        assert!(!reached.gone(&"a", within, t0), "never probed: not judged");
        reached.record(&"a", false, t0);
        assert!(!reached.gone(&"a", within, t0 + Duration::from_secs(2)), "first seen: given the time");
        assert!(reached.gone(&"a", within, t0 + within));
        reached.record(&"a", true, t0 + within);
        assert!(!reached.gone(&"a", within, t0 + within + Duration::from_secs(2)), "answered again");
        reached.reset(&"a", t0 + within * 3);
        assert!(!reached.gone(&"a", within, t0 + within * 3 + Duration::from_secs(1)), "counted again");
        reached.retain(|k| *k != "a");
        assert!(!reached.gone(&"a", within, t0 + within * 10), "forgotten");
    }

    #[tokio::test]
    async fn a_listening_port_connects_and_a_closed_one_does_not() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        assert!(connects(address).await);
        drop(listener);
        assert!(!connects(address).await, "refused once nothing listens");
    }
}
