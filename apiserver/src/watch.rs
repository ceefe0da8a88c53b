//! Watch: change events of the derived objects, with resume by resourceVersion.
//!
//! Every namespace event changes a few derived objects (its hierarchy configuration, its
//! parents' configurations, its Subnamespace). The cache diffs them before and after the change
//! and publishes the differences here, under the forest's write lock, so a watcher that
//! snapshots under the read lock and then subscribes sees every change exactly once. A bounded
//! history serves `resourceVersion` resumes; older versions get `410 Expired`, as from
//! kube-apiserver, and the client relists. The same history lets a watcher that fell behind
//! the live channel catch up instead of being cut off.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use actix_web::HttpResponse;
use serde_json::{json, Value};
use tokio::sync::broadcast;

use crate::auth::tls::PeerSocket;
use crate::hierarchy::forest::Forest;
use crate::hierarchy::policy::Policy;
use crate::http::list::ListOptions;
use crate::http::negotiation::Representation;
use crate::http::request_info::ResourceRequest;
use crate::http::status::ApiError;
use crate::resources::render::{self, RenderOptions};
use crate::resources::{hierarchyconfigurations, hncconfigurations, subnamespaces, ResourceDef};
use crate::state::AppState;

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
/// Longest watch; clients reconnect (kube-apiserver picks 30–60 minutes).
const MAX_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// How often a watcher that allows bookmarks gets one.
const BOOKMARK_EVERY: Duration = Duration::from_secs(30);
/// How often a watch looks whether its client is still there.
const PEER_CHECK_EVERY: Duration = Duration::from_secs(5);

/// Which derived family an event belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Family {
    /// HierarchyConfigurations.
    Hierarchy,
    /// Subnamespaces (served as both kinds).
    Subnamespace,
    /// The HNC configuration.
    Config,
}

impl Family {
    fn of(def: &ResourceDef) -> Family {
        match def.plural {
            hierarchyconfigurations::PLURAL => Family::Hierarchy,
            hncconfigurations::PLURAL => Family::Config,
            _ => Family::Subnamespace,
        }
    }
}

/// One change.
#[derive(Debug)]
pub struct Event {
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub kind: &'static str,
    /// The family of the object.
    pub family: Family,
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
    pub fn new(kind: &'static str, family: Family, object: Value, rv: u64) -> Event {
        Event { kind, family, object, rv, line: OnceLock::new() }
    }

    /// The event as a line of a watch of the plain representation.
    fn object_line(&self) -> bytes::Bytes {
        self.line.get_or_init(|| watch_line(self.kind, &self.object)).clone()
    }
}

/// The line of a watch stream for an event of `kind` about `object`.
fn watch_line(kind: &str, object: &Value) -> bytes::Bytes {
    let mut line = json!({"type": kind, "object": object}).to_string();
    line.push('\n');
    bytes::Bytes::from(line)
}

/// An event and its place in the order of publication.
type Numbered = (u64, Arc<Event>);

/// What watchers receive.
#[derive(Debug, Clone)]
enum Message {
    /// The events of one namespace change, in order.
    Events(Arc<[Numbered]>),
    /// The cache re-listed and may have missed changes: every watcher must start over.
    Reset,
}

/// A derived object: its family, namespace and name.
pub type Key = (Family, String, String);

/// Derived objects by key, as they stand at one moment.
pub type Snapshot = BTreeMap<Key, Value>;

/// The derived objects a change of a namespace to `node` (or its deletion) can touch: its own
/// configuration, the configurations of its parent before and after, its Subnamespace in either
/// parent, and, when it starts terminating or goes, the Subnamespaces in it, which then may cease
/// to exist ([`Forest::anchor_exists`]).
pub fn keys_for(forest: &Forest, node: &crate::hierarchy::forest::Node, delete: bool) -> Vec<Key> {
    let ns = node.name();
    let hierarchy = |n: &str| (Family::Hierarchy, n.to_string(), "hierarchy".to_string());
    let sub = |p: &str| (Family::Subnamespace, p.to_string(), ns.to_string());
    let mut keys = vec![hierarchy(ns)];
    let terminating = !delete && node.object.metadata.deletion_timestamp.is_some();
    let mut termination_changes = delete;
    if let Some(old) = forest.get(ns) {
        keys.extend(old.parent.as_deref().map(hierarchy));
        if old.is_subnamespace {
            keys.extend(old.parent.as_deref().map(sub));
        }
        termination_changes |= old.object.metadata.deletion_timestamp.is_some() != terminating;
    }
    if !delete {
        keys.extend(node.parent.as_deref().map(hierarchy));
        if node.is_subnamespace {
            keys.extend(node.parent.as_deref().map(sub));
        }
    }
    if termination_changes {
        keys.extend(
            forest.subnamespaces(ns).map(|c| (Family::Subnamespace, ns.to_string(), c.name().to_string())),
        );
    }
    keys.sort();
    keys.dedup();
    keys
}

