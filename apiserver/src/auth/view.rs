//! Per-user views: lists and watches of hns's namespaced resources show the objects the user
//! may `get`, so a user without cluster-wide rights runs `kubectl get subns -A` and sees their
//! subtrees instead of a 403 (OpenShift's `projects` do the same for namespaces). kube-apiserver
//! lets every authenticated user make these lists (config/base/rbac.yaml); hns answers each
//! with the user's view, and refuses a list in one namespace where they may get nothing.
//!
//! Who may get what is decided by [`Mode`]: from the RBAC objects hns watches (exact when the
//! cluster authorizes with RBAC, as kubeadm, kind and the managed services do), with
//! SubjectAccessReviews for what RBAC does not grant (authorizer webhooks that allow more), or
//! with SubjectAccessReviews alone (any authorizer chain, one review per namespace).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::authorization::v1::ResourceAttributes;

use crate::auth::authn::Identity;
use crate::auth::authz::Authorizer;
use crate::auth::rbac::{Grants, Names};
use crate::auth::rbac_cache::RbacCache;
use crate::http::status::ApiError;

/// The verb a row needs: a user sees the objects they may `get`.
pub const VERB: &str = "get";

/// How many SubjectAccessReviews one view sends at once.
const REVIEWS_AT_ONCE: usize = 16;

/// How a view decides what a user may get (`--view-authorization`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// From the RBAC objects hns watches; access granted by other authorizers is not seen.
    Rbac,
    /// RBAC, then a SubjectAccessReview for each namespace RBAC does not grant (authorizer
    /// webhooks that allow): one review per such namespace and user every 10 seconds.
    RbacThenReview,
    /// A SubjectAccessReview for every namespace (any authorizer chain, including webhooks that
    /// deny what RBAC allows); for clusters of a few hundred namespaces.
    Review,
}

/// Marks a request answered with its user's view: a list or watch of one of hns's namespaced
/// resources.
#[derive(Debug, Clone, Copy)]
pub struct ViewOnly;

/// How long the views served to a user are remembered, for watches resumed later.
const REMEMBERED_FOR: Duration = Duration::from_secs(3600);
/// How many different views of one user and resource are remembered.
const REMEMBERED_VIEWS: usize = 8;

/// Builds views, and remembers the last ones served to each user.
pub struct Views {
    rbac: Arc<RbacCache>,
    authz: Authorizer,
    mode: Mode,
    /// (user, resource) → the views served lately, newest last. A watch resumed from a
    /// resourceVersion cannot say what its client was shown; with these, it can tell whether the
    /// client may hold objects it may no longer see (and then has it list again).
    served: moka::sync::Cache<String, Vec<(View, std::time::Instant)>>,
}

/// What one user may see of one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    grants: Arc<Grants>,
    /// A short name of `grants`, the same on every replica for the same grants: a list or
    /// bookmark answered with the view carries it in its resourceVersion, so that any replica
    /// resuming a watch from there knows what its client was shown.
    fingerprint: Arc<str>,
}

impl Default for View {
    /// Nothing.
    fn default() -> View {
        View::new(Grants::default())
    }
}

impl View {
    fn new(grants: Grants) -> View {
        use sha2::Digest;
        let bytes = serde_json::to_vec(&grants).expect("grants serialize");
        let fingerprint: String =
            sha2::Sha256::digest(bytes)[..8].iter().map(|b| format!("{b:02x}")).collect();
        View { grants: Arc::new(grants), fingerprint: fingerprint.into() }
    }

    /// The view of a user who may see everything.
    pub fn everything() -> View {
        View::new(Grants::all())
    }

    /// The resourceVersion at `number` of a list or bookmark answered with this view.
    pub fn resource_version(&self, number: impl std::fmt::Display) -> String {
        crate::resource_version::with_view(number, &self.fingerprint)
    }

    /// Whether the object `name` in `namespace` is shown.
    pub fn shows(&self, namespace: &str, name: &str) -> bool {
        self.grants.allows(namespace, name)
    }

