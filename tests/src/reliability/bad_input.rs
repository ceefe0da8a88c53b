//! Bad input: schemathesis (from PyPI) generates requests from hns-apiserver's own OpenAPI
//! document and sends them straight to hns-apiserver over a verified front-proxy connection, as
//! kube-apiserver would; hand-written cases cover what a schema cannot express (oversized bodies,
//! wrong kinds, broken patches, garbage resourceVersions). Figures: requests tried, 5xx answers,
//! invalid requests accepted, and whether refused requests changed anything in the cluster; and
//! two attacks on memory: amplifying patches and an HTTP/2 flood ([`super::h2_flood`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::ListParams;
use kube::Api;
use reqwest::Method;
use serde_json::{json, Value};

use super::{Context, Figure};
use crate::{create_namespace, create_subns, delete_tree, settled_parent, Local, RemoteUser};

const SUITE: &str = "bad input";
const API: &str = "/apis/hnc.x-k8s.io/v1alpha2";
const ADMIN: (&str, &str) = ("reliability-admin", "system:masters");

pub async fn run(ctx: &Context) -> Vec<Figure> {
    let local = ctx.local();
    let t = format!("bad{}-t", std::process::id());
    create_namespace(&ctx.client, &t, &[]).await;
    create_subns(&ctx.client, &t, &format!("{t}-child")).await.expect("create the target's subnamespace");
    settled_parent(&ctx.client, &t).await;

    let before = state(ctx, &t).await;
    let amplification = patch_amplification(ctx, &t).await;
    let flood = super::h2_flood::run(local, &ctx.processes, &local.replica_names[0]).await;
    let hand = hand_written(local, &t).await;
    let negative = schemathesis(ctx, &t, "negative").await;
    let changed = changes(&before, &state(ctx, &t).await);
    for c in &changed {
        println!("bad input: changed by refused requests: {c}");
    }
    // Valid requests may change things (that is their job); only their answers are judged.
    let positive = schemathesis(ctx, &t, "positive").await;
    restore_config(ctx, &before).await;
    delete_tree(&ctx.client, &t).await;

    let mut figures = vec![
        Figure::zero(SUITE, "amplifying patches accepted", amplification.accepted),
        peak_growth(
            ("amplifying patches: peak RSS growth of the replica", "amplifying patches: peak RSS measured"),
            amplification.peak_growth_mib,
            32,
        ),
        Figure::zero(SUITE, "HTTP/2 flood: connections where hns agreed to h2", flood.h2_agreed),
        Figure::info(SUITE, "HTTP/2 flood: bytes written before the connections ended", flood.bytes_taken),
        peak_growth(
            (
                "HTTP/2 flood of empty DATA frames: peak RSS growth of the replica",
                "HTTP/2 flood: peak RSS measured",
            ),
            flood.peak_growth_mib,
            16,
        ),
        Figure::info(SUITE, "hand-written cases tried", hand.tried),
        Figure::zero(SUITE, "hand-written cases accepted", hand.accepted),
        Figure::zero(SUITE, "hand-written cases answered 5xx", hand.server_errors),
    ];
    match (negative, positive) {
        (Ok(n), Ok(p)) => figures.extend([
            Figure::info(
                SUITE,
                "schemathesis requests (invalid / valid)",
                format!("{} / {}", n.requests, p.requests),
            ),
            Figure::zero(SUITE, "schemathesis 5xx answers", n.server_errors + p.server_errors),
            Figure::zero(SUITE, "schemathesis invalid requests accepted", n.accepted_invalid),
            Figure::info(SUITE, "schemathesis requests not sent (invalid HTTP)", n.not_sent + p.not_sent),
        ]),
        (n, p) => {
            let e = n.err().or(p.err()).expect("one failed");
            figures.push(Figure::target(SUITE, "schemathesis ran", format!("no: {e:#}"), "yes", false));
        }
    }
    figures.push(Figure::zero(SUITE, "cluster changes by refused requests", changed.len()));
    figures
}

/// The figure for how far an attack grew the replica's resident memory at its peak: the growth
/// (named `names.0`) against `limit_mib`, or, when it could not be measured, a failed figure
/// named `names.1`.
fn peak_growth(names: (&str, &str), growth_mib: Option<f64>, limit_mib: u32) -> Figure {
    match growth_mib {
        Some(g) => Figure::target(
            SUITE,
            names.0,
            format!("{g:+.1} MiB"),
            format!("< +{limit_mib} MiB"),
            g < f64::from(limit_mib),
        ),
        None => Figure::target(SUITE, names.1, "no", "yes", false),
    }
}

