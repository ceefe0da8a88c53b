//! The client load that runs through kube-apiserver for the whole availability run, as a
//! cluster's clients make it: reads, lists and watches of hns's resources, namespace and
//! subnamespace creations and deletions, aggregated discovery every second (what `kubectl
//! api-resources` and every client-go program do), a namespace deletion started every few
//! seconds and timed to its end, and the APIService's Available condition sampled every 250 ms.
//! Everything it sees is counted in a [`Tally`], which a scenario takes at its start and end.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{AsyncBufReadExt, TryStreamExt};
use http::Request;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use serde_json::{json, Value};

const API: &str = "/apis/hnc.x-k8s.io/v1alpha2";
const APISERVICE: &str = "/apis/apiregistration.k8s.io/v1/apiservices/v1alpha2.hnc.x-k8s.io";
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// What the load saw since the tally was last taken.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// Answers by verb and HTTP code (0: no answer: the connection failed).
    pub answers: BTreeMap<(&'static str, u16), usize>,
    /// Discovery checks made, and those that did not show hns's group version as served.
    pub discovery: (usize, usize),
    /// Time the APIService was seen not Available, and the longest stretch of it.
    pub unavailable: (Duration, Duration),
    /// Namespace deletions that completed, and how long each took.
    pub deletions: Vec<Duration>,
    /// Watches that ended with a bookmark (clean), that ended without one (cut), and resumes
    /// refused with 410 Gone (the client had to list again).
    pub watches: (usize, usize, usize),
}

impl Tally {
    /// Requests answered with something a client must treat as a failure: no answer, 429, 5xx.
    pub fn failed(&self) -> BTreeMap<(&'static str, u16), usize> {
        self.answers.iter().filter(|((_, code), _)| failure(*code)).map(|(k, v)| (*k, *v)).collect()
    }

    /// All requests counted.
    pub fn requests(&self) -> usize {
        self.answers.values().sum()
    }
}

fn failure(code: u16) -> bool {
    code == 0 || code == 429 || code >= 500
}

/// The tally shared by the load's tasks, and the unavailable stretch in progress.
#[derive(Default)]
struct Shared {
    tally: Tally,
    unavailable_since: Option<Instant>,
    /// The namespace deletions started and not finished, by number, with when they started.
    deletions_in_flight: BTreeMap<u64, Instant>,
}

/// The running load.
pub struct Load {
    shared: Arc<Mutex<Shared>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    /// Starts the load under the tree rooted at `root` (which it creates), with names from `tag`.
    pub async fn start(client: Client, tag: &str) -> Load {
        let root = crate::create_namespace(&client, &format!("{tag}-load"), &[]).await;
        let shared = Arc::new(Mutex::new(Shared::default()));
        let mut tasks = Vec::new();
        let spawn = |tasks: &mut Vec<_>, task| tasks.push(tokio::spawn(task));
        spawn(
            &mut tasks,
            Box::pin(reads(client.clone(), root.clone(), shared.clone()))
                as futures::future::BoxFuture<'static, ()>,
        );
        spawn(&mut tasks, Box::pin(writes(client.clone(), root.clone(), tag.to_string(), shared.clone())));
        for _ in 0..2 {
            spawn(&mut tasks, Box::pin(watch(client.clone(), shared.clone())));
        }
        spawn(&mut tasks, Box::pin(discovery(client.clone(), shared.clone())));
        spawn(&mut tasks, Box::pin(deletions(client.clone(), tag.to_string(), shared.clone())));
        spawn(&mut tasks, Box::pin(apiservice(client.clone(), shared.clone())));
        Load { shared, tasks }
    }

    /// What was seen since the last take, and a fresh tally from now.
    pub fn take(&self) -> Tally {
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(since) = shared.unavailable_since {
            // A stretch in progress is counted up to now, and on from now in the next tally.
            let so_far = since.elapsed();
            shared.tally.unavailable.0 += so_far;
            shared.tally.unavailable.1 = shared.tally.unavailable.1.max(so_far);
            shared.unavailable_since = Some(Instant::now());
        }
        std::mem::take(&mut shared.tally)
    }