    /// Whether everything is shown: the list needs no filter.
    pub fn shows_everything(&self) -> bool {
        self.grants.everywhere == Names::All
    }

    /// Whether anything in `namespace` may be shown.
    pub fn shows_any_in(&self, namespace: &str) -> bool {
        self.grants.everywhere != Names::None || self.grants.namespaces.contains_key(namespace)
    }

    /// The namespaces in which anything may be shown, in order; `None` when it may be anywhere.
    pub fn namespaces(&self) -> Option<impl Iterator<Item = &str>> {
        (self.grants.everywhere == Names::None).then(|| self.grants.namespaces.keys().map(String::as_str))
    }

    /// Whether everything `other` shows, `self` shows too: a client shown `other` loses nothing
    /// when it is shown `self` instead.
    pub fn covers(&self, other: &View) -> bool {
        self.grants.covers(&other.grants)
    }

    /// A short name of what this view shows (see the field).
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The namespaces where `self` and `other` may differ; `None` when they may differ anywhere.
    pub fn differences(&self, other: &View) -> Option<Vec<String>> {
        if self.grants.everywhere != other.grants.everywhere {
            return None;
        }
        let (a, b) = (&self.grants.namespaces, &other.grants.namespaces);
        let changed = a.keys().chain(b.keys()).filter(|ns| a.get(*ns) != b.get(*ns));
        let mut changed: Vec<String> = changed.cloned().collect();
        changed.sort();
        changed.dedup();
        Some(changed)
    }
}

impl Views {
    /// Views decided by `mode`, from `rbac` and, for reviews, `authz`.
    pub fn new(rbac: Arc<RbacCache>, authz: Authorizer, mode: Mode) -> Views {
        // Each view is forgotten an hour after it was last served (not renewed by being read: a
        // resume is not a view served); the entry, an hour after any was.
        let served = moka::sync::Cache::builder().max_capacity(10_000).time_to_live(REMEMBERED_FOR).build();
        Views { rbac, authz, mode, served }
    }

    /// Records that `view` of `resource` was served to `who`.
    pub fn remember(&self, who: &Identity, resource: &str, view: &View) {
        let now = std::time::Instant::now();
        // Under moka's lock for the key: two requests of one identity at once would otherwise
        // each write back the list it read, and one view would be lost (its client's resume,
        // on this replica, then told to list again).
        self.served.entry(served_key(who, resource)).and_compute_with(|remembered| {
            let mut views = remembered.map(moka::Entry::into_value).unwrap_or_default();
            views.retain(|(v, _)| v != view);
            views.push((view.clone(), now));
            if views.len() > REMEMBERED_VIEWS {
                views.remove(0);
            }
            moka::ops::compute::Op::Put(views)
        });
    }

    /// Forgets every view of `resource` served to `who` but `view`: their client was told to list
    /// again, and is shown `view` from then on.
    pub fn remember_only(&self, who: &Identity, resource: &str, view: &View) {
        let only = vec![(view.clone(), std::time::Instant::now())];
        // Under the key's lock too: a plain insert does not wait for a `remember` of the same
        // identity in progress, which would then write the forgotten views back.
        self.served.entry(served_key(who, resource)).and_compute_with(|_| moka::ops::compute::Op::Put(only));
    }

    /// The views of `resource` served to `who` in the last hour, oldest first.
    pub fn served(&self, who: &Identity, resource: &str) -> Vec<View> {
        let views = self.served.get(&served_key(who, resource)).unwrap_or_default();
        views.into_iter().filter(|(_, at)| at.elapsed() < REMEMBERED_FOR).map(|(v, _)| v).collect()
    }