/// What the amplifying patches did.
struct Amplification {
    accepted: usize,
    /// Peak resident memory of the replica that answered, above where it started.
    peak_growth_mib: Option<f64>,
}

/// Patches that ask for far more memory than they take to send, sent by a namespace admin's
/// rights (the cluster admin here): a JSON patch copying the annotations into themselves 20 times
/// (2.6 KB asking for 1 GiB), 10,001 operations, a deep merge patch, and a 1 MiB value copied
/// eight times. Each must be refused before hns allocates what it asks for.
async fn patch_amplification(ctx: &Context, t: &str) -> Amplification {
    let local = ctx.local();
    let hc = format!("{API}/namespaces/{t}/hierarchyconfigurations/hierarchy");
    let doubling: Vec<Value> = std::iter::once(json!({"op": "add", "path": "/metadata/annotations", "value": {"a": "x".repeat(1000)}}))
        .chain((0..20).map(|i| json!({"op": "copy", "from": "/metadata/annotations", "path": format!("/metadata/annotations/a{i}")})))
        .collect();
    let many: Vec<Value> = (0..10_001).map(|_| json!({"op": "test", "path": "/spec", "value": {}})).collect();
    let large: Vec<Value> = std::iter::once(json!({"op": "add", "path": "/metadata/annotations", "value": {"b": "x".repeat(1 << 20)}}))
        .chain((0..8).map(|i| json!({"op": "copy", "from": "/metadata/annotations/b", "path": format!("/metadata/annotations/b{i}")})))
        .collect();
    let deep = format!("{}{}", "{\"a\":".repeat(10_000), "}".repeat(10_000));
    let cases = [
        ("application/json-patch+json", Value::Array(doubling).to_string()),
        ("application/json-patch+json", Value::Array(many).to_string()),
        ("application/json-patch+json", Value::Array(large).to_string()),
        ("application/merge-patch+json", deep),
    ];
    let replica = &local.replica_names[0];
    let processes = &ctx.processes;
    let measured = processes.reset_peak_rss(replica);
    let start = processes.rss_mib(replica);
    let client = local.direct_client(Some(local.front_proxy_identity()));
    let mut accepted = 0;
    for (content_type, body) in cases {
        let answer = client
            .patch(format!("{}{hc}", local.hns_url()))
            .remote_user(ADMIN.0, &[ADMIN.1])
            .header("content-type", content_type)
            .body(body)
            .send()
            .await;
        match answer {
            Ok(r) if r.status().is_success() => {
                accepted += 1;
                println!("bad input: amplifying patch accepted with {}", r.status());
            }
            Ok(r) => println!("bad input: amplifying patch answered {}", r.status()),
            Err(e) => println!("bad input: amplifying patch: no answer: {e}"),
        }
    }
    let peak = processes.peak_rss_mib(replica);
    let peak_growth_mib = match (measured, start, peak) {
        (true, Some(s), Some(p)) => Some(p - s),
        _ => None,
    };
    Amplification { accepted, peak_growth_mib }
}

/// What the hand-written cases found.
#[derive(Default)]
struct Hand {
    tried: usize,
    accepted: usize,
    server_errors: usize,
}

