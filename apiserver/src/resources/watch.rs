//! Watch: change events of the derived objects as a stream of JSON lines, from the current
//! state (synthetic ADDED events) or resumed after a resourceVersion from the
//! [`crate::store::hub::Hub`]'s history, with bookmarks, until its timeout or until the client
//! leaves. A watch answered with its user's view ([`crate::auth::view`]) also adds and removes
//! objects as what the user may get changes (ADDED and DELETED events, as OpenShift's project
//! watch does).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{web, HttpResponse};
use serde_json::{json, Value};
use tokio::sync::broadcast;

use crate::auth::authn::Identity;
use crate::auth::tls::PeerSocket;
use crate::auth::view::{Shown, View};
use crate::hierarchy::forest::Forest;
use crate::hierarchy::identity::{Derived, Sequence};
use crate::http::list::{ListOptions, Selectable};
use crate::http::negotiation::Representation;
use crate::http::request_info::ResourceRequest;
use crate::http::status::ApiError;
use crate::http::table::RenderOptions;
use crate::resources::def::{CurrentObjects, Reads, ResourceDef};
use crate::resources::item::Item;
use crate::resources::{listing, render};
use crate::shutdown::Phase;
use crate::state::{AppState, Context};
use crate::store::hub::{watch_line, Event, Message, Numbered};

/// Longest watch; clients reconnect (kube-apiserver picks 30–60 minutes).
const MAX_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// How often a watcher that allows bookmarks gets one.
const BOOKMARK_EVERY: Duration = Duration::from_secs(30);
/// How often a watch looks whether its client is still there.
const PEER_CHECK_EVERY: Duration = Duration::from_secs(5);

/// Where a watch starts.
enum Start {
    /// Synthetic ADDED events for the current state first.
    Current { initial_events_end: bool },
    /// Changes after resourceVersion `rv`, handed out (by a list or bookmark) with the view
    /// `view` fingerprints, if any.
    After { rv: u64, view: Option<String> },
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
        rv => match crate::resource_version::parse(rv) {
            Some((rv, view)) => Ok(Start::After { rv, view: view.map(str::to_string) }),
            None => Err(ApiError::bad_request(crate::resource_version::not_handed_out(rv))),
        },
    }
}

/// How a watch begins.
enum Begin {
    /// ADDED events for every object of this snapshot, rendered as they are sent, then changes
    /// (and the end-of-initial-events bookmark between, if asked).
    Current { snapshot: std::sync::Arc<Forest>, initial_events_end: bool },
    /// These lines, then changes.
    Lines(Vec<bytes::Bytes>),
    /// The requested resourceVersion is too old: one ERROR line and the end.
    Expired(bytes::Bytes),
}

/// Filters events for one watcher and renders them.
struct Watcher {
    def: &'static ResourceDef,
    derived: Derived,
    namespace: String,
    opts: ListOptions,
    render: RenderOptions,
    /// What the user may see, when the watch is answered with their view.
    view: Option<View>,
}

impl Watcher {
    fn wants(&self, e: &Event) -> bool {
        e.derived == self.derived
            && (self.namespace.is_empty()
                || e.object["metadata"]["namespace"].as_str() == Some(&self.namespace))
            && self.opts.selects(&e.object)
            && listing::filter(self.view.as_ref()).is_none_or(|v| listing::shows(v, &e.object))
    }