/// The objects at `keys` as they stand in `forest` (absent ones are left out).
pub fn snapshot(forest: &Forest, policy: &Policy, keys: &[Key]) -> Snapshot {
    let mut snap = Snapshot::new();
    for key in keys {
        let (family, ns, name) = key;
        let value = match family {
            Family::Hierarchy => hierarchyconfigurations::value_of(forest, ns),
            Family::Config => None,
            Family::Subnamespace => forest
                .get(name)
                .filter(|n| n.is_subnamespace && n.parent.as_deref() == Some(ns.as_str()))
                .filter(|n| forest.anchor_exists(n))
                .map(|n| subnamespaces::value_of(policy, n, "Subnamespace")),
        };
        if let Some(v) = value {
            snap.insert(key.clone(), v);
        }
    }
    snap
}

/// The events that take `before` to `after` at resourceVersion `rv`.
pub fn diff(before: &Snapshot, after: &Snapshot, rv: u64) -> Vec<Event> {
    let mut events = Vec::new();
    let stamped = |v: &Value| {
        let mut v = v.clone();
        v["metadata"]["resourceVersion"] = rv.to_string().into();
        v
    };
    for (key, new) in after {
        let kind = match before.get(key) {
            None => "ADDED",
            Some(old) if old != new => "MODIFIED",
            Some(_) => continue,
        };
        events.push(Event::new(kind, key.0, stamped(new), rv));
    }
    for (key, old) in before.iter().filter(|(k, _)| !after.contains_key(*k)) {
        events.push(Event::new("DELETED", key.0, stamped(old), rv));
    }
    events
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
    family: Family,
    rv: u64,
    object: Box<[u8]>,
}

impl Stored {
    fn new(n: u64, e: &Event) -> Stored {
        let json = serde_json::to_vec(&e.object).expect("a Value serializes");
        let object = lz4_flex::compress_prepend_size(&json).into_boxed_slice();
        Stored { n, kind: e.kind, family: e.family, rv: e.rv, object }
    }

    fn event(&self) -> Arc<Event> {
        let json =
            lz4_flex::decompress_size_prepended(&self.object).expect("the history holds what it compressed");
        let object = serde_json::from_slice(&json).expect("the history holds JSON it wrote");
        Arc::new(Event::new(self.kind, self.family, object, self.rv))
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
                h.complete_after = old.rv;
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
    fn since(&self, rv: u64) -> Option<Vec<Arc<Event>>> {
        let h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        (rv >= h.complete_after).then(|| h.events.iter().filter(|e| e.rv > rv).map(Stored::event).collect())
    }

    /// The number of the last event published: a new subscriber receives the ones after it.
    fn last(&self) -> u64 {
        self.history.lock().unwrap_or_else(|e| e.into_inner()).last
    }

    /// The events published after number `n`, or `None` if some of them have left the history.
    fn after(&self, n: u64) -> Option<Vec<Numbered>> {
        let h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        let oldest = h.events.front().map_or(h.last + 1, |first| first.n);
        (oldest <= n + 1).then(|| h.events.iter().filter(|e| e.n > n).map(|e| (e.n, e.event())).collect())
    }
}

/// Where a watch starts.
enum Start {
    /// Synthetic ADDED events for the current state first.
    Current { initial_events_end: bool },
    /// Changes after this resourceVersion.
    After(u64),
}

fn start_of(query: &HashMap<String, String>) -> Result<Start, ApiError> {
    let rv = query.get("resourceVersion").map(String::as_str).unwrap_or("");
    let send_initial = query.get("sendInitialEvents").map(String::as_str) == Some("true");
    if send_initial {
        let bookmarks = query.get("allowWatchBookmarks").map(String::as_str) == Some("true");
        let not_older = query.get("resourceVersionMatch").map(String::as_str) == Some("NotOlderThan");
        if !bookmarks || !not_older {
            return Err(ApiError::invalid_watch(
                "sendInitialEvents=true needs allowWatchBookmarks=true and resourceVersionMatch=NotOlderThan",
            ));
        }
        return Ok(Start::Current { initial_events_end: true });
    }
    match rv {
        "" | "0" => Ok(Start::Current { initial_events_end: false }),
        rv => rv.parse().map(Start::After).map_err(|_| {
            ApiError::bad_request(format!("resourceVersion: invalid value \"{rv}\": not a resource version"))
        }),
    }
}

/// How a watch begins.
enum Begin {
    /// These lines, then changes (and the end-of-initial-events bookmark first, if asked).
    Lines { lines: Vec<bytes::Bytes>, initial_events_end: bool },
    /// The requested resourceVersion is too old: one ERROR line and the end.
    Expired(bytes::Bytes),
}

/// Filters events for one watcher and renders them.
struct Watcher {
    def: &'static ResourceDef,
    family: Family,
    namespace: String,
    opts: ListOptions,
    render: RenderOptions,
}

impl Watcher {
    fn wants(&self, e: &Event) -> bool {
        e.family == self.family
            && (self.namespace.is_empty()
                || e.object["metadata"]["namespace"].as_str() == Some(&self.namespace))
            && self.opts.selects(&e.object)
    }

