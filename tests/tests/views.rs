//! Per-user views: a user who may not list hns's resources across all namespaces gets, from
//! `-A` lists and watches, exactly the objects they may `get` (each row, and each row left
//! out, checked against kube-apiserver's own SubjectAccessReview), and a watch that adds and
//! removes rows as RoleBindings and moves change their access.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use hns_api::{HierarchyConfiguration, Subnamespace};
use hns_e2e::*;
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::{Api, Client, ResourceExt};

const WAIT: Duration = Duration::from_secs(30);

/// Binds ClusterRole `view` to `user` in `namespace` as RoleBinding `name`.
fn grant_view(env: &Env, user: &str, namespace: &str, name: &str) {
    ok(env.kubectl(&[
        "create",
        "rolebinding",
        name,
        "-n",
        namespace,
        "--clusterrole=view",
        &format!("--user={user}"),
    ]));
}

/// A tree `root` with subnamespaces `root-a` and `root-b`, and a namespace outside it.
async fn tree_and_outsider(client: &Client, prefix: &str) -> (String, Vec<String>, String) {
    let root = create_namespace(client, &unique(prefix), &[]).await;
    let kids = vec![format!("{root}-a"), format!("{root}-b")];
    for kid in &kids {
        create_subns(client, &root, kid).await.unwrap();
    }
    let outsider = create_namespace(client, &unique(&format!("{prefix}-out")), &[]).await;
    (root, kids, outsider)
}

/// Deletes what [`tree_and_outsider`] made.
async fn delete_tree_and_outsider(admin: &Client, root: &str, outsider: &str) {
    delete_tree(admin, root).await;
    delete_namespaces(admin, &[outsider]).await;
}

/// A new user `NAME-…` who may view the tree at `root`, by RoleBinding `name` there.
fn viewer(env: &Env, root: &str, name: &str) -> String {
    let user = unique(name);
    grant_view(env, &user, root, name);
    user
}

/// `namespace/name` of every object of a list.
fn keys<K: kube::Resource>(items: &[K]) -> BTreeSet<String> {
    items.iter().map(|o| format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any())).collect()
}

/// Checks every object in the cluster (as the admin lists them) against kube-apiserver: the
/// user's list holds it exactly when a SubjectAccessReview allows the user to get it.
async fn agrees_with_reviews<K>(admin: &Client, user: &str, resource: &str, seen: &BTreeSet<String>)
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let all = Api::<K>::all(admin.clone()).list(&ListParams::default()).await.unwrap().items;
    assert!(seen.is_subset(&keys(&all)), "the user saw objects that do not exist: {seen:?}");
    let checks = all.iter().map(|o| async move {
        let (ns, name) = (o.namespace().unwrap_or_default(), o.name_any());
        let allowed = may_get(admin, (user, &[]), resource, &ns, &name).await;
        (format!("{ns}/{name}"), allowed)
    });
    let answers: Vec<(String, bool)> = futures::stream::iter(checks).buffer_unordered(16).collect().await;
    for (key, allowed) in answers {
        assert_eq!(
            seen.contains(&key),
            allowed,
            "{resource} {key}: shown to {user} = {}, may get = {allowed}",
            !allowed
        );
    }
}