    /// The lines of the events of `events` after number `*last_seen`, rendered as they are
    /// taken: each event taken, wanted or not, moves `last_seen` and `last_rv` (the
    /// resourceVersion the watch has reached) past it; but only events of the watch's own sequence
    /// move its resourceVersion: the configuration's versions are its ConfigMap's, another
    /// sequence than the namespaces', and a resume from one of them would wait for the other.
    fn take<'a>(
        &'a self,
        events: &'a [Numbered],
        last_seen: &'a mut u64,
        last_rv: &'a mut u64,
    ) -> impl Iterator<Item = bytes::Bytes> + 'a {
        events.iter().filter_map(move |(n, e)| {
            if *n <= *last_seen {
                return None;
            }
            *last_seen = *n;
            if e.derived.sequence() == self.derived.sequence() {
                *last_rv = (*last_rv).max(e.rv);
            }
            self.wants(e).then(|| self.event_line(e))
        })
    }

    /// The events that take a client shown any of `old` to what `new` shows: ADDED for objects
    /// one of them did not show and `new` does, DELETED for objects one of them showed and
    /// `new` does not. (An ADDED for an object the client has, or a DELETED for one it lacks,
    /// changes nothing for it; nothing is sent about objects none of the views shows.)
    ///
    /// A DELETED event carries a tombstone, the object's name and namespace only: its user may
    /// no longer see the object, so nothing of it as it is now is sent, and it is sent whatever
    /// the watch's selectors say of the object now (which would tell its labels), at `as_of`,
    /// the resourceVersion the watch has reached: a client resuming from it misses nothing.
    fn regranted(
        &self,
        (reads, forest): (&Reads<'_>, &Forest),
        current: CurrentObjects,
        old: &[View],
        new: &View,
        as_of: u64,
    ) -> Vec<bytes::Bytes> {
        let mut namespaces = std::collections::BTreeSet::new();
        let mut everywhere = false;
        for o in old {
            match o.differences(new) {
                Some(changed) => namespaces.extend(changed),
                None => everywhere = true,
            }
        }
        let objects: Vec<Item> = if everywhere {
            listing::objects(
                forest,
                self.def,
                |ns| current(reads, forest, self.def, ns),
                &self.namespace,
                None,
            )
            .collect()
        } else {
            namespaces
                .iter()
                .filter(|ns| self.namespace.is_empty() || **ns == self.namespace)
                .flat_map(|ns| current(reads, forest, self.def, ns))
                .collect()
        };
        objects
            .iter()
            .filter_map(|o| {
                let now = listing::shows(new, o);
                match (old.iter().any(|v| listing::shows(v, o) != now), now) {
                    (true, true) if self.opts.selects(o) => Some(self.item_line("ADDED", o)),
                    (true, false) => Some(self.item_line("DELETED", &o.tombstone(as_of))),
                    _ => None,
                }
            })
            .collect()
    }

    /// The line of an event of kind `kind` about `item`, rendered from the typed object.
    fn item_line(&self, kind: &str, item: &Item) -> bytes::Bytes {
        // Ages are computed when the event is sent, not when the watch began.
        let render = RenderOptions { now: jiff::Timestamp::now(), ..self.render };
        let mut line = format!("{{\"type\":{},\"object\":", Value::from(kind)).into_bytes();
        match render::write_item(self.def, item, &render, render::Framing::Alone, &mut line) {
            Ok(()) => line.extend_from_slice(b"}\n"),
            Err(e) => return self.failed(&format!("{} could not be rendered: {e}", item.name())),
        }
        bytes::Bytes::from(line)
    }

    fn line(&self, kind: &str, object: &Value) -> bytes::Bytes {
        let mut object = object.clone();
        if self.derived == Derived::Subnamespace {
            object["kind"] = self.def.kind.into();
        }
        // Ages are computed when the event is sent, not when the watch began.
        let render = RenderOptions { now: jiff::Timestamp::now(), ..self.render };
        match render::object(self.def, object, &render) {
            Ok(rendered) => watch_line(kind, &rendered),
            Err(e) => self.failed(&e.message),
        }
    }

    /// The line for event `e`: the shared one when this watcher sends the object as it is.
    fn event_line(&self, e: &Event) -> bytes::Bytes {
        let as_is = self.render.representation == Representation::Object
            && (self.derived != Derived::Subnamespace || e.object["kind"].as_str() == Some(self.def.kind));
        if as_is {
            e.object_line()
        } else {
            self.line(e.kind, &e.object)
        }
    }

    /// A bookmark at `rv`; with a view, its fingerprint beside it, so that a watch resumed from
    /// there on any replica knows what the client was shown.
    fn bookmark(&self, rv: u64, initial_events_end: bool) -> bytes::Bytes {
        let rv = self.view.as_ref().map_or_else(|| rv.to_string(), |v| v.resource_version(rv));
        let mut meta = json!({"resourceVersion": rv});
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
        error_line(ApiError::expired(why))
    }

    /// An event that could not be rendered: the client learns of it as of any failed watch.
    fn failed(&self, why: &str) -> bytes::Bytes {
        error_line(ApiError::internal(why))
    }
}