/// Each case is invalid and must be refused with a 4xx.
async fn hand_written(local: &Local, t: &str) -> Hand {
    let sub = |name: &str| json!({"apiVersion": "hnc.x-k8s.io/v1alpha2", "kind": "Subnamespace", "metadata": {"name": name}});
    let subs = format!("{API}/namespaces/{t}/subnamespaces");
    let hc = format!("{API}/namespaces/{t}/hierarchyconfigurations/hierarchy");
    let json_ct = "application/json";
    let merge = "application/merge-patch+json";
    let jsonpatch = "application/json-patch+json";
    let huge = sub(&format!("{t}-huge"))
        .to_string()
        .replace("{\"name\"", &format!("{{\"x\":\"{}\",\"name\"", "a".repeat(4 << 20)));
    let cases: Vec<(&str, Method, String, &str, String)> = vec![
        ("oversized body (4 MiB)", Method::POST, subs.clone(), json_ct, huge),
        ("wrong kind", Method::POST, subs.clone(), json_ct, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("{t}-k")}}).to_string()),
        ("wrong apiVersion", Method::POST, subs.clone(), json_ct, json!({"apiVersion": "hnc.x-k8s.io/v1alpha1", "kind": "Subnamespace", "metadata": {"name": format!("{t}-v")}}).to_string()),
        ("invalid name", Method::POST, subs.clone(), json_ct, sub("Not_A_DNS-Label!").to_string()),
        ("name too long", Method::POST, subs.clone(), json_ct, sub(&"n".repeat(300)).to_string()),
        ("missing name", Method::POST, subs.clone(), json_ct, json!({"apiVersion": "hnc.x-k8s.io/v1alpha2", "kind": "Subnamespace", "metadata": {}}).to_string()),
        ("unknown field, fieldValidation=Strict", Method::POST, format!("{subs}?fieldValidation=Strict"), json_ct, {
            let mut b = sub(&format!("{t}-u"));
            b["spec"] = json!({"bogus": true});
            b.to_string()
        }),
        ("body is not JSON", Method::POST, subs.clone(), json_ct, "{\"apiVersion\": ".into()),
        ("body is a JSON array", Method::POST, subs.clone(), json_ct, "[]".into()),
        ("unsupported content type", Method::POST, subs.clone(), "text/plain", sub(&format!("{t}-ct")).to_string()),
        ("subnamespace in an excluded namespace", Method::POST, format!("{API}/namespaces/kube-system/subnamespaces"), json_ct, sub(&format!("{t}-ks")).to_string()),
        ("subnamespace of a missing namespace", Method::POST, format!("{API}/namespaces/{t}-missing/subnamespaces"), json_ct, sub(&format!("{t}-m")).to_string()),
        ("subnamespace named like an existing namespace", Method::POST, subs.clone(), json_ct, sub("default").to_string()),
        ("merge patch that is not JSON", Method::PATCH, hc.clone(), merge, "{\"spec\": ".into()),
        ("merge patch with a wrongly typed field", Method::PATCH, hc.clone(), merge, json!({"spec": {"allowCascadingDeletion": "yes"}}).to_string()),
        ("JSON patch with an unknown op", Method::PATCH, hc.clone(), jsonpatch, json!([{"op": "frobnicate", "path": "/spec/parent", "value": "x"}]).to_string()),
        ("JSON patch whose test fails", Method::PATCH, hc.clone(), jsonpatch, json!([{"op": "test", "path": "/spec/parent", "value": "nope"}, {"op": "replace", "path": "/spec/allowCascadingDeletion", "value": true}]).to_string()),
        ("strategic merge patch", Method::PATCH, hc.clone(), "application/strategic-merge-patch+json", json!({"spec": {"allowCascadingDeletion": true}}).to_string()),
        ("server-side apply without apiVersion, kind or name", Method::PATCH, format!("{hc}?fieldManager=x"), "application/apply-patch+yaml", json!({"spec": {"allowCascadingDeletion": true}}).to_string()),
        ("parent is itself", Method::PATCH, hc.clone(), merge, json!({"spec": {"parent": t}}).to_string()),
        ("parent does not exist", Method::PATCH, hc.clone(), merge, json!({"spec": {"parent": format!("{t}-nope")}}).to_string()),
        ("parent is its own subnamespace (cycle)", Method::PATCH, hc.clone(), merge, json!({"spec": {"parent": format!("{t}-child")}}).to_string()),
        ("name in the body differs from the URL", Method::PUT, hc.clone(), json_ct, json!({"apiVersion": "hnc.x-k8s.io/v1alpha2", "kind": "HierarchyConfiguration", "metadata": {"name": "other", "namespace": t}, "spec": {}}).to_string()),
        ("hierarchy configuration not named hierarchy", Method::POST, format!("{API}/namespaces/{t}/hierarchyconfigurations"), json_ct, json!({"apiVersion": "hnc.x-k8s.io/v1alpha2", "kind": "HierarchyConfiguration", "metadata": {"name": "other"}, "spec": {}}).to_string()),
        ("unknown propagation mode", Method::PATCH, format!("{API}/hncconfigurations/config"), merge, json!({"spec": {"resources": [{"group": "", "resource": "configmaps", "mode": "Sometimes"}]}}).to_string()),
        ("watch from a garbage resourceVersion", Method::GET, format!("{subs}?watch=true&resourceVersion=not-a-number"), json_ct, String::new()),
        ("list with a garbage continue token", Method::GET, format!("{subs}?limit=1&continue=garbage"), json_ct, String::new()),
        ("list with a malformed label selector", Method::GET, format!("{subs}?labelSelector=a%20in%20(b"), json_ct, String::new()),
        ("list with an unsupported field selector", Method::GET, format!("{subs}?fieldSelector=spec.parent%3Dx"), json_ct, String::new()),
        ("watch=null", Method::GET, format!("{subs}?watch=null"), json_ct, String::new()),
        ("delete with an unsupported content type", Method::DELETE, format!("{subs}/{t}-child"), "multipart/form-data", String::new()),
        ("delete with a wrong uid precondition", Method::DELETE, format!("{subs}/{t}-child"), json_ct, json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}}).to_string()),
    ];
    let client = local.direct_client(Some(local.front_proxy_identity()));
    let mut hand = Hand::default();
    for (what, method, path, content_type, body) in cases {
        hand.tried += 1;
        let mut req = client
            .request(method, format!("{}{path}", local.hns_url()))
            .remote_user(ADMIN.0, &[ADMIN.1])
            .header("content-type", content_type);
        if !body.is_empty() {
            req = req.body(body);
        }
        let status = match req.send().await {
            Ok(r) => r.status().as_u16(),
            Err(e) => {
                println!("bad input: {what}: no answer: {e}");
                0
            }
        };
        if (200..300).contains(&status) {
            hand.accepted += 1;
            println!("bad input: {what}: accepted with {status}");
        }
        if status >= 500 || status == 0 {
            hand.server_errors += 1;
            println!("bad input: {what}: answered {status}");
        }
    }
    hand
}

