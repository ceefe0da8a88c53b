//! `/healthz`, `/livez`, `/readyz` in the k8s.io/apiserver format, and `/version`.

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::json;

use crate::state::AppState;

/// One named check and whether it passes.
type Check = (&'static str, bool);

fn report(endpoint: &str, checks: &[Check], req: &HttpRequest) -> HttpResponse {
    let ok = checks.iter().all(|(_, pass)| *pass);
    let verbose = req.query_string().split('&').any(|p| p == "verbose" || p.starts_with("verbose="));
    let mut body = String::new();
    if verbose || !ok {
        for (name, pass) in checks {
            if *pass {
                body.push_str(&format!("[+]{name} ok\n"));
            } else {
                body.push_str(&format!("[-]{name} failed: reason withheld\n"));
            }
        }
        body.push_str(&format!("{endpoint} check {}", if ok { "passed" } else { "failed" }));
    } else {
        body.push_str("ok");
    }
    let mut resp = if ok { HttpResponse::Ok() } else { HttpResponse::InternalServerError() };
    resp.content_type("text/plain; charset=utf-8").body(body)
}

/// What a replica needs before it can answer correctly, and that it is not stopping: the HNC configuration, its serving
/// certificate, the cluster's authentication configuration (the front proxy's and clients' CAs),
/// and the namespace cache, each read in full at least once.
fn readiness(state: &AppState) -> [Check; 6] {
    [
        ("ping", true),
        // Told to stop: kube-apiserver's check of the same name (crate::shutdown).
        ("shutdown", !state.shutdown.is_draining()),
        ("configuration", state.config.is_synced()),
        ("serving-certificate", state.serving.is_loaded()),
        ("authentication-config", state.authn.is_loaded()),
        ("namespace-cache", state.cache.is_synced()),
    ]
}

/// `/livez`: the process is serving.
pub async fn livez(req: HttpRequest) -> HttpResponse {
    report("livez", &[("ping", true)], &req)
}

/// `/readyz`: ready only once every readiness check passes, so no replica answers before it
/// can answer correctly.
pub async fn readyz(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    report("readyz", &readiness(&state), &req)
}

/// `/healthz`: all checks.
pub async fn healthz(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    report("healthz", &readiness(&state), &req)
}

/// `/version`, in `version.Info`'s shape.
pub async fn version() -> HttpResponse {
    let v = env!("CARGO_PKG_VERSION");
    let mut parts = v.split('.');
    HttpResponse::Ok().json(json!({
        "major": parts.next().unwrap_or("0"),
        "minor": parts.next().unwrap_or("0"),
        "gitVersion": format!("v{v}"),
        "gitCommit": option_env!("HNS_GIT_COMMIT").unwrap_or(""),
        "gitTreeState": "",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    }))
}
