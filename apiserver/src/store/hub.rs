//! The change events of the derived objects, for watchers: a bounded, compressed history that
//! serves `resourceVersion` resumes (older versions get `410 Expired`, as from kube-apiserver,
//! and the client relists) and lets a watcher that fell behind the live channel catch up, and
//! the live channel itself.
//!
//! The namespace cache publishes here under the forest's write lock, so a watcher that
//! snapshots under the read lock and then subscribes sees every change exactly once.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{json, Value};
use tokio::sync::broadcast;

use crate::hierarchy::identity::{Derived, Sequence};

/// Events kept for resumes and for watchers catching up: at 300 events/s (100 hierarchy writes
/// a second) about half a minute, more than the time between two bookmarks, so a watcher that
/// reconnects from its last bookmark is not sent back to relist. A client further behind gets
/// 410 and relists, as from kube-apiserver.
const HISTORY: usize = 10_000;
/// The history's memory bound, compressed: events of a HierarchyConfiguration with hundreds of
/// children are large, and a fixed count of them would make memory grow with the tree.
const HISTORY_BYTES: usize = 32 << 20;
/// Events buffered for the live watchers; one that falls further behind catches up from the
/// history.
const CHANNEL: usize = 1_024;

/// One change.
#[derive(Debug)]
pub struct Event {
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub kind: &'static str,
    /// Which kind of derived object it is.
    pub derived: Derived,
    /// The object after the change (before it, for `DELETED`), with the event's resourceVersion.
    pub object: Value,
    /// The resourceVersion of the namespace event behind it.
    pub rv: u64,
    /// The watch line most watchers send (the object as it is, as JSON): made by the first
    /// watcher that needs it and shared by the others, instead of serialized once per watcher.
    line: OnceLock<bytes::Bytes>,
}

impl Event {
    /// A change of `object`, of `kind` (`ADDED`, `MODIFIED` or `DELETED`), at `rv`.
    pub fn new(kind: &'static str, derived: Derived, object: Value, rv: u64) -> Event {
        Event { kind, derived, object, rv, line: OnceLock::new() }
    }

    /// The event as a line of a watch of the plain representation.
    pub fn object_line(&self) -> bytes::Bytes {
        self.line.get_or_init(|| watch_line(self.kind, &self.object)).clone()
    }
}

/// The line of a watch stream for an event of `kind` about `object`.
pub fn watch_line(kind: &str, object: &Value) -> bytes::Bytes {
    let mut line = json!({"type": kind, "object": object}).to_string();
    line.push('\n');
    bytes::Bytes::from(line)
}

/// An event and its place in the order of publication.
pub type Numbered = (u64, Arc<Event>);

/// What watchers receive.
#[derive(Debug, Clone)]
pub enum Message {
    /// The events of one namespace change, in order.
    Events(Arc<[Numbered]>),
    /// The cache re-listed and may have missed changes: every watcher must start over.
    Reset,
}

/// The event history and the watchers' channel.
pub struct Hub {
    history: Mutex<History>,
    tx: broadcast::Sender<Message>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hub")
    }
}

/// An event as the history keeps it: the object as LZ4-compressed JSON, a tenth or less of the
/// memory of a `Value` (lists of children names compress well), since the history is read only
/// by watchers catching up.
struct Stored {
    n: u64,
    kind: &'static str,
    derived: Derived,
    rv: u64,
    object: Box<[u8]>,
}

impl Stored {
    fn new(n: u64, e: &Event) -> Stored {
        let json = serde_json::to_vec(&e.object).expect("a Value serializes");
        let object = lz4_flex::compress_prepend_size(&json).into_boxed_slice();
        Stored { n, kind: e.kind, derived: e.derived, rv: e.rv, object }
    }

    fn event(&self) -> Arc<Event> {
        let json =
            lz4_flex::decompress_size_prepended(&self.object).expect("the history holds what it compressed");
        let object = serde_json::from_slice(&json).expect("the history holds JSON it wrote");
        Arc::new(Event::new(self.kind, self.derived, object, self.rv))
    }
}

struct History {
    events: VecDeque<Stored>,
    /// The bytes of the stored objects.
    bytes: usize,
    /// Every event after this resourceVersion is in `events`.
    complete_after: u64,
    /// The number of the last event published.
    last: u64,
}

impl Default for Hub {
    fn default() -> Self {
        let (tx, _) = broadcast::channel(CHANNEL);
        Hub {
            history: Mutex::new(History { events: VecDeque::new(), bytes: 0, complete_after: 0, last: 0 }),
            tx,
        }
    }
}

impl Hub {
    /// A new subscriber to the live channel: it receives what is published after
    /// [`Hub::last`] as it stands now.
    pub fn subscribe(&self) -> broadcast::Receiver<Message> {
        self.tx.subscribe()
    }

    /// Watches open now.
    pub fn watches(&self) -> usize {
        self.tx.receiver_count()
    }

