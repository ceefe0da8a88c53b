//! The auth matrix: every operation hns serves × every role, both through kube-apiserver (a
//! user's client certificate) and straight to hns-apiserver with kube-apiserver's front-proxy
//! certificate (so hns's own SubjectAccessReviews decide, not kube-apiserver's RBAC filter); and
//! every operation attempted straight at hns-apiserver without a valid front-proxy identity.
//! Mutations are dry runs, so the matrix changes nothing.

use http::{Method, Request};
use kube::Client;
use serde_json::{json, Value};

use super::{Context, Figure};
use crate::{
    client_for, create_namespace, create_subns, delete_tree, rogue_identity, role_binding, Local, RemoteUser,
    Subject,
};

const SUITE: &str = "auth";
const API: &str = "/apis/hnc.x-k8s.io/v1alpha2";

/// Who makes the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    ClusterAdmin,
    NamespaceAdmin,
    SubnamespaceCreator,
    Nobody,
}

const ROLES: [Who; 4] = [Who::ClusterAdmin, Who::NamespaceAdmin, Who::SubnamespaceCreator, Who::Nobody];

impl Who {
    fn user(self) -> (&'static str, &'static [&'static str]) {
        match self {
            Who::ClusterAdmin => ("auth-root", &["system:masters"]),
            Who::NamespaceAdmin => ("auth-alice", &[]),
            Who::SubnamespaceCreator => ("auth-carol", &[]),
            Who::Nobody => ("auth-nobody", &[]),
        }
    }
}

/// A connection straight to hns-apiserver that must not be trusted as kube-apiserver.
#[derive(Debug, Clone, Copy)]
enum Attack {
    NoCertificate,
    CertificateFromAnotherCa,
    FrontProxyCaDisallowedCn,
    /// A valid cluster client certificate plus `X-Remote-*` headers claiming system:masters.
    ForgedHeaders,
}

const ATTACKS: [Attack; 4] = [
    Attack::NoCertificate,
    Attack::CertificateFromAnotherCa,
    Attack::FrontProxyCaDisallowedCn,
    Attack::ForgedHeaders,
];

/// One request of the matrix and who may make it.
struct Op {
    what: &'static str,
    method: Method,
    path: String,
    body: Option<Value>,
    allowed: &'static [Who],
    /// For a list answered with each user's view: who must see `p`'s rows, and who `q`'s (no
    /// one else may see either).
    rows: Option<(&'static [Who], &'static [Who])>,
}

fn ops(p: &str, q: &str) -> Vec<Op> {
    use Who::*;
    let readers: &[Who] = &[ClusterAdmin, NamespaceAdmin, SubnamespaceCreator];
    let merge = |v: Value| Some(v);
    vec![
        Op {
            what: "get hierarchyconfiguration",
            method: Method::GET,
            path: format!("{API}/namespaces/{p}/hierarchyconfigurations/hierarchy"),
            body: None,
            allowed: readers,
            rows: None,
        },
        Op {
            what: "list subnamespaces",
            method: Method::GET,
            path: format!("{API}/namespaces/{p}/subnamespaces"),
            body: None,
            allowed: readers,
            rows: None,
        },
        Op {
            what: "watch subnamespaces",
            method: Method::GET,
            path: format!("{API}/namespaces/{p}/subnamespaces?watch=1&timeoutSeconds=1"),
            body: None,
            allowed: readers,
            rows: None,
        },
        Op {
            what: "create subnamespace",
            method: Method::POST,
            path: format!("{API}/namespaces/{p}/subnamespaces?dryRun=All"),
            body: Some(
                json!({"apiVersion": "hnc.x-k8s.io/v1alpha2", "kind": "Subnamespace", "metadata": {"name": format!("{p}-new")}}),
            ),
            allowed: readers,
            rows: None,
        },
        Op {
            what: "delete subnamespace",
            method: Method::DELETE,
            path: format!("{API}/namespaces/{p}/subnamespaces/{p}-child?dryRun=All"),
            body: None,
            allowed: &[ClusterAdmin, NamespaceAdmin],
            rows: None,
        },
        Op {
            what: "patch hierarchyconfiguration",
            method: Method::PATCH,
            path: format!("{API}/namespaces/{p}/hierarchyconfigurations/hierarchy?dryRun=All"),
            body: merge(json!({"spec": {"allowCascadingDeletion": true}})),
            allowed: &[ClusterAdmin, NamespaceAdmin],
            rows: None,
        },
        Op {
            what: "move under a namespace they do not administer",
            method: Method::PATCH,
            path: format!("{API}/namespaces/{p}/hierarchyconfigurations/hierarchy?dryRun=All"),
            body: merge(json!({"spec": {"parent": q}})),
            allowed: &[ClusterAdmin],
            rows: None,
        },
        Op {
            what: "get hncconfiguration",
            method: Method::GET,
            path: format!("{API}/hncconfigurations/config"),
            body: None,
            allowed: &[ClusterAdmin],
            rows: None,
        },
        Op {
            what: "patch hncconfiguration",
            method: Method::PATCH,
            path: format!("{API}/hncconfigurations/config?dryRun=All"),
            body: merge(json!({"metadata": {"labels": {"auth-matrix": "dry-run"}}})),
            allowed: &[ClusterAdmin],
            rows: None,
        },
        Op {
            // Answered with each user's view (docs/access.md): what they may get, perhaps nothing.
            what: "list hierarchyconfigurations in all namespaces",
            method: Method::GET,
            path: format!("{API}/hierarchyconfigurations"),
            body: None,
            allowed: &ROLES,
            rows: Some((readers, &[ClusterAdmin])),
        },
    ]
}

pub async fn run(ctx: &Context) -> Vec<Figure> {
    let local = ctx.local();
    let pid = std::process::id();
    let (p, q) = (format!("auth{pid}-p"), format!("auth{pid}-q"));
    setup(ctx, &p, &q).await;
    let ops = ops(&p, &q);
    let mut wrong: Vec<String> = Vec::new();
    let mut cells = 0;

    for who in ROLES {
        let (user, groups) = who.user();
        let through_kube = client_for(&local.user_kubeconfig(user, groups)).await;
        let direct = local.direct_client(Some(local.front_proxy_identity()));
        for op in &ops {
            let want = if op.allowed.contains(&who) { "2xx" } else { "403" };
            let via_kube = send_kube(&through_kube, op).await;
            let via_hns = send_direct(&direct, local, op, Some((user, groups))).await;
            for (path, (got, body)) in [("through kube-apiserver", via_kube), ("front-proxy to hns", via_hns)]
            {
                cells += 1;
                let ok = if want == "2xx" { (200..300).contains(&got) } else { got == 403 };
                if !ok {
                    wrong.push(format!("{who:?} {} ({path}): got {got}, want {want}", op.what));
                }
                if let Some((sees_p, sees_q)) = op.rows {
                    let want = (sees_p.contains(&who), sees_q.contains(&who));
                    let seen = rows_seen(&body, &p, &q);
                    if seen != want {
                        wrong.push(format!(
                            "{who:?} {} ({path}): sees (p, q) {seen:?}, want {want:?}",
                            op.what
                        ));
                    }
                }
            }
        }
    }
    for attack in ATTACKS {
        let (client, headers) = attack_client(local, attack);
        // Authenticated as the certificate's user (no rights), whatever the headers say: refused,
        // or, for a list answered with the user's view, shown nothing.
        let forged = matches!(attack, Attack::ForgedHeaders);
        for op in &ops {
            cells += 1;
            let (got, body) = send_direct(&client, local, op, headers).await;
            let want: u16 = match (forged, op.rows) {
                (false, _) => 401,
                (true, None) => 403,
                (true, Some(_)) => 200,
            };
            if got != want {
                wrong.push(format!("{attack:?} {}: got {got}, want {want}", op.what));
            } else if got == 200 && rows_seen(&body, &p, &q) != (false, false) {
                wrong.push(format!("{attack:?} {}: the forged identity's rows were shown", op.what));
            }
        }
    }
    delete_tree(&ctx.client, &p).await;
    delete_tree(&ctx.client, &q).await;
    for w in &wrong {
        println!("auth: wrong cell: {w}");
    }
    let mut figures =
        vec![Figure::info(SUITE, "cells checked", cells), Figure::zero(SUITE, "cells wrong", wrong.len())];
    figures.extend(super::attacks::run(ctx).await);
    figures
}

/// `p` with a subnamespace, `q` elsewhere; the namespace admin and the subnamespace creator are
/// bound in `p` only.
async fn setup(ctx: &Context, p: &str, q: &str) {
    create_namespace(&ctx.client, p, &[]).await;
    create_namespace(&ctx.client, q, &[]).await;
    create_subns(&ctx.client, p, &format!("{p}-child")).await.expect("create the subnamespace");
    for (name, role, who) in [
        ("alice-admin", "admin", Who::NamespaceAdmin),
        ("carol-creator", "hns-subnamespace-creator", Who::SubnamespaceCreator),
    ] {
        kube::Api::namespaced(ctx.client.clone(), p)
            .create(&Default::default(), &role_binding(name, role, Subject::User(who.user().0)))
            .await
            .expect("bind a role");
    }
    // hns caches SubjectAccessReview answers for a few seconds; let RBAC settle first.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
}

fn content_type(method: &Method) -> &'static str {
    if method == Method::PATCH {
        "application/merge-patch+json"
    } else {
        "application/json"
    }
}

