//! Admission reviews as anyone who reaches hns-apiserver's port can send them, without a client
//! certificate: kube-apiserver calls webhooks without one unless its admission configuration
//! gives it one, so hns's webhook paths answer strangers. What such a caller may learn or make
//! hns do is what the hardening tests and the reliability suite's auth section check.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::Local;

/// A review asking to delete namespace `ns`, naming its uid if the sender knows it.
pub fn namespace_delete(ns: &str, uid: Option<&str>) -> Value {
    review(json!({
        "uid": "00000000-0000-0000-0000-000000000001",
        "kind": {"group": "", "version": "v1", "kind": "Namespace"},
        "resource": {"group": "", "version": "v1", "resource": "namespaces"},
        "name": ns,
        "operation": "DELETE",
        "userInfo": {"username": "someone"},
        "oldObject": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "uid": uid}},
    }))
}

/// A status update of hns's ResourceQuota in `ns` as Kubernetes' quota admission sends it:
/// oldObject with `(uid, resourceVersion, pods used)`, the update using `pods` more.
pub fn quota_status_update(ns: &str, (uid, version, used): (&str, &str, &str), pods: i64) -> Value {
    let rq = |used: &str| {
        json!({
            "apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "hrq.hnc.x-k8s.io", "namespace": ns, "uid": uid, "resourceVersion": version},
            "status": {"used": {"pods": used}},
        })
    };
    let more = used.parse::<i64>().unwrap_or(0) + pods;
    review(json!({
        "uid": "00000000-0000-0000-0000-000000000002",
        "kind": {"group": "", "version": "v1", "kind": "ResourceQuota"},
        "resource": {"group": "", "version": "v1", "resource": "resourcequotas"},
        "subResource": "status",
        "name": "hrq.hnc.x-k8s.io",
        "namespace": ns,
        "operation": "UPDATE",
        "userInfo": {"username": "system:apiserver"},
        "object": rq(&more.to_string()),
        "oldObject": rq(used),
    }))
}

/// An AdmissionReview carrying `request`, as kube-apiserver sends it (never a dry run).
fn review(mut request: Value) -> Value {
    request["dryRun"] = json!(false);
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

/// The answer of the webhook at `path` to `review`, sent without a certificate.
pub async fn send(local: &Local, path: &str, review: &Value) -> Value {
    let url = format!("{}{path}", local.hns_url());
    let answer = local.direct_client(None).post(url).json(review).send().await.expect("hns answers");
    answer.json().await.expect("an AdmissionReview")
}

/// Sends a webhook request whose body comes a byte a second, for at most `longest`, without a
/// certificate; returns how long hns kept the connection and what it answered (nothing if it
/// never did). Blocking: run it on a thread of its own.
pub fn slow_body(local: &Local, longest: Duration) -> (Duration, String) {
    let mut tls = local.connection(None, b"\x08http/1.1");
    let head = "POST /validate-namespaces HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{";
    tls.write_all(head.as_bytes()).expect("the request's head is sent");
    let started = Instant::now();
    tls.get_ref().set_read_timeout(Some(Duration::from_secs(1))).expect("a read timeout");
    let mut buf = [0u8; 4096];
    while started.elapsed() < longest {
        if tls.write_all(b" ").is_err() {
            break;
        }
        // Nothing to read for a second times out; an answer (or the end) stops the trickle.
        match tls.read(&mut buf) {
            Ok(n) => return (started.elapsed(), String::from_utf8_lossy(&buf[..n]).to_string()),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    (started.elapsed(), String::new())
}