    /// Publishes the events of one namespace change. Called under the forest's write lock.
    ///
    /// They share one resourceVersion, so they travel as one message: a watcher sends all of
    /// them before it can send a bookmark, and a client resuming from that bookmark (or a
    /// replica's `since`, which serves events after a resourceVersion) cannot skip the rest.
    pub fn publish(&self, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        let mut h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        let mut batch = Vec::with_capacity(events.len());
        for e in events {
            h.last += 1;
            let stored = Stored::new(h.last, &e);
            h.bytes += stored.object.len();
            h.events.push_back(stored);
            while h.events.len() > HISTORY || h.bytes > HISTORY_BYTES {
                let Some(old) = h.events.pop_front() else { break };
                h.bytes -= old.object.len();
                // The history's versions are the namespaces'. The configuration's are its
                // ConfigMap's, which may be ahead of the forest or behind it: a watch of it
                // resumes without the history (crate::resources::watch).
                if old.derived.sequence() == Sequence::Namespaces {
                    h.complete_after = old.rv;
                }
            }
            batch.push((h.last, Arc::new(e)));
        }
        let _ = self.tx.send(Message::Events(batch.into()));
    }

    /// Forgets the history after a re-list at `rv` and cuts every watcher off.
    pub fn reset(&self, rv: u64) {
        let mut h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        h.events.clear();
        h.bytes = 0;
        h.complete_after = rv;
        let _ = self.tx.send(Message::Reset);
    }

    /// Events after `rv`, or `None` when the history no longer reaches back that far.
    pub fn since(&self, rv: u64) -> Option<Vec<Arc<Event>>> {
        let h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        (rv >= h.complete_after).then(|| h.events.iter().filter(|e| e.rv > rv).map(Stored::event).collect())
    }

    /// The number of the last event published: a new subscriber receives the ones after it.
    pub fn last(&self) -> u64 {
        self.history.lock().unwrap_or_else(|e| e.into_inner()).last
    }

    /// The events published after number `n`, or `None` if some of them have left the history.
    pub fn after(&self, n: u64) -> Option<Vec<Numbered>> {
        let h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        let oldest = h.events.front().map_or(h.last + 1, |first| first.n);
        (oldest <= n + 1).then(|| h.events.iter().filter(|e| e.n > n).map(|e| (e.n, e.event())).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_serves_resumes_and_expires() {
        let hub = Hub::default();
        let ev = |rv| Event::new("ADDED", Derived::HierarchyConfiguration, json!({"rv": rv}), rv);
        hub.reset(10);
        hub.publish(vec![ev(11), ev(12)]);
        let resumed = hub.since(11).unwrap();
        assert_eq!(resumed.len(), 1);
        assert_eq!((resumed[0].kind, resumed[0].rv, &resumed[0].object), ("ADDED", 12, &json!({"rv": 12})));
        assert_eq!(hub.since(10).unwrap().len(), 2);
        assert!(hub.since(9).is_none(), "before the history starts: 410");
    }

    #[test]
    fn a_lagging_watcher_catches_up_while_the_history_reaches_back() {
        let hub = Hub::default();
        let ev = |rv| Event::new("ADDED", Derived::HierarchyConfiguration, json!({}), rv);
        assert_eq!(hub.last(), 0);
        hub.publish(vec![ev(5), ev(5), ev(6)]);
        assert_eq!(hub.last(), 3);
        let missed: Vec<u64> = hub.after(1).unwrap().iter().map(|(n, _)| *n).collect();
        assert_eq!(missed, [2, 3], "numbered, so events sharing a resourceVersion are not lost");
        assert!(hub.after(3).unwrap().is_empty());
        hub.publish((0..HISTORY as u64).map(|i| ev(10 + i)).collect());
        assert!(hub.after(1).is_none(), "gone from the history: 410");
        assert!(hub.after(3).is_some());
    }

    #[test]
    fn the_events_of_one_change_reach_watchers_together() {
        let hub = Hub::default();
        let mut rx = hub.tx.subscribe();
        let ev = |kind| Event::new(kind, Derived::HierarchyConfiguration, json!({}), 8);
        hub.publish(vec![ev("ADDED"), ev("MODIFIED")]);
        hub.publish(Vec::new());
        match rx.try_recv() {
            Ok(Message::Events(batch)) => {
                assert_eq!(
                    batch.iter().map(|(n, e)| (*n, e.kind)).collect::<Vec<_>>(),
                    [(1, "ADDED"), (2, "MODIFIED")]
                );
            }
            other => panic!("expected one message with both events, got {other:?}"),
        }
        assert!(rx.try_recv().is_err(), "an empty change sends nothing");
    }

    #[test]
    fn the_history_is_bounded_in_bytes_as_well_as_in_count() {
        let hub = Hub::default();
        // Hex of a multiplicative hash: text that LZ4 can barely compress, 64 KiB an event.
        let noise = |rv: u64| -> String {
            (0..4_096u64)
                .map(|i| format!("{:016x}", (rv * 4_096 + i).wrapping_mul(0x9E37_79B9_7F4A_7C15)))
                .collect()
        };
        let ev = |rv| {
            Event::new("MODIFIED", Derived::HierarchyConfiguration, json!({ "children": noise(rv) }), rv)
        };
        hub.reset(0);
        let events = (HISTORY_BYTES / 65_536 * 2) as u64;
        for rv in 1..=events {
            hub.publish(vec![ev(rv)]);
        }
        let h = hub.history.lock().unwrap();
        assert!(
            h.bytes <= HISTORY_BYTES && h.events.len() < events as usize,
            "the oldest events were dropped"
        );
        assert_eq!(h.bytes, h.events.iter().map(|e| e.object.len()).sum::<usize>());
        drop(h);
        assert!(hub.since(1).is_none(), "gone from the history: 410");
        let last = hub.since(events - 1).expect("the newest events are kept");
        assert_eq!(last[0].object, json!({ "children": noise(events) }));
    }
}
