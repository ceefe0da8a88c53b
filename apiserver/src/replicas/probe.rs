//! Whether a replica is there: a TCP connection to its serving port.
//!
//! A connection is all it takes to tell the two failures that matter here: a process that died
//! (its port refuses at once, or its network is gone) and a node that was lost (nothing
//! answers). A refusal is the other side's kernel saying so, so two in a row are enough; silence
//! could be a slow network, so it takes a while. A replica that is there but unwell is its
//! kubelet's business (liveness and readiness probes). No request is sent, so no TLS handshake
//! is spent and nothing is logged on the other side.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::Instant;

/// How long a connection may take. Replicas are a hop or two apart.
const TIMEOUT: Duration = Duration::from_secs(1);

/// Refusals in a row that mean a replica is gone.
const REFUSALS: u32 = 2;

/// What came of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Something accepts connections there.
    Accepted,
    /// Nothing listens there, or its network is gone: refused, or host or network unreachable.
    Refused,
    /// No answer within the timeout, or another error.
    Silent,
}

/// Connects to `address`, and says what came of it.
pub async fn knock(address: SocketAddr) -> Answer {
    use std::io::ErrorKind;
    match tokio::time::timeout(TIMEOUT, TcpStream::connect(address)).await {
        Ok(Ok(_)) => Answer::Accepted,
        Ok(Err(e))
            if matches!(
                e.kind(),
                ErrorKind::ConnectionRefused | ErrorKind::HostUnreachable | ErrorKind::NetworkUnreachable
            ) =>
        {
            Answer::Refused
        }
        _ => Answer::Silent,
    }
}

/// When each replica was last reached, on this replica's clock (so clocks that differ between
/// nodes cannot make a live replica look gone), and how many refusals it gave since.
#[derive(Debug)]
pub struct Reached<K> {
    last: HashMap<K, (Instant, u32)>,
}

impl<K: Hash + Eq + Clone> Default for Reached<K> {
    fn default() -> Self {
        Reached { last: HashMap::new() }
    }
}

impl<K: Hash + Eq + Clone> Reached<K> {
    /// Records a probe of `key` at `now`. A replica seen for the first time counts as reached:
    /// it is given the full time to answer.
    pub fn record(&mut self, key: &K, answer: Answer, now: Instant) {
        let entry = self.last.entry(key.clone()).or_insert((now, 0));
        match answer {
            Answer::Accepted => *entry = (now, 0),
            Answer::Refused => entry.1 += 1,
            Answer::Silent => {}
        }
    }

    /// Whether `key` refused [`REFUSALS`] connections in a row, or has not been reached for
    /// `within` (false for one never probed).
    pub fn gone(&self, key: &K, within: Duration, now: Instant) -> bool {
        self.last
            .get(key)
            .is_some_and(|(at, refusals)| *refusals >= REFUSALS || now.duration_since(*at) >= within)
    }

    /// Starts `key`'s count again, as if reached now (after acting on it, so as to act again
    /// only after another `within`).
    pub fn reset(&mut self, key: &K, now: Instant) {
        self.last.insert(key.clone(), (now, 0));
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
    fn a_replica_is_gone_after_a_time_without_an_answer_or_two_refusals() {
        let mut reached = Reached::default();
        let t0 = Instant::now();
        let within = Duration::from_secs(3);
        assert!(!reached.gone(&"a", within, t0), "never probed: not judged");
        reached.record(&"a", Answer::Silent, t0);
        assert!(!reached.gone(&"a", within, t0 + Duration::from_secs(2)), "first seen: given the time");
        assert!(reached.gone(&"a", within, t0 + within), "silent for the whole time");
        reached.record(&"a", Answer::Accepted, t0 + within);
        assert!(!reached.gone(&"a", within, t0 + within + Duration::from_secs(2)), "answered again");
        let t1 = t0 + within + Duration::from_secs(1);
        reached.record(&"a", Answer::Refused, t1);
        assert!(!reached.gone(&"a", within, t1), "one refusal is not enough");
        reached.record(&"a", Answer::Accepted, t1);
        reached.record(&"a", Answer::Refused, t1);
        assert!(!reached.gone(&"a", within, t1), "refusals count in a row");
        reached.record(&"a", Answer::Refused, t1);
        assert!(reached.gone(&"a", within, t1), "two in a row: nothing listens there");
        reached.reset(&"a", t0 + within * 3);
        assert!(!reached.gone(&"a", within, t0 + within * 3 + Duration::from_secs(1)), "counted again");
        reached.retain(|k| *k != "a");
        assert!(!reached.gone(&"a", within, t0 + within * 10), "forgotten");
    }

    #[tokio::test]
    async fn a_listening_port_accepts_and_a_closed_one_refuses() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        assert_eq!(knock(address).await, Answer::Accepted);
        drop(listener);
        assert_eq!(knock(address).await, Answer::Refused, "nothing listens there any more");
    }
}