/// What one schemathesis run found.
struct Fuzzed {
    requests: usize,
    server_errors: usize,
    accepted_invalid: usize,
    not_sent: usize,
}

async fn schemathesis(ctx: &Context, t: &str, mode: &str) -> anyhow::Result<Fuzzed> {
    let local = ctx.local();
    let dir = local.dir.join(format!("schemathesis-{mode}"));
    // Reports are found by name prefix: no older run's may be left.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let spec = dir.join("openapi.json");
    let doc: Value = local
        .direct_client(Some(local.front_proxy_identity()))
        .get(format!("{}/openapi/v3{API}", local.hns_url()))
        .remote_user(ADMIN.0, &[ADMIN.1])
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    std::fs::write(&spec, serde_json::to_vec(&doc)?)?;
    std::fs::write(dir.join("schemathesis.toml"), config(t))?;
    let bin = std::env::var("HNS_SCHEMATHESIS").unwrap_or_else(|_| "schemathesis".into());
    let examples = ctx.scale.pick("5", "100").to_string();
    let phases = ctx.scale.pick("coverage,fuzzing", "examples,coverage,fuzzing");
    let out = Command::new(&bin)
        .arg("--config-file")
        .arg(dir.join("schemathesis.toml"))
        .arg("run")
        .arg(&spec)
        .args(["--url", &local.hns_url(), "--mode", mode, "--phases", phases, "--max-examples", &examples])
        .args(["--seed", &ctx.seed.to_string(), "--report", "json,vcr", "--no-shrink"])
        .arg("--report-dir")
        .arg(&dir)
        .args(["--checks", "not_a_server_error,negative_data_rejection"])
        .args(["-H", &format!("X-Remote-User: {}", ADMIN.0), "-H", &format!("X-Remote-Group: {}", ADMIN.1)])
        .arg("--request-cert")
        .arg(local.pki("front-proxy-client.crt"))
        .arg("--request-cert-key")
        .arg(local.pki("front-proxy-client.key"))
        .arg("--tls-verify")
        .arg(local.pki("hns-ca.crt"))
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run {bin} (hack/reliability.sh installs it): {e}"))?;
    let report = |prefix: &str| -> anyhow::Result<PathBuf> {
        let found = std::fs::read_dir(&dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(prefix)));
        found.ok_or_else(|| {
            anyhow::anyhow!(
                "schemathesis wrote no {prefix} report:\n{}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    };
    let fuzzed = read_reports(&report("vcr-")?, &report("json-")?)?;
    if fuzzed.server_errors + fuzzed.accepted_invalid > 0 {
        println!("bad input: schemathesis ({mode}) found:\n{}", String::from_utf8_lossy(&out.stdout));
    }
    Ok(fuzzed)
}

/// Path parameters point at real objects, so requests reach hns's validation rather than 404.
fn config(t: &str) -> String {
    format!(
        r#"[parameters]
"path.namespace" = "{t}"

[[operations]]
include-path-regex = "hierarchyconfigurations/\\{{name\\}}"
parameters = {{ "path.name" = "hierarchy" }}

[[operations]]
include-path-regex = "(subnamespaces|subnamespaceanchors)/\\{{name\\}}"
parameters = {{ "path.name" = "{t}-child" }}

[[operations]]
include-path-regex = "hncconfigurations/\\{{name\\}}"
parameters = {{ "path.name" = "config" }}
"#
    )
}

fn read_reports(vcr: &Path, json_report: &Path) -> anyhow::Result<Fuzzed> {
    // schemathesis's own record of this run, far larger than a document from a user: read whole.
    let mut options = serde_saphyr::Options::default();
    options.budget = None;
    let cassette: Value = serde_saphyr::from_slice_with_options(&std::fs::read(vcr)?, options)?;
    let interactions = cassette["http_interactions"].as_array().cloned().unwrap_or_default();
    let code = |i: &Value| i["response"]["status"]["code"].as_str().and_then(|c| c.parse::<u16>().ok());
    let failed = |i: &Value, check: &str| {
        i["checks"].as_array().is_some_and(|cs| {
            cs.iter().any(|c| c["name"].as_str() == Some(check) && c["status"].as_str() == Some("FAILURE"))
        })
    };
    let summary: Value = serde_json::from_slice(&std::fs::read(json_report)?)?;
    Ok(Fuzzed {
        requests: interactions.len(),
        server_errors: interactions.iter().filter(|i| code(i).is_some_and(|c| c >= 500)).count(),
        accepted_invalid: interactions.iter().filter(|i| failed(i, "negative_data_rejection")).count(),
        not_sent: summary["test_cases"]["errored"].as_u64().unwrap_or(0) as usize,
    })
}

/// A namespace's labels and annotations.
type Meta = (BTreeMap<String, String>, BTreeMap<String, String>);

/// What refused requests must not change: which namespaces exist, the target tree's labels and
/// annotations, and the HNC configuration.
#[derive(Debug, PartialEq)]
struct State {
    names: BTreeSet<String>,
    tree: BTreeMap<String, Meta>,
    config: Value,
}

async fn state(ctx: &Context, t: &str) -> State {
    let list = Api::<Namespace>::all(ctx.client.clone())
        .list(&ListParams::default())
        .await
        .expect("list namespaces");
    let mut s = State { names: BTreeSet::new(), tree: BTreeMap::new(), config: Value::Null };
    for ns in list {
        let name = ns.metadata.name.clone().unwrap_or_default();
        if name.starts_with(t) {
            s.tree.insert(
                name.clone(),
                (ns.metadata.labels.unwrap_or_default(), ns.metadata.annotations.unwrap_or_default()),
            );
        }
        if ns.metadata.deletion_timestamp.is_none() {
            s.names.insert(name);
        }
    }
    let config: Api<hns_api::HNCConfiguration> = Api::all(ctx.client.clone());
    s.config = serde_json::to_value(config.get("config").await.expect("get the HNCConfiguration").spec)
        .unwrap_or_default();
    s
}

fn changes(before: &State, after: &State) -> Vec<String> {
    let mut out: Vec<String> =
        after.names.difference(&before.names).map(|n| format!("namespace {n} appeared")).collect();
    for (name, (labels, annotations)) in &before.tree {
        let Some((new_labels, new_annotations)) = after.tree.get(name) else { continue };
        for (what, old, new) in [("label", labels, new_labels), ("annotation", annotations, new_annotations)]
        {
            let keys: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
            for k in keys.into_iter().filter(|k| old.get(*k) != new.get(*k)) {
                out.push(format!("namespace {name}: {what} {k}: {:?} → {:?}", old.get(k), new.get(k)));
            }
        }
    }
    if before.config != after.config {
        out.push("HNCConfiguration spec changed".into());
    }
    out
}

async fn restore_config(ctx: &Context, before: &State) {
    let config: Api<hns_api::HNCConfiguration> = Api::all(ctx.client.clone());
    let patch = json!({"spec": before.config});
    let _ = config.patch("config", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(patch)).await;
}