    /// What the client of `who` resuming a watch of `resource` from a resourceVersion was shown
    /// before, as far as this replica can tell: the view the resourceVersion `named` (a list's or
    /// a bookmark's), if this replica serves it now (`now`) or served it lately; or, when it names
    /// none (an event's), the views this replica served lately.
    pub fn shown(&self, who: &Identity, resource: &str, now: &View, named: Option<&str>) -> Shown {
        let served = self.served(who, resource);
        match named {
            Some(f) if now.fingerprint() == f => Shown::Exactly(now.clone()),
            // A view that shows everything now cannot have shown more. Unless this replica
            // served the user less lately (then every object is sent, as below), a cluster-wide
            // reader's resume goes on as it always has, without being sent every object again.
            None if now.shows_everything() && served.iter().all(View::shows_everything) => {
                Shown::Exactly(now.clone())
            }
            Some(f) => {
                served.into_iter().find(|v| v.fingerprint() == f).map_or(Shown::Unknown, Shown::Exactly)
            }
            None if served.is_empty() => Shown::Unknown,
            None => Shown::OneOf(served),
        }
    }

    /// Wakes when RBAC changes.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.rbac.subscribe()
    }

    /// How often an open watch looks again, besides on RBAC changes: reviews may change with
    /// no object hns sees.
    pub fn refresh_every(&self) -> Option<Duration> {
        (self.mode != Mode::Rbac).then_some(Duration::from_secs(10))
    }

    /// What `who` may see of `group`/`resource`, among `namespaces` (all of them; only
    /// SubjectAccessReviews need the list).
    pub async fn view(
        &self,
        who: &Identity,
        group: &str,
        resource: &str,
        namespaces: impl FnOnce() -> Vec<String>,
    ) -> Result<View, ApiError> {
        let mut grants = match self.mode {
            Mode::Review => Grants::default(),
            Mode::Rbac | Mode::RbacThenReview => {
                if !self.rbac.is_synced() {
                    return Err(ApiError::service_unavailable(
                        "hns-apiserver has not read the cluster's RBAC objects yet; retry in a few seconds",
                    ));
                }
                self.rbac.read().grants(who, VERB, group, resource)
            }
        };
        if self.mode != Mode::Rbac
            && grants.everywhere != Names::All
            && self.everywhere(who, group, resource).await?
        {
            grants = Grants::all();
        }
        if self.mode != Mode::Rbac && grants.everywhere != Names::All {
            let unsure: Vec<String> = namespaces()
                .into_iter()
                .filter(|ns| grants.namespaces.get(ns) != Some(&Names::All))
                .collect();
            for ns in self.reviewed(who, group, resource, unsure).await? {
                grants.namespaces.insert(ns, Names::All);
            }
        }
        Ok(View::new(grants))
    }

    /// Whether a SubjectAccessReview allows `who` to get the resource in every namespace: one
    /// review spares one per namespace.
    async fn everywhere(&self, who: &Identity, group: &str, resource: &str) -> Result<bool, ApiError> {
        let attrs = ResourceAttributes {
            verb: Some(VERB.into()),
            group: Some(group.into()),
            resource: Some(resource.into()),
            ..Default::default()
        };
        self.authz.can(who, attrs).await
    }

    /// The namespaces of `candidates` where a SubjectAccessReview allows `who` to get any object
    /// of the resource.
    async fn reviewed(
        &self,
        who: &Identity,
        group: &str,
        resource: &str,
        candidates: Vec<String>,
    ) -> Result<Vec<String>, ApiError> {
        let asks = candidates.into_iter().map(|namespace| async move {
            let attrs = ResourceAttributes {
                verb: Some(VERB.into()),
                group: Some(group.into()),
                resource: Some(resource.into()),
                namespace: Some(namespace.clone()),
                ..Default::default()
            };
            self.authz.can(who, attrs).await.map(|allowed| allowed.then_some(namespace))
        });
        let answers: Vec<Result<Option<String>, ApiError>> =
            futures::stream::iter(asks).buffer_unordered(REVIEWS_AT_ONCE).collect().await;
        answers.into_iter().filter_map(Result::transpose).collect()
    }
}