fn error_line(e: ApiError) -> bytes::Bytes {
    bytes::Bytes::from(format!("{}\n", json!({"type": "ERROR", "object": e.to_status_value()})))
}

/// How long a watch from a resourceVersion the forest has not reached waits for it (another
/// replica may be ahead) before it is refused, as long as kube-apiserver's watch cache waits.
const TOO_LARGE_WAIT: Duration = Duration::from_secs(3);

/// What a watch asks for.
pub struct Request<'a> {
    /// The resource.
    pub def: &'static ResourceDef,
    /// Its objects as they stand.
    pub current_objects: CurrentObjects,
    /// The request.
    pub req: &'a ResourceRequest,
    /// Its query parameters.
    pub query: &'a HashMap<String, String>,
    /// How to render objects.
    pub render: &'a RenderOptions,
}

/// Serves a watch request as a stream of JSON lines, until its timeout or until the client on
/// `peer` leaves. With a `view`, `who` sees only what they may get, as that changes.
pub async fn serve(
    peer: Option<PeerSocket>,
    state: web::Data<AppState>,
    who: Identity,
    view: Option<View>,
    request: Request<'_>,
) -> Result<HttpResponse, ApiError> {
    let Request { def, current_objects, req, query, render } = request;
    let start = start_of(query)?;
    // The configuration's versions are its ConfigMap's, another sequence than the forest's.
    let configuration = def.derived.sequence() == Sequence::ConfigMap;
    if let Start::After { rv, .. } = start {
        let reached = match configuration {
            true => state.config.reaches(rv, TOO_LARGE_WAIT).await,
            false => state.cache.reaches(rv, TOO_LARGE_WAIT).await,
        };
        if !reached {
            let now = match configuration {
                true => state.config.resource_version(),
                false => state.cache.read().resource_version_number(),
            };
            return Err(ApiError::too_large_resource_version(rv, now));
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
        derived: def.derived,
        namespace: req.namespace.clone(),
        opts: ListOptions { limit: None, after: None, ..ListOptions::from_query(query)? },
        render: *render,
        view,
    };
    // A view is looked at again on each RBAC change (and periodically, when reviews decide it);
    // one that shows everything is not, as kube-apiserver does not end a watch when its user
    // loses access (docs/access.md).
    let follows_access = watcher.view.as_ref().is_some_and(|v| !v.shows_everything());
    let mut access = follows_access.then(|| state.views.subscribe());
    let mut phases = state.shutdown.subscribe();
    let mut refresh = state.views.refresh_every().filter(|_| access.is_some()).map(|every| {
        let mut refresh = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        refresh
    });
    // For a watch resumed from a resourceVersion: what the client was shown before, and what
    // its user may see now (everything, for a user who now may, but was handed out a view).
    let shown = match &start {
        Start::After { view: named, .. } if watcher.view.is_some() || named.is_some() => {
            let now = watcher.view.clone().unwrap_or_else(View::everything);
            Some((state.views.shown(&who, def.plural, &now, named.as_deref()), now))
        }
        _ => None,
    };
    if let Some(view) = &watcher.view {
        state.views.remember(&who, def.plural, view);
    }
    // Snapshot and subscribe under one read lock: every later change reaches the channel, and
    // none before it does.
    let (begin, mut rx, mut last_rv, mut last_seen) = {
        let forest = state.cache.read();
        let rx = state.cache.hub.subscribe();
        let last_seen = state.cache.hub.last();
        let now_rv = match configuration {
            true => state.config.resource_version(),
            false => forest.resource_version_number(),
        };
        let begin = match start {
            Start::Current { initial_events_end } => Begin::Current { snapshot: std::sync::Arc::clone(&forest), initial_events_end },
            // The configuration is one object, and its versions are another sequence than the
            // history's: what changed since `rv` is the object as it is now. It is sent unless it
            // is at `rv` (a client that has it takes it as an update), and such a watch never
            // expires: a client's list hands out the ConfigMap's version, however old.
            Start::After { rv, .. } if configuration => {
                let now = current_objects(&Reads::of(&state), &forest, def, "");
                let at_rv = |o: &Item| o.metadata().resource_version.as_deref().is_none_or(|v| v == rv.to_string());
                let changed = now.iter().filter(|o| !at_rv(o) && watcher.opts.selects(*o));
                Begin::Lines(changed.map(|o| watcher.item_line("MODIFIED", o)).collect())
            }
            // A view resumed without knowing what its user was shown cannot tell what to remove:
            // its client lists again, as after any expired watch.
            Start::After { view: None, .. } if matches!(shown, Some((Shown::Unknown, _))) => Begin::Expired(watcher.expired(
                "hns-apiserver has no record of what this user was shown (another replica served it); list again",
            )),
            // The client may hold objects its user may no longer see (or it is not known what it
            // was shown). Telling it which to drop would tell it what became of them since: it
            // lists again, and is shown only what it may see.
            Start::After { .. } if shown.as_ref().is_some_and(|(shown, now)| matches!(shown, Shown::Unknown) || shown.more_than(now)) => {
                if let Some(view) = &watcher.view {
                    state.views.remember_only(&who, def.plural, view);
                }
                Begin::Expired(watcher.expired(&format!(
                    "what this user may see of {} changed since this resourceVersion; list again",
                    def.plural
                )))
            }
            Start::After { rv, .. } => match state.cache.hub.since(rv) {
                Some(events) => {
                    let mut lines: Vec<bytes::Bytes> =
                        events.iter().filter(|e| watcher.wants(e)).map(|e| watcher.event_line(e)).collect();
                    // Access may have gained since: the objects the user may see now and was
                    // not shown are sent as ADDED after the changes, as a list would show them (a
                    // client that has one already takes it as an update). Lost access was
                    // answered above.
                    if let Some((shown, now)) = &shown {
                        let before = shown.before();
                        let reads = (&Reads::of(&state), &**forest);
                        lines.extend(watcher.regranted(reads, current_objects, &before, now, now_rv));
                    }
                    Begin::Lines(lines)
                }
                None => {
                    Begin::Expired(watcher.expired(&format!("too old resource version: {rv} ({now_rv})")))
                }
            },
        };
        (begin, rx, now_rv, last_seen)
    };
    let cache = state.cache.clone();
    let mut watcher = watcher;
    let stream = async_stream::stream! {
        let initial_events_end = match begin {
            Begin::Expired(line) => {
                yield Ok::<_, actix_web::Error>(line);
                return;
            }
            Begin::Lines(lines) => {
                for line in lines {
                    yield Ok(line);
                }
                false
            }
            Begin::Current { snapshot, initial_events_end } => {
                // In pieces of many lines: a 100,000-object start is neither built whole nor
                // sent a line per write.
                let mut piece = Vec::new();
                let reads = Reads::of(&state);
                let in_namespace = |ns: &str| current_objects(&reads, &snapshot, def, ns);
                let objects =
                    listing::objects(&snapshot, def, in_namespace, &watcher.namespace, listing::filter(watcher.view.as_ref()));
                for object in objects.filter(|o| watcher.opts.selects(o)) {
                    piece.extend_from_slice(&watcher.item_line("ADDED", &object));
                    if piece.len() >= listing::PIECE_BYTES {
                        yield Ok(bytes::Bytes::from(std::mem::take(&mut piece)));
                    }
                }
                if !piece.is_empty() {
                    yield Ok(bytes::Bytes::from(piece));
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
                // The replica is stopping (crate::shutdown): the client resumes elsewhere.
                Ok(_) = phases.wait_for(|p| *p == Phase::Stopping) => {
                    if bookmarks {
                        yield Ok(watcher.bookmark(last_rv, false));
                    }
                    return;
                }
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
                },
                () = access_changed(&mut access, &mut refresh) => {
                    match listing::view_of(&state, &who, def).await {
                        Ok(new) => {
                            // Under one read lock, the forest and the events published before it
                            // (the lock is held for two reference counts; rendering comes after).
                            // The missed events go first, under the old view, then the change of
                            // view read from that forest: the ADDED objects carry its
                            // resourceVersions, and a client that resumes from one of them must
                            // have been sent every event before it.
                            let (forest, missed) = {
                                let forest = cache.read();
                                (std::sync::Arc::clone(&forest), cache.hub.after(last_seen))
                            };
                            let caught_up = missed.map(|missed| {
                                let mut lines: Vec<bytes::Bytes> =
                                    watcher.take(&missed, &mut last_seen, &mut last_rv).collect();
                                last_rv = last_rv.max(forest.resource_version_number());
                                let old: Vec<View> = watcher.view.iter().cloned().collect();
                                let reads = (&Reads::of(&state), &*forest);
                                lines.extend(watcher.regranted(reads, current_objects, &old, &new, last_rv));
                                lines
                            });
                            let Some(lines) = caught_up else {
                                yield Ok(watcher.expired("the watch fell too far behind; list again"));
                                return;
                            };
                            for line in lines {
                                yield Ok(line);
                            }
                            state.views.remember(&who, def.plural, &new);
                            let changed = watcher.view.as_ref() != Some(&new);
                            watcher.view = Some(new);
                            // The client resumes from here knowing the new view, on any replica.
                            if bookmarks && changed {
                                yield Ok(watcher.bookmark(last_rv, false));
                            }
                        }
                        Err(error) => tracing::warn!(%error, user = %who.user, "a watcher's view was not updated"),
                    }
                    continue;
                }
            };
            // After a catch-up, the channel still holds some of the same events: take skips them.
            for line in watcher.take(&events, &mut last_seen, &mut last_rv) {
                yield Ok(line);
            }
        }
    };
    Ok(HttpResponse::Ok().content_type("application/json").streaming(stream))
}

/// Returns when the access a view depends on may have changed: RBAC changed, or `refresh` ticked
/// (it lives across calls: each event the watch sends makes a new call). Never for a watch
/// without a view.
async fn access_changed(
    access: &mut Option<tokio::sync::watch::Receiver<u64>>,
    refresh: &mut Option<tokio::time::Interval>,
) {
    let Some(rx) = access else { return std::future::pending().await };
    let tick = async {
        match refresh {
            Some(refresh) => {
                refresh.tick().await;
            }
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        changed = rx.changed() => if changed.is_err() { std::future::pending::<()>().await },
        () = tick => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watcher(def: &'static ResourceDef, representation: Representation) -> Watcher {
        let include = crate::http::negotiation::IncludeObject::Metadata;
        Watcher {
            def,
            derived: def.derived,
            namespace: String::new(),
            opts: ListOptions::default(),
            render: RenderOptions { representation, include, now: jiff::Timestamp::now() },
            view: None,
        }
    }

    fn parsed(line: &bytes::Bytes) -> Value {
        serde_json::from_slice(line).unwrap()
    }

    #[test]
    fn watchers_of_the_plain_object_share_one_line_and_the_others_get_their_own() {
        use crate::resources::subnamespaces::{ANCHORS, SUBNAMESPACES};
        let object = json!({"kind": "Subnamespace", "metadata": {"name": "s", "namespace": "p"}, "spec": {}});
        let e = Event::new("ADDED", Derived::Subnamespace, object, 3);
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
    fn an_event_rendered_from_the_typed_object_is_the_one_rendered_from_json() {
        use crate::hierarchy::forest::testing::forest;
        use crate::hierarchy::objects;
        use crate::hierarchy::policy::testing::policy;
        use crate::resources::subnamespaces::ANCHORS;
        let f = forest("team-a dev:~team-a");
        let node = f.get("dev").unwrap();
        for representation in [Representation::Object, Representation::Metadata, Representation::Table] {
            let w = watcher(&ANCHORS, representation);
            let typed = w.item_line(
                "ADDED",
                &Item::subnamespace(objects::subnamespace(&policy(), node), ANCHORS.kind),
            );
            let json = w.line("ADDED", &objects::subnamespace_value(&policy(), node, "Subnamespace"));
            assert_eq!(parsed(&typed), parsed(&json), "{representation:?}");
        }
    }

    #[test]
    fn a_watch_is_moved_only_by_its_own_sequence_of_versions() {
        use crate::resources::hierarchyconfigurations::DEF;
        use crate::resources::hncconfigurations::DEF as CONFIG;
        let config = Event::new("MODIFIED", Derived::HncConfiguration, json!({"metadata": {}}), 900);
        let namespace = Event::new("MODIFIED", Derived::HierarchyConfiguration, json!({"metadata": {}}), 60);
        let events: Vec<Numbered> = vec![(1, Arc::new(config)), (2, Arc::new(namespace))];
        let (mut seen, mut rv) = (0, 50);
        let sent = watcher(&DEF, Representation::Object).take(&events, &mut seen, &mut rv).count();
        assert_eq!((sent, seen, rv), (1, 2, 60), "the namespace's version, not the ConfigMap's");
        let (mut seen, mut rv) = (0, 50);
        let sent = watcher(&CONFIG, Representation::Object).take(&events, &mut seen, &mut rv).count();
        assert_eq!((sent, seen, rv), (1, 2, 900), "the ConfigMap's version, not the namespace's");
        let (mut seen, mut rv) = (0, 1000);
        watcher(&CONFIG, Representation::Object).take(&events, &mut seen, &mut rv).for_each(drop);
        assert_eq!(rv, 1000, "a namespace's version does not move a watch of the configuration");
    }

    #[test]
    fn a_tombstone_tells_the_name_and_namespace_only() {
        use crate::hierarchy::forest::testing::forest;
        use crate::hierarchy::objects;
        use crate::hierarchy::policy::testing::policy;
        use crate::resources::subnamespaces::SUBNAMESPACES;
        let f = forest("team-a dev:~team-a");
        let item =
            Item::subnamespace(objects::subnamespace(&policy(), f.get("dev").unwrap()), "Subnamespace");
        let line = parsed(
            &watcher(&SUBNAMESPACES, Representation::Object).item_line("DELETED", &item.tombstone(42)),
        );
        let object = &line["object"];
        assert_eq!(
            object["metadata"],
            json!({"name": "dev", "namespace": "team-a", "resourceVersion": "42"}),
            "{line}"
        );
        let fields: Vec<&String> = object.as_object().unwrap().keys().collect();
        assert!(
            object.get("status").is_none_or(|s| s
                .as_object()
                .is_none_or(|s| s.values().all(|v| v.is_null() || *v == json!("")))),
            "{line}"
        );
        assert!(
            fields.iter().all(|f| ["apiVersion", "kind", "metadata", "spec", "status"].contains(&f.as_str())),
            "{line}"
        );
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
        assert!(matches!(
            start_of(&q(&[("resourceVersion", "42")])),
            Ok(Start::After { rv: 42, view: None })
        ));
        assert!(matches!(
            start_of(&q(&[("resourceVersion", "42.0123456789abcdef")])),
            Ok(Start::After { rv: 42, view: Some(v) }) if v == "0123456789abcdef"
        ));
    }
}