/// Whether a list's body shows rows of namespaces `p` and `q`.
fn rows_seen(body: &str, p: &str, q: &str) -> (bool, bool) {
    let list: Value = serde_json::from_str(body).unwrap_or_default();
    let namespaces: Vec<&str> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["metadata"]["namespace"].as_str())
        .collect();
    (namespaces.contains(&p), namespaces.contains(&q))
}

/// The status and body of `op` sent through kube-apiserver.
async fn send_kube(client: &Client, op: &Op) -> (u16, String) {
    let body = op.body.as_ref().map(|b| b.to_string().into_bytes()).unwrap_or_default();
    let req = Request::builder()
        .method(op.method.clone())
        .uri(&op.path)
        .header("content-type", content_type(&op.method))
        .body(body)
        .expect("a valid request");
    match client.request_text(req).await {
        Ok(body) => (200, body),
        Err(kube::Error::Api(e)) => (e.code, String::new()),
        Err(e) => {
            println!("auth: {} through kube-apiserver: {e}", op.what);
            (0, String::new())
        }
    }
}

/// The status and body of `op` sent straight to hns-apiserver.
async fn send_direct(
    client: &reqwest::Client,
    local: &Local,
    op: &Op,
    user: Option<(&str, &[&str])>,
) -> (u16, String) {
    let mut req = client
        .request(op.method.clone(), format!("{}{}", local.hns_url(), op.path))
        .header("content-type", content_type(&op.method));
    if let Some((name, groups)) = user {
        req = req.remote_user(name, groups);
    }
    if let Some(b) = &op.body {
        req = req.body(b.to_string());
    }
    match req.send().await {
        Ok(r) => {
            let code = r.status().as_u16();
            (code, r.text().await.unwrap_or_default())
        }
        Err(e) => {
            println!("auth: {} straight to hns: {e}", op.what);
            (0, String::new())
        }
    }
}

fn attack_client(
    local: &Local,
    attack: Attack,
) -> (reqwest::Client, Option<(&'static str, &'static [&'static str])>) {
    let admin: Option<(&'static str, &'static [&'static str])> = Some(("admin", &["system:masters"]));
    match attack {
        Attack::NoCertificate => (local.direct_client(None), admin),
        Attack::CertificateFromAnotherCa => {
            (local.direct_client(Some(rogue_identity("front-proxy-client"))), admin)
        }
        Attack::FrontProxyCaDisallowedCn => {
            (local.direct_client(Some(local.identity_from("front-proxy-ca", "mallory"))), admin)
        }
        Attack::ForgedHeaders => {
            (local.direct_client(Some(local.identity_from("ca", "auth-mallory"))), admin)
        }
    }
}