/// What a client resuming a watch was shown before ([`Views::shown`]).
#[derive(Debug)]
pub enum Shown {
    /// This view.
    Exactly(View),
    /// One of these views (which one is not known).
    OneOf(Vec<View>),
    /// Not known here.
    Unknown,
}

impl Shown {
    /// Whether the client may hold objects `now` does not show (not known: no).
    pub fn more_than(&self, now: &View) -> bool {
        match self {
            Shown::Exactly(v) => !now.covers(v),
            Shown::OneOf(views) => views.iter().any(|v| !now.covers(v)),
            Shown::Unknown => false,
        }
    }

    /// The views to tell the client the difference from: the one it was shown; when that is
    /// one of several, none (another replica may have served it a view this one never saw, an
    /// older one before a grant: every object shown now is sent, as a list would show it).
    pub fn before(&self) -> Vec<View> {
        match self {
            Shown::Exactly(v) => vec![v.clone()],
            Shown::OneOf(_) | Shown::Unknown => vec![View::default()],
        }
    }
}

/// Who and what a served view is remembered under.
fn served_key(who: &Identity, resource: &str) -> String {
    serde_json::json!([who.user, who.groups, who.extra, resource]).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn view(everywhere: Names, namespaces: &[(&str, Names)]) -> View {
        let namespaces: BTreeMap<String, Names> =
            namespaces.iter().map(|(n, names)| (n.to_string(), names.clone())).collect();
        View::new(Grants { everywhere, namespaces })
    }

    #[test]
    fn differences_name_the_namespaces_whose_rows_may_change() {
        let only_x = Names::Only(["x".to_string()].into());
        let before = view(Names::None, &[("a", Names::All), ("b", only_x.clone())]);
        let after = view(Names::None, &[("a", Names::All), ("b", Names::All), ("c", only_x)]);
        assert_eq!(before.differences(&after), Some(vec!["b".to_string(), "c".to_string()]));
        assert_eq!(before.differences(&before), Some(vec![]));
        assert_eq!(before.differences(&view(Names::All, &[])), None, "everywhere changed");
        assert_eq!(before.namespaces().unwrap().collect::<Vec<_>>(), ["a", "b"]);
        assert!(view(Names::All, &[]).namespaces().is_none());
        assert!(after.covers(&before) && !before.covers(&after), "b grew, c is new");
        assert!(
            before.shows("a", "q")
                && before.shows("b", "x")
                && !before.shows("b", "q")
                && !before.shows("c", "x")
        );
    }

    #[tokio::test]
    async fn the_views_served_to_a_user_are_remembered_newest_last() {
        let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let views = Views::new(Arc::default(), Authorizer::new(client), Mode::Rbac);
        let who = |user: &str| Identity { user: user.into(), groups: vec![], extra: Default::default() };
        let one = |ns: &str| view(Names::None, &[(ns, Names::All)]);
        assert!(views.served(&who("alice"), "subnamespaces").is_empty());
        for ns in ["a", "b", "a"] {
            views.remember(&who("alice"), "subnamespaces", &one(ns));
        }
        assert_eq!(views.served(&who("alice"), "subnamespaces"), [one("b"), one("a")]);
        assert!(views.served(&who("bob"), "subnamespaces").is_empty(), "per user");
        assert!(views.served(&who("alice"), "hierarchyconfigurations").is_empty(), "per resource");
        for i in 0..20 {
            views.remember(&who("alice"), "subnamespaces", &one(&i.to_string()));
        }
        assert_eq!(views.served(&who("alice"), "subnamespaces").len(), REMEMBERED_VIEWS);
        views.remember_only(&who("alice"), "subnamespaces", &one("z"));
        assert_eq!(views.served(&who("alice"), "subnamespaces"), [one("z")], "told to list again");
    }

    #[tokio::test]
    async fn views_remembered_at_once_are_all_kept() {
        let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let views = Views::new(Arc::default(), Authorizer::new(client), Mode::Rbac);
        let all: Vec<View> =
            (0..REMEMBERED_VIEWS).map(|i| view(Names::None, &[(&i.to_string(), Names::All)])).collect();
        // Rounds of one request per view, all at once, each round another user's: a view lost to
        // another's write stays lost.
        for round in 0..100 {
            let who = Identity { user: format!("user-{round}"), groups: vec![], extra: Default::default() };
            let start = std::sync::Barrier::new(all.len());
            std::thread::scope(|s| {
                for v in &all {
                    s.spawn(|| {
                        start.wait();
                        views.remember(&who, "subnamespaces", v);
                    });
                }
            });
            let served = views.served(&who, "subnamespaces");
            assert_eq!(served.len(), all.len(), "round {round}: {} of {} kept", served.len(), all.len());
        }
    }

    #[test]
    fn a_fingerprint_names_the_grants_alone() {
        let only = |names: &[&str]| Names::Only(names.iter().map(|n| n.to_string()).collect());
        let a = view(Names::None, &[("a", Names::All), ("b", only(&["x", "y"]))]);
        let same = view(Names::None, &[("b", only(&["y", "x"])), ("a", Names::All)]);
        assert_eq!(a.fingerprint(), same.fingerprint(), "built in another order");
        assert_eq!(a.fingerprint().len(), 16);
        let others = [
            view(Names::None, &[("a", Names::All)]),
            view(Names::None, &[("a", Names::All), ("b", only(&["x"]))]),
            view(Names::All, &[("a", Names::All), ("b", only(&["x", "y"]))]),
            View::default(),
            View::everything(),
        ];
        for other in others {
            assert_ne!(a.fingerprint(), other.fingerprint(), "{other:?}");
        }
    }

    #[tokio::test]
    async fn a_resumed_client_was_shown_the_view_its_resource_version_names() {
        let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let views = Views::new(Arc::default(), Authorizer::new(client), Mode::Rbac);
        let alice = Identity { user: "alice".into(), groups: vec![], extra: Default::default() };
        let one = |ns: &str| view(Names::None, &[(ns, Names::All)]);
        let (old, now) = (one("a"), view(Names::None, &[("a", Names::All), ("b", Names::All)]));
        let shown =
            |named: Option<&View>| views.shown(&alice, "subnamespaces", &now, named.map(|v| v.fingerprint()));
        // On a replica that served alice nothing: the view named is known if it is the one now.
        assert!(matches!(shown(Some(&now)), Shown::Exactly(v) if v == now));
        assert!(matches!(shown(Some(&old)), Shown::Unknown), "changed since");
        assert!(matches!(shown(None), Shown::Unknown), "named none, served none");
        let everything = View::everything();
        let bob = Identity { user: "bob".into(), ..alice.clone() };
        let shown_all = views.shown(&bob, "subnamespaces", &everything, None);
        assert!(matches!(shown_all, Shown::Exactly(v) if v == everything), "nothing more to show");
        // On one that served her the older view too.
        views.remember(&alice, "subnamespaces", &old);
        views.remember(&alice, "subnamespaces", &now);
        assert!(matches!(shown(Some(&old)), Shown::Exactly(v) if v == old));
        assert!(matches!(shown(None), Shown::OneOf(v) if v == [old.clone(), now.clone()]));
        let shown_all = views.shown(&alice, "subnamespaces", &everything, None);
        assert!(matches!(shown_all, Shown::OneOf(_)), "served less lately: every object is sent");
        // What the client may hold that it may no longer see, and what it is told the difference from.
        assert!(Shown::Exactly(now.clone()).more_than(&old) && !Shown::Exactly(old.clone()).more_than(&now));
        assert!(Shown::OneOf(vec![old.clone(), now.clone()]).more_than(&old));
        assert!(!Shown::Unknown.more_than(&View::default()), "not known is decided elsewhere");
        assert_eq!(Shown::Exactly(old.clone()).before(), std::slice::from_ref(&old));
        assert_eq!(Shown::OneOf(vec![old]).before(), [View::default()], "which one is not known");
    }
}