#[tokio::test]
async fn lists_across_namespaces_show_exactly_what_the_user_may_get() {
    let (env, admin) = Env::with_admin().await;
    let (root, kids, outsider) = tree_and_outsider(&admin, "views").await;
    let user = viewer(&env, &root, "viewer");
    let as_user = env.client_as(&user, &[]).await;
    let hcs: Api<HierarchyConfiguration> = Api::all(as_user.clone());
    let mut wanted: BTreeSet<String> = kids.iter().map(|k| format!("{k}/hierarchy")).collect();
    wanted.insert(format!("{root}/hierarchy"));
    // The RoleBinding reaches the subnamespaces by propagation.
    let seen = eventually("the user's list to show the tree", WAIT, || async {
        let items = hcs.list(&ListParams::default()).await.ok()?.items;
        (keys(&items) == wanted).then(|| keys(&items))
    })
    .await;
    agrees_with_reviews::<HierarchyConfiguration>(&admin, &user, "hierarchyconfigurations", &seen).await;

    let subns = Api::<Subnamespace>::all(as_user.clone()).list(&ListParams::default()).await.unwrap().items;
    let subns = keys(&subns);
    assert_eq!(subns, kids.iter().map(|k| format!("{root}/{k}")).collect::<BTreeSet<_>>());
    agrees_with_reviews::<Subnamespace>(&admin, &user, "subnamespaces", &subns).await;

    // kubectl's -A works, in pages too, and a namespace the user may not read is still a 403.
    let table = ok(env.kubectl_as(&user, &[], &["get", "subns", "-A", "--chunk-size=1"]));
    assert!(kids.iter().all(|k| table.contains(k.as_str())) && !table.contains(&outsider), "{table}");
    let refused = fails(env.kubectl_as(&user, &[], &["get", "hierarchyconfigurations", "-n", &outsider]));
    assert!(refused.contains("forbidden"), "{refused}");

    // A user with no grant at all sees nothing rather than a 403.
    let stranger = env.client_as(&unique("stranger"), &[]).await;
    let nothing = Api::<HierarchyConfiguration>::all(stranger).list(&ListParams::default()).await.unwrap();
    assert!(nothing.items.is_empty(), "{:?}", keys(&nothing.items));
    delete_tree_and_outsider(&admin, &root, &outsider).await;
}

type Events =
    std::pin::Pin<Box<dyn futures::Stream<Item = kube::Result<WatchEvent<HierarchyConfiguration>>> + Send>>;

/// What a watch event did to a namespace's configuration.
#[derive(Debug, PartialEq)]
enum Change {
    Added,
    Modified,
    Deleted,
}

/// The next change in `events` and the namespace it is about (bookmarks skipped); `None` when
/// the watch ends.
async fn next_change(events: &mut Events) -> Option<(Change, String)> {
    loop {
        let (change, hc) = match events.try_next().await.unwrap()? {
            WatchEvent::Added(hc) => (Change::Added, hc),
            WatchEvent::Modified(hc) => (Change::Modified, hc),
            WatchEvent::Deleted(hc) => (Change::Deleted, hc),
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(e) => panic!("watch error: {e:?}"),
        };
        return Some((change, hc.namespace().unwrap_or_default()));
    }
}

/// The namespaces a watch of hierarchy configurations shows, kept up to date from its events.
struct Watched {
    shown: BTreeSet<String>,
    events: Events,
}

impl Watched {
    async fn open(api: &Api<HierarchyConfiguration>) -> Watched {
        let params = WatchParams::default().timeout(290);
        let events = api.watch(&params, "0").await.unwrap().boxed();
        Watched { shown: BTreeSet::new(), events }
    }

    /// Reads events until the namespaces shown satisfy `done`.
    async fn until(&mut self, what: &str, done: impl Fn(&BTreeSet<String>) -> bool) {
        let read = async {
            while !done(&self.shown) {
                match next_change(&mut self.events).await.expect("the watch ended") {
                    (Change::Deleted, ns) => self.shown.remove(&ns),
                    (_, ns) => self.shown.insert(ns),
                };
            }
        };
        tokio::time::timeout(WAIT, read).await.unwrap_or_else(|_| panic!("{what}: shown {:?}", self.shown));
    }
}

#[tokio::test]
async fn a_users_watch_follows_their_access() {
    let (env, admin) = Env::with_admin().await;
    let (root, kids, outsider) = tree_and_outsider(&admin, "viewwatch").await;
    let user = viewer(&env, &root, "watcher");
    let mut tree: BTreeSet<String> = kids.iter().cloned().collect();
    tree.insert(root.clone());
    let mut watch = Watched::open(&Api::all(env.client_as(&user, &[]).await)).await;
    watch.until("the tree to be shown", |s| s == &tree).await;

    grant_view(&env, &user, &outsider, "direct");
    watch.until("a RoleBinding to add the namespace", |s| s.contains(&outsider)).await;
    ok(env.kubectl(&["delete", "rolebinding", "direct", "-n", &outsider]));
    watch.until("its deletion to remove it", |s| !s.contains(&outsider)).await;

    // Moved into the tree, the namespace inherits the RoleBinding; moved out, it loses it.
    set_parent(&admin, &outsider, Some(&root)).await.unwrap();
    watch.until("a move into the tree to add the namespace", |s| s.contains(&outsider)).await;
    set_parent(&admin, &outsider, None).await.unwrap();
    watch.until("a move out of the tree to remove it", |s| !s.contains(&outsider)).await;
    assert_eq!(watch.shown, tree);
    delete_tree_and_outsider(&admin, &root, &outsider).await;
}

