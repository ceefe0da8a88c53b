//! How far a watch-fed cache has got, as a resourceVersion, for callers waiting on a version
//! they already know of (their own write, or one they read from kube-apiserver).

use std::time::Duration;

/// The resourceVersion a cache has reached.
#[derive(Debug)]
pub struct Reached(tokio::sync::watch::Sender<u64>);

impl Default for Reached {
    fn default() -> Self {
        Reached(tokio::sync::watch::Sender::new(0))
    }
}

impl Reached {
    /// The cache now holds resourceVersion `rv`; waiters for it or an older one go on.
    pub fn set(&self, rv: u64) {
        self.0.send_if_modified(|at| std::mem::replace(at, rv) != rv);
    }

    /// The resourceVersion the cache holds.
    pub fn at(&self) -> u64 {
        *self.0.borrow()
    }

    /// Waits up to `within` for the cache to reach `rv`; false if it did not in time.
    pub async fn wait(&self, rv: u64, within: Duration) -> bool {
        let mut reached = self.0.subscribe();
        let outcome = tokio::time::timeout(within, reached.wait_for(|at| *at >= rv)).await;
        matches!(outcome, Ok(Ok(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waiters_go_on_once_the_version_is_reached() {
        let reached = Reached::default();
        assert!(!reached.wait(5, Duration::from_millis(10)).await);
        assert_eq!(reached.at(), 0);
        reached.set(7);
        assert_eq!(reached.at(), 7);
        assert!(reached.wait(5, Duration::from_millis(10)).await);
        assert!(reached.wait(7, Duration::from_millis(10)).await);
    }
}