    fn line(&self, kind: &str, object: &Value) -> bytes::Bytes {
        let mut object = object.clone();
        if self.family == Family::Subnamespace {
            object["kind"] = self.def.kind.into();
        }
        // Ages are computed when the event is sent, not when the watch began.
        let render = RenderOptions { now: jiff::Timestamp::now(), ..self.render };
        watch_line(kind, &render::object(self.def, object, &render))
    }

    /// The line for event `e`: the shared one when this watcher sends the object as it is.
    fn event_line(&self, e: &Event) -> bytes::Bytes {
        let as_is = self.render.representation == Representation::Object
            && (self.family != Family::Subnamespace || e.object["kind"].as_str() == Some(self.def.kind));
        if as_is {
            e.object_line()
        } else {
            self.line(e.kind, &e.object)
        }
    }

    fn bookmark(&self, rv: u64, initial_events_end: bool) -> bytes::Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_events_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let object = match self.render.representation {
            Representation::Object => {
                json!({"kind": self.def.kind, "apiVersion": hns_api::API_VERSION, "metadata": meta})
            }
            _ => json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}),
        };
        bytes::Bytes::from(format!("{}\n", json!({"type": "BOOKMARK", "object": object})))
    }

    fn expired(&self, why: &str) -> bytes::Bytes {
        let status = ApiError::expired(why).to_status_value();
        bytes::Bytes::from(format!("{}\n", json!({"type": "ERROR", "object": status})))
    }
}

/// How long a watch from a resourceVersion the forest has not reached waits for it (another
/// replica may be ahead) before it is refused, as long as kube-apiserver's watch cache waits.
const TOO_LARGE_WAIT: Duration = Duration::from_secs(3);