#[tokio::test]
async fn tree_all_shows_the_users_subtrees() {
    let Some((env, local, admin)) = Env::local_with_admin().await else { return };
    let (root, kids, outsider) = tree_and_outsider(&admin, "viewtree").await;
    let user = viewer(&env, &root, "treeviewer");
    let kubeconfig = local.user_kubeconfig(&user, &[]);
    let tree = eventually("the user's tree to show the subnamespaces", WAIT, || async {
        let out = hns_with(&kubeconfig, &["tree", "-A"]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        (out.status.success() && kids.iter().all(|k| text.contains(k.as_str()))).then_some(text)
    })
    .await;
    assert!(
        tree.lines().next().is_some_and(|l| l.starts_with(&root)),
        "the tree starts at its root:\n{tree}"
    );
    assert!(!tree.contains(&outsider), "{tree}");
    delete_tree_and_outsider(&admin, &root, &outsider).await;
}

/// The first event about `namespace`'s configuration in a watch of `api` from `rv`, or the
/// error the watch ended with.
async fn first_event_about(
    api: &Api<HierarchyConfiguration>,
    rv: &str,
    namespace: &str,
) -> Result<Change, Box<kube::core::Status>> {
    let mut events = api.watch(&WatchParams::default().timeout(30), rv).await.unwrap().boxed();
    loop {
        let (change, hc) = match events.try_next().await.unwrap() {
            Some(WatchEvent::Added(hc)) => (Change::Added, hc),
            Some(WatchEvent::Modified(hc)) => (Change::Modified, hc),
            Some(WatchEvent::Deleted(hc)) => (Change::Deleted, hc),
            Some(WatchEvent::Bookmark(_)) => continue,
            Some(WatchEvent::Error(e)) => return Err(e),
            None => panic!("the watch ended with no event about {namespace}"),
        };
        if hc.namespace().as_deref() == Some(namespace) {
            return Ok(change);
        }
    }
}

#[tokio::test]
async fn a_watch_resumed_after_an_access_change_catches_up() {
    let (env, admin) = Env::with_admin().await;
    let (root, _, outsider) = tree_and_outsider(&admin, "viewresume").await;
    let user = viewer(&env, &root, "resumer");
    let hcs: Api<HierarchyConfiguration> = Api::all(env.client_as(&user, &[]).await);
    let shows = |list: &kube::core::ObjectList<HierarchyConfiguration>| {
        list.items.iter().any(|hc| hc.namespace().as_deref() == Some(outsider.as_str()))
    };
    // Listed without the namespace; granted it; a watch from the list's version adds it.
    let before = hcs.list(&ListParams::default()).await.unwrap();
    assert!(!shows(&before));
    grant_view(&env, &user, &outsider, "direct");
    eventually("the grant to show the namespace", WAIT, || async {
        shows(&hcs.list(&ListParams::default()).await.ok()?).then_some(())
    })
    .await;
    let rv = before.metadata.resource_version.unwrap();
    let single_replica = env.local.as_ref().is_some_and(|l| l.hns_ports.len() == 1);
    match first_event_about(&hcs, &rv, &outsider).await {
        Ok(change) => assert_eq!(change, Change::Added),
        // A replica that served this user nothing yet cannot tell what the client holds: it has
        // it list again, and the list shows the namespace.
        Err(e) if !single_replica && e.code == 410 => {
            assert!(shows(&hcs.list(&ListParams::default()).await.unwrap()))
        }
        Err(e) => panic!("the resumed watch failed: {e:?}"),
    }

    // Listed with it; the grant taken away; a watch from that list's version is told to list
    // again (410 Gone), and the list no longer shows it.
    let before = hcs.list(&ListParams::default()).await.unwrap();
    assert!(shows(&before));
    ok(env.kubectl(&["delete", "rolebinding", "direct", "-n", &outsider]));
    eventually("the revocation to hide the namespace", WAIT, || async {
        (!shows(&hcs.list(&ListParams::default()).await.ok()?)).then_some(())
    })
    .await;
    let rv = before.metadata.resource_version.unwrap();
    let params = WatchParams::default().timeout(3);
    let mut events = hcs.watch(&params, &rv).await.unwrap().boxed();
    match events.try_next().await.unwrap() {
        Some(WatchEvent::Error(e)) => assert_eq!(e.code, 410, "{e:?}"),
        other => panic!("a watch resumed after a revocation must list again, on any replica, got {other:?}"),
    }
    delete_tree_and_outsider(&admin, &root, &outsider).await;
}

/// The body of a GET of `path_and_query` under the group's version, sent straight to replica
/// `port` as kube-apiserver sends it for `user` in `groups`.
async fn on_replica(
    local: &Local,
    port: u16,
    (user, groups): (&str, &[&str]),
    path_and_query: &str,
) -> String {
    let client = local.direct_client(Some(local.front_proxy_identity()));
    let url = format!("https://{}:{port}/apis/hnc.x-k8s.io/v1alpha2/{path_and_query}", local.hns_host);
    client.get(&url).remote_user(user, groups).send().await.unwrap().text().await.unwrap()
}

/// A list's resourceVersion names the view it showed: a watch from it resumes on a replica that
/// never served that user (each replica asked directly, as the same user under other groups,
/// which none served), and lists again only once what the user may see changed.
#[tokio::test]
async fn a_watch_resumes_from_a_views_list_on_any_replica() {
    let (env, admin) = Env::with_admin().await;
    let Some(local) = env.local_or_skip("a_watch_resumes_from_a_views_list_on_any_replica") else { return };
    let (root, kids, outsider) = tree_and_outsider(&admin, "viewanywhere").await;
    let user = viewer(&env, &root, "anywhere");
    let (lister, other_session) = (
        (user.as_str(), &["system:authenticated"][..]),
        (user.as_str(), &["system:authenticated", "another-session"][..]),
    );
    let all = "hierarchyconfigurations";
    // Every replica shows the user the tree (the grant propagated to its subnamespaces).
    for port in &local.hns_ports {
        eventually("every replica to show the user the tree", WAIT, || async {
            let list = on_replica(local, *port, lister, all).await;
            kids.iter().all(|kid| list.contains(&format!("\"namespace\":\"{kid}\""))).then_some(())
        })
        .await;
    }
    let list: serde_json::Value =
        serde_json::from_str(&on_replica(local, local.hns_ports[0], lister, all).await).unwrap();
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    assert!(rv.contains('.'), "a view's list names the view in its resourceVersion: {rv}");
    let cascade = r#"{"spec":{"allowCascadingDeletion":true}}"#;
    ok(env.kubectl(&[
        "patch",
        "hierarchyconfigurations",
        "hierarchy",
        "-n",
        &root,
        "--type=merge",
        "-p",
        cascade,
    ]));
    let watch = format!("{all}?watch=true&allowWatchBookmarks=true&timeoutSeconds=2&resourceVersion={rv}");
    for port in &local.hns_ports {
        for who in [lister, other_session] {
            let lines = on_replica(local, *port, who, &watch).await;
            assert!(!lines.contains("\"ERROR\""), "a resumed watch on :{port} as {who:?}: {lines}");
            assert!(
                lines.contains("allowCascadingDeletion"),
                "the change after the list, on :{port}: {lines}"
            );
            assert!(!lines.contains(&outsider), "{lines}");
            let last: serde_json::Value = serde_json::from_str(lines.lines().last().unwrap()).unwrap();
            assert_eq!(last["type"], "BOOKMARK", "{lines}");
            assert!(last["object"]["metadata"]["resourceVersion"].as_str().unwrap().contains('.'), "{last}");
        }
    }
    // A grant since: the resumed watch (on replicas that served the view the version names,
    // now all of them) adds what the user may newly see.
    grant_view(&env, &user, &outsider, "more");
    for port in &local.hns_ports {
        eventually("every replica to show the user the outsider", WAIT, || async {
            on_replica(local, *port, lister, all).await.contains(&outsider).then_some(())
        })
        .await;
        // Under other groups too, once that identity's reviews are renewed
        // (--view-authorization=review keeps an answer 10 seconds).
        for who in [lister, other_session] {
            eventually("a resumed watch to add the outsider", WAIT, || async {
                let lines = on_replica(local, *port, who, &watch).await;
                assert!(!lines.contains("\"ERROR\""), "after a grant, on :{port} as {who:?}: {lines}");
                lines.contains(&outsider).then_some(())
            })
            .await;
        }
    }
    // A revocation since: the client may hold what its user may no longer see; it lists again.
    ok(env.kubectl(&["delete", "rolebinding", "anywhere", "-n", &root]));
    for port in &local.hns_ports {
        eventually("every replica to hide the tree from the user", WAIT, || async {
            let list = on_replica(local, *port, lister, all).await;
            (!list.contains(&format!("\"namespace\":\"{root}\""))).then_some(())
        })
        .await;
        for who in [lister, other_session] {
            eventually("a resumed watch to be told to list again", WAIT, || async {
                on_replica(local, *port, who, &watch).await.contains("\"code\":410").then_some(())
            })
            .await;
        }
    }
    delete_tree_and_outsider(&admin, &root, &outsider).await;
}

/// The lines a watch of `path` from `rv` sends `user` in two seconds, through kube-apiserver.
fn resumed_as(env: &Env, user: &str, path: &str, rv: &str) -> Vec<serde_json::Value> {
    let url = format!("{path}?watch=true&resourceVersion={rv}&timeoutSeconds=2");
    let out = ok(env.kubectl_as(user, &[], &["get", "--raw", &url]));
    out.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The resourceVersion of a list of `path` as `user`, and whether it mentions `text`.
fn listed_as(env: &Env, user: &str, path: &str, text: &str) -> (String, bool) {
    let out = ok(env.kubectl_as(user, &[], &["get", "--raw", path]));
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    (list["metadata"]["resourceVersion"].as_str().unwrap().to_string(), out.contains(text))
}

/// Issue 40, B1: a user whose access to a namespace ended resumes a watch; nothing written there
/// since (here a subnamespace made after the revocation), nor the namespace's objects as they
/// are now, reaches them: a watch resumed from a version of before is told to list again.
#[tokio::test]
async fn a_revoked_user_resuming_a_watch_learns_nothing_written_after() {
    let (env, admin, victim) = Env::with_namespace("victim").await;
    new_subnamespace(&admin, &victim, "before").await;
    let user = unique("mallory");
    grant_view(&env, &user, &victim, "m-view");
    let paths =
        ["/apis/hnc.x-k8s.io/v1alpha2/subnamespaces", "/apis/hnc.x-k8s.io/v1alpha2/hierarchyconfigurations"];
    let mut old_versions = Vec::new();
    for path in paths {
        let rv = eventually("the user to see the victim", WAIT, || async {
            let (rv, seen) = listed_as(&env, &user, path, &victim);
            seen.then_some(rv)
        })
        .await;
        old_versions.push(rv);
    }
    ok(env.kubectl(&["delete", "rolebinding", "m-view", "-n", &victim]));
    for path in paths {
        eventually("the revocation to hide the victim", WAIT, || async {
            (!listed_as(&env, &user, path, &victim).1).then_some(())
        })
        .await;
    }
    new_subnamespace(&admin, &victim, "secret").await;
    for (path, old_rv) in paths.iter().zip(&old_versions) {
        // From a list made after the revocation: its version names the view the client holds,
        // which never showed the victim; the resume goes on, on any replica.
        let (rv, _) = listed_as(&env, &user, path, &victim);
        let lines = resumed_as(&env, &user, path, &rv);
        let text = serde_json::to_string(&lines).unwrap();
        assert!(!text.contains(&victim), "{path}: a revoked user was told of the victim: {text}");
        assert!(
            lines.iter().all(|l| l["type"] != "ERROR"),
            "{path}: a resume from a list of the view now: {text}"
        );
        // From a list of before the revocation: its version names a view that showed the victim.
        // Told to list again (410), on every replica, and nothing else.
        let lines = resumed_as(&env, &user, path, old_rv);
        let text = serde_json::to_string(&lines).unwrap();
        assert!(!text.contains(&victim), "{path} from {old_rv}: {text}");
        let told = |l: &serde_json::Value| {
            (l["type"].as_str(), l["object"]["code"].as_i64()) == (Some("ERROR"), Some(410))
        };
        assert!(
            lines.len() == 1 && told(&lines[0]),
            "{path} from {old_rv}: told to list again, only: {text}"
        );
    }
    delete_tree(&admin, &victim).await;
}

/// A watch open while its user loses access removes the objects with tombstones: name and
/// namespace, nothing of the objects as they are now, at the resourceVersion the watch has
/// reached (a watch client resumes from it; kube-runtime's watcher fails on an event without one).
#[tokio::test]
async fn a_watch_open_during_a_revocation_removes_objects_with_tombstones() {
    let (env, admin, victim) = Env::with_namespace("tomb").await;
    create_subns(&admin, &victim, &format!("{victim}-kid")).await.unwrap();
    let user = unique("tombwatcher");
    grant_view(&env, &user, &victim, "t-view");
    let api: Api<HierarchyConfiguration> = Api::all(env.client_as(&user, &[]).await);
    let mut events = api.watch(&WatchParams::default().timeout(60), "0").await.unwrap().boxed();
    let rv = |hc: &HierarchyConfiguration| hc.resource_version().and_then(|rv| rv.parse::<u64>().ok());
    let read = async {
        let mut added = None;
        loop {
            match events.try_next().await.unwrap().expect("the watch ended") {
                WatchEvent::Added(hc) if hc.namespace().as_deref() == Some(victim.as_str()) => {
                    added = rv(&hc);
                    ok(env.kubectl(&["delete", "rolebinding", "t-view", "-n", &victim]));
                }
                WatchEvent::Deleted(hc) if hc.namespace().as_deref() == Some(victim.as_str()) => {
                    return (added, hc)
                }
                _ => {}
            }
        }
    };
    let (added, tombstone) = tokio::time::timeout(WAIT, read).await.expect("a DELETED event for the victim");
    assert!(rv(&tombstone).is_some() && rv(&tombstone) >= added, "after {added:?}: {tombstone:?}");
    assert_eq!(tombstone.metadata.name.as_deref(), Some("hierarchy"));
    assert!(tombstone.metadata.labels.is_none() && tombstone.metadata.annotations.is_none(), "{tombstone:?}");
    assert!(
        tombstone.status.as_ref().is_none_or(|s| s.children.is_empty()),
        "no children told: {tombstone:?}"
    );
    delete_tree(&admin, &victim).await;
}

/// A view may hide a namespace, but what it shows must be true: a subnamespace the user may not
/// see is still drawn as a subnamespace, and marked hidden, in text and in data.
#[tokio::test]
async fn a_hidden_subnamespace_is_shown_hidden_and_as_a_subnamespace() {
    let Some((_, local, admin)) = Env::local_with_admin().await else { return };
    let (root, kids, outsider) = tree_and_outsider(&admin, "viewhidden").await;
    let user = unique("hiddenviewer");
    // View on the root and, through propagation, on root-a only.
    let mut binding = role_binding("hiddenviewer", "view", Subject::User(&user));
    binding.metadata.annotations =
        Some([("propagate.hnc.x-k8s.io/treeSelect".to_string(), kids[0].clone())].into());
    let bindings: Api<k8s_openapi::api::rbac::v1::RoleBinding> = Api::namespaced(admin.clone(), &root);
    bindings.create(&Default::default(), &binding).await.unwrap();
    let kubeconfig = local.user_kubeconfig(&user, &[]);
    let shown = format!("[s] {}\n", kids[0]);
    let tree = eventually("the user's tree with one subnamespace shown", WAIT, || async {
        let out = hns_with(&kubeconfig, &["tree", &root]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        (out.status.success() && text.contains(&shown)).then_some(text)
    })
    .await;
    assert!(tree.contains(&format!("[s] {} (hidden)\n", kids[1])), "{tree}");
    let data: serde_json::Value =
        serde_json::from_str(&ok(hns_with(&kubeconfig, &["tree", &root, "-o", "json"]))).unwrap();
    let hidden = &data["trees"][0]["children"][1];
    assert_eq!(
        (hidden["name"].as_str(), hidden["subnamespace"].as_bool(), hidden["hidden"].as_bool()),
        (Some(kids[1].as_str()), Some(true), Some(true)),
        "{data}"
    );
    delete_tree_and_outsider(&admin, &root, &outsider).await;
}