    /// Namespace deletions started before `when` and not finished yet.
    pub fn deletions_in_flight_since(&self, when: Instant) -> usize {
        let shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        shared.deletions_in_flight.values().filter(|started| **started <= when).count()
    }

    /// Stops every task.
    pub fn stop(self) {
        for task in self.tasks {
            task.abort();
        }
    }
}

fn record(shared: &Mutex<Shared>, f: impl FnOnce(&mut Shared)) {
    f(&mut shared.lock().unwrap_or_else(|e| e.into_inner()));
}

fn answered(shared: &Mutex<Shared>, verb: &'static str, code: u16) {
    record(shared, |s| *s.tally.answers.entry((verb, code)).or_default() += 1);
}

/// Sends `req`; its HTTP code (0 if there was no answer) and body.
async fn send(client: &Client, req: Request<Vec<u8>>) -> (u16, String) {
    match client.request_text(req).await {
        Ok(body) => (200, body),
        Err(kube::Error::Api(status)) => (status.code, String::new()),
        Err(_) => (0, String::new()),
    }
}

fn get(path: &str) -> Request<Vec<u8>> {
    Request::get(path).body(Vec::new()).expect("a valid request")
}

/// GETs and LISTs of hns's resources, ten a second.
async fn reads(client: Client, root: String, shared: Arc<Mutex<Shared>>) {
    let one = format!("{API}/namespaces/{root}/hierarchyconfigurations/hierarchy");
    let all = format!("{API}/subnamespaces?limit=50");
    loop {
        let (code, _) = send(&client, get(&one)).await;
        answered(&shared, "get", code);
        let (code, _) = send(&client, get(&all)).await;
        answered(&shared, "list", code);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A subnamespace and a namespace made every second, each deleted five seconds later.
async fn writes(client: Client, root: String, tag: String, shared: Arc<Mutex<Shared>>) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for i in 0u64.. {
        let sub = format!("{root}-s{i}");
        let body =
            json!({"apiVersion": "hnc.x-k8s.io/v1alpha2", "kind": "Subnamespace", "metadata": {"name": sub}});
        let req = Request::post(format!("{API}/namespaces/{root}/subnamespaces"))
            .header("content-type", "application/json")
            .body(body.to_string().into_bytes())
            .expect("a valid request");
        let (code, _) = send(&client, req).await;
        answered(&shared, "create subnamespace", code);
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": format!("{tag}-w{i}")}}))
            .expect("a namespace");
        let code = namespaces.create(&PostParams::default(), &ns).await.map_or_else(|e| code_of(&e), |_| 201);
        answered(&shared, "create namespace", code);
        if let Some(old) = i.checked_sub(5) {
            let path = format!("{API}/namespaces/{root}/subnamespaces/{root}-s{old}");
            let (code, _) =
                send(&client, Request::delete(path).body(Vec::new()).expect("a valid request")).await;
            answered(&shared, "delete subnamespace", code);
            let code = namespaces
                .delete(&format!("{tag}-w{old}"), &DeleteParams::default())
                .await
                .map_or_else(|e| code_of(&e), |_| 200);
            answered(&shared, "delete namespace", code);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

fn code_of(e: &kube::Error) -> u16 {
    match e {
        kube::Error::Api(status) => status.code,
        _ => 0,
    }
}

/// A watch of every namespace's hierarchy configuration, resumed from its last
/// resourceVersion whenever it ends (every 30 s at least: the watches' timeout), as an
/// informer does; listed again when a resume is refused.
async fn watch(client: Client, shared: Arc<Mutex<Shared>>) {
    let mut rv = String::new();
    loop {
        if rv.is_empty() {
            let (code, body) = send(&client, get(&format!("{API}/hierarchyconfigurations?limit=1"))).await;
            answered(&shared, "list", code);
            let list: Value = serde_json::from_str(&body).unwrap_or_default();
            rv = list["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string();
            if rv.is_empty() {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        }
        let path = format!("{API}/hierarchyconfigurations?watch=true&allowWatchBookmarks=true&timeoutSeconds=30&resourceVersion={rv}");
        let lines = match client.request_stream(get(&path)).await {
            Ok(stream) => stream,
            Err(e) => {
                answered(&shared, "watch", code_of(&e));
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        answered(&shared, "watch", 200);
        let mut lines = lines.lines();
        let mut ended_with_bookmark = false;
        while let Ok(Some(line)) = lines.try_next().await {
            let event: Value = serde_json::from_str(&line).unwrap_or_default();
            if event["type"] == "ERROR" {
                if event["object"]["code"] == 410 {
                    record(&shared, |s| s.tally.watches.2 += 1);
                    rv.clear();
                }
                break;
            }
            ended_with_bookmark = event["type"] == "BOOKMARK";
            if let Some(v) = event["object"]["metadata"]["resourceVersion"].as_str() {
                rv = v.to_string();
            }
        }
        record(
            &shared,
            |s| if ended_with_bookmark { s.tally.watches.0 += 1 } else { s.tally.watches.1 += 1 },
        );
    }
}

/// Aggregated discovery every second, as client-go asks for it: hns's group version must be
/// there and not stale; and the group version's own discovery document.
async fn discovery(client: Client, shared: Arc<Mutex<Shared>>) {
    loop {
        let req =
            Request::get("/apis").header("accept", AGGREGATED).body(Vec::new()).expect("a valid request");
        let (code, body) = send(&client, req).await;
        let served = code == 200 && {
            let doc: Value = serde_json::from_str(&body).unwrap_or_default();
            doc["items"].as_array().into_iter().flatten().any(|group| {
                group["metadata"]["name"] == "hnc.x-k8s.io"
                    && group["versions"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|v| v["version"] == "v1alpha2" && v["freshness"] != "Stale")
            })
        };
        let (code, _) = send(&client, get(API)).await;
        answered(&shared, "discovery", code);
        record(&shared, |s| {
            s.tally.discovery.0 += 1;
            if !served || code != 200 {
                s.tally.discovery.1 += 1;
            }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// A namespace holding a ConfigMap deleted every three seconds, each timed until it is gone.
async fn deletions(client: Client, tag: String, shared: Arc<Mutex<Shared>>) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for i in 0u64.. {
        let name = format!("{tag}-d{i}");
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).expect("a namespace");
        if namespaces.create(&PostParams::default(), &ns).await.is_ok() {
            let cm: ConfigMap =
                serde_json::from_value(json!({"metadata": {"name": "content"}})).expect("a ConfigMap");
            let _ =
                Api::<ConfigMap>::namespaced(client.clone(), &name).create(&PostParams::default(), &cm).await;
            let started = Instant::now();
            if namespaces.delete(&name, &DeleteParams::default()).await.is_ok() {
                record(&shared, |s| {
                    s.deletions_in_flight.insert(i, started);
                });
                let (namespaces, shared) = (namespaces.clone(), shared.clone());
                tokio::spawn(async move {
                    while namespaces.get_opt(&name).await.map_or(true, |n| n.is_some()) {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    record(&shared, |s| {
                        s.deletions_in_flight.remove(&i);
                        s.tally.deletions.push(started.elapsed());
                    });
                });
            }
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
}

/// The APIService's Available condition, every 250 ms.
async fn apiservice(client: Client, shared: Arc<Mutex<Shared>>) {
    loop {
        let (code, body) = send(&client, get(APISERVICE)).await;
        let doc: Value = serde_json::from_str(&body).unwrap_or_default();
        let available = code == 200
            && doc["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Available" && c["status"] == "True");
        record(&shared, |s| match (available, s.unavailable_since) {
            (false, None) => s.unavailable_since = Some(Instant::now()),
            (true, Some(since)) => {
                let stretch = since.elapsed();
                s.tally.unavailable.0 += stretch;
                s.tally.unavailable.1 = s.tally.unavailable.1.max(stretch);
                s.unavailable_since = None;
            }
            _ => {}
        });
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