/// Serves a watch request as a stream of JSON lines, until its timeout or until the client on
/// `peer` leaves.
pub async fn serve(
    peer: Option<PeerSocket>,
    state: &AppState,
    def: &'static ResourceDef,
    req: &ResourceRequest,
    query: &HashMap<String, String>,
    render: &RenderOptions,
) -> Result<HttpResponse, ApiError> {
    let start = start_of(query)?;
    if let Start::After(rv) = start {
        if !state.cache.reaches(rv, TOO_LARGE_WAIT).await {
            return Err(ApiError::too_large_resource_version(
                rv,
                state.cache.read().resource_version_number(),
            ));
        }
    }
    let bookmarks = query.get("allowWatchBookmarks").map(String::as_str) == Some("true");
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs)
        .map_or(MAX_TIMEOUT, |t| t.min(MAX_TIMEOUT));
    let watcher = Watcher {
        def,
        family: Family::of(def),
        namespace: req.namespace.clone(),
        opts: ListOptions { limit: None, after: None, ..ListOptions::from_query(query)? },
        render: *render,
    };
    // Snapshot and subscribe under one read lock: every later change reaches the channel, and
    // none before it does.
    let (begin, mut rx, mut last_rv, mut last_seen) = {
        let forest = state.cache.read();
        let rx = state.cache.hub.tx.subscribe();
        let last_seen = state.cache.hub.last();
        let now_rv = forest.resource_version_number();
        let begin = match start {
            Start::Current { initial_events_end } => {
                let objects = crate::resources::current_objects(state, &forest, def, &req.namespace);
                let lines = objects
                    .iter()
                    .filter(|o| watcher.opts.selects(o))
                    .map(|o| watcher.line("ADDED", o))
                    .collect();
                Begin::Lines { lines, initial_events_end }
            }
            Start::After(rv) => match state.cache.hub.since(rv) {
                Some(events) => Begin::Lines {
                    lines: events
                        .iter()
                        .filter(|e| watcher.wants(e))
                        .map(|e| watcher.event_line(e))
                        .collect(),
                    initial_events_end: false,
                },
                None => {
                    Begin::Expired(watcher.expired(&format!("too old resource version: {rv} ({now_rv})")))
                }
            },
        };
        (begin, rx, now_rv, last_seen)
    };
    let cache = state.cache.clone();
    let stream = async_stream::stream! {
        let initial_events_end = match begin {
            Begin::Expired(line) => {
                yield Ok::<_, actix_web::Error>(line);
                return;
            }
            Begin::Lines { lines, initial_events_end } => {
                for line in lines {
                    yield Ok(line);
                }
                initial_events_end
            }
        };
        if initial_events_end {
            yield Ok(watcher.bookmark(last_rv, true));
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let mut ticker = tokio::time::interval(PEER_CHECK_EVERY);
        ticker.tick().await;
        let mut next_bookmark = tokio::time::Instant::now() + BOOKMARK_EVERY;
        loop {
            // Events to send now: one from the channel, or those a lagging watcher missed.
            let events: Arc<[Numbered]> = tokio::select! {
                _ = tokio::time::sleep_until(deadline) => {
                    // As kube-apiserver does, a last bookmark lets the client resume from here.
                    if bookmarks {
                        yield Ok(watcher.bookmark(last_rv, false));
                    }
                    return;
                }
                now = ticker.tick() => {
                    if peer.as_ref().is_some_and(PeerSocket::is_closed) {
                        return; // the client left: free what the watch holds now, not at its timeout
                    }
                    if bookmarks && now >= next_bookmark {
                        next_bookmark = now + BOOKMARK_EVERY;
                        yield Ok(watcher.bookmark(last_rv, false));
                    }
                    continue;
                }
                msg = rx.recv() => match msg {
                    Ok(Message::Events(batch)) => batch,
                    Err(broadcast::error::RecvError::Lagged(_)) => match cache.hub.after(last_seen) {
                        Some(missed) => missed.into(),
                        None => {
                            yield Ok(watcher.expired("the watch fell too far behind; list again"));
                            return;
                        }
                    },
                    Ok(Message::Reset) => {
                        yield Ok(watcher.expired("the namespace cache re-listed; list again"));
                        return;
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            };
            // After a catch-up, the channel still holds some of the same events: skip them.
            for (n, e) in events.iter() {
                if *n <= last_seen {
                    continue;
                }
                last_seen = *n;
                last_rv = last_rv.max(e.rv);
                if watcher.wants(e) {
                    yield Ok(watcher.event_line(e));
                }
            }
        }
    };
    Ok(HttpResponse::Ok().content_type("application/json").streaming(stream))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hierarchy::forest::testing::{forest, namespace};
    use crate::hierarchy::policy::testing::policy;

    fn change(f: &mut Forest, ns: k8s_openapi::api::core::v1::Namespace, delete: bool) -> Vec<Event> {
        let p = policy();
        let node = f.node_of(ns.clone());
        let keys = keys_for(f, &node, delete);
        let before = snapshot(f, &p, &keys);
        if delete {
            f.remove(&ns);
        } else {
            f.upsert(ns);
        }
        diff(&before, &snapshot(f, &p, &keys), 7)
    }

    fn summary(events: &[Event]) -> Vec<(&'static str, Family, String)> {
        events
            .iter()
            .map(|e| (e.kind, e.family, e.object["metadata"]["namespace"].as_str().unwrap_or("").to_string()))
            .collect()
    }

    #[test]
    fn a_new_subnamespace_adds_objects_and_modifies_its_parent() {
        let mut f = forest("team-a");
        let events = change(&mut f, namespace("dev", Some("team-a"), true), false);
        assert_eq!(
            summary(&events),
            [
                ("ADDED", Family::Hierarchy, "dev".into()),
                ("MODIFIED", Family::Hierarchy, "team-a".into()),
                ("ADDED", Family::Subnamespace, "team-a".into())
            ]
        );
        assert!(events.iter().all(|e| e.object["metadata"]["resourceVersion"] == "7"));
    }

    #[test]
    fn deleting_a_namespace_deletes_its_objects() {
        let mut f = forest("team-a dev:~team-a");
        let events = change(&mut f, namespace("dev", Some("team-a"), true), true);
        assert_eq!(
            summary(&events),
            [
                ("MODIFIED", Family::Hierarchy, "team-a".into()),
                ("DELETED", Family::Hierarchy, "dev".into()),
                ("DELETED", Family::Subnamespace, "team-a".into())
            ]
        );
    }

    #[test]
    fn anchors_go_when_a_terminating_subnamespace_finds_its_parent_terminating() {
        let terminating = |mut ns: k8s_openapi::api::core::v1::Namespace| {
            ns.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()));
            crate::hierarchy::forest::testing::sealed(ns)
        };
        let mut f = forest("team-a dev:~team-a");
        let events = change(&mut f, terminating(namespace("dev", Some("team-a"), true)), false);
        let subs: Vec<_> = summary(&events).into_iter().filter(|e| e.1 == Family::Subnamespace).collect();
        assert_eq!(subs, [("MODIFIED", Family::Subnamespace, "team-a".into())], "Terminating, still there");
        // The parent's own change must tell watchers of its Subnamespaces that dev's is gone.
        let events = change(&mut f, terminating(namespace("team-a", None, false)), false);
        let subs: Vec<_> = summary(&events).into_iter().filter(|e| e.1 == Family::Subnamespace).collect();
        assert_eq!(subs, [("DELETED", Family::Subnamespace, "team-a".into())]);
        // And nothing more when dev finally goes.
        let events = change(&mut f, namespace("dev", Some("team-a"), true), true);
        assert!(summary(&events).iter().all(|e| e.1 != Family::Subnamespace));
    }

    #[test]
    fn a_move_modifies_both_parents() {
        let mut f = forest("a b c:a");
        let events = change(&mut f, namespace("c", Some("b"), false), false);
        assert_eq!(
            summary(&events),
            [
                ("MODIFIED", Family::Hierarchy, "a".into()),
                ("MODIFIED", Family::Hierarchy, "b".into()),
                ("MODIFIED", Family::Hierarchy, "c".into())
            ]
        );
    }

    #[test]
    fn history_serves_resumes_and_expires() {
        let hub = Hub::default();
        let ev = |rv| Event::new("ADDED", Family::Hierarchy, json!({"rv": rv}), rv);
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
        let ev = |rv| Event::new("ADDED", Family::Hierarchy, json!({}), rv);
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
        let ev = |kind| Event::new(kind, Family::Hierarchy, json!({}), 8);
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
        let ev = |rv| Event::new("MODIFIED", Family::Hierarchy, json!({ "children": noise(rv) }), rv);
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

    fn watcher(def: &'static ResourceDef, representation: Representation) -> Watcher {
        let include = crate::http::negotiation::IncludeObject::Metadata;
        Watcher {
            def,
            family: Family::of(def),
            namespace: String::new(),
            opts: ListOptions::default(),
            render: RenderOptions { representation, include, now: jiff::Timestamp::now() },
        }
    }

    fn parsed(line: &bytes::Bytes) -> Value {
        serde_json::from_slice(line).unwrap()
    }

    #[test]
    fn watchers_of_the_plain_object_share_one_line_and_the_others_get_their_own() {
        use crate::resources::subnamespaces::{ANCHORS, SUBNAMESPACES};
        let object = json!({"kind": "Subnamespace", "metadata": {"name": "s", "namespace": "p"}});
        let e = Event::new("ADDED", Family::Subnamespace, object, 3);
        let plain = watcher(&SUBNAMESPACES, Representation::Object);
        let shared = plain.event_line(&e);
        assert_eq!(shared, plain.line(e.kind, &e.object), "the same line as the watcher's own");
        assert_eq!(shared.as_ptr(), plain.event_line(&e).as_ptr(), "made once and shared");
        let anchors = parsed(&watcher(&ANCHORS, Representation::Object).event_line(&e));
        assert_eq!(anchors["object"]["kind"], "SubnamespaceAnchor", "served as the watcher's kind");
        let table = parsed(&watcher(&SUBNAMESPACES, Representation::Table).event_line(&e));
        assert_eq!(table["object"]["kind"], "Table");
        assert_eq!(parsed(&shared)["object"]["kind"], "Subnamespace", "the shared line is untouched");
    }

    #[test]
    fn watch_list_is_all_or_nothing() {
        let q = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert!(matches!(
            start_of(&q(&[
                ("sendInitialEvents", "true"),
                ("allowWatchBookmarks", "true"),
                ("resourceVersionMatch", "NotOlderThan")
            ])),
            Ok(Start::Current { initial_events_end: true })
        ));
        assert_eq!(start_of(&q(&[("sendInitialEvents", "true")])).err().unwrap().code, 422);
        assert_eq!(start_of(&q(&[("resourceVersion", "abc")])).err().unwrap().code, 400);
        assert!(matches!(start_of(&q(&[("resourceVersion", "42")])), Ok(Start::After(42))));
    }
}
