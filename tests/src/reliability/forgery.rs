//! Forged hierarchy state, written for real: while every hns replica is down (the outage
//! suite), the webhook for namespaces outside hierarchies fails open, so an admin's annotation
//! `hnc.x-k8s.io/parent: <victim>` on such a namespace goes through unchecked. Once hns is back
//! it must propagate nothing into those namespaces, revert the annotation, and say so.
//! A real child of the victim is the control: it gets the victim's RoleBinding, so a zero below
//! means something.

use std::time::{Duration, Instant};

use hns_api::keys;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use super::Figure;
use crate::{create_namespace, delete_namespaces, role_binding, set_parent, Subject};

const SUITE: &str = "outage";
const INHERITED_FROM: &str = "hnc.x-k8s.io/inherited-from";

/// The namespaces of one forgery trial.
pub struct Forgery {
    victim: String,
    control: String,
    forgers: Vec<String>,
    written: usize,
}

impl Forgery {
    /// The victim with a RoleBinding, its real child, and `n` namespaces outside hierarchies.
    pub async fn prepare(client: &Client, n: usize) -> Forgery {
        let pid = std::process::id();
        let victim = create_namespace(client, &format!("forge{pid}-victim"), &[]).await;
        Api::<RoleBinding>::namespaced(client.clone(), &victim)
            .create(
                &PostParams::default(),
                &role_binding("victim-secrets", "view", Subject::Group("victim-team")),
            )
            .await
            .expect("create the victim's RoleBinding");
        let control = create_namespace(client, &format!("forge{pid}-control"), &[]).await;
        set_parent(client, &control, Some(&victim)).await.expect("set the control's parent");
        let mut forgers = Vec::new();
        for i in 0..n {
            forgers.push(create_namespace(client, &format!("forge{pid}-{i}"), &[]).await);
        }
        Forgery { victim, control, forgers, written: 0 }
    }

    /// Names the victim as every forger's parent; call it while hns is down.
    pub async fn forge(&mut self, client: &Client) {
        let api: Api<Namespace> = Api::all(client.clone());
        let patch = json!({"metadata": {"annotations": {keys::PARENT: self.victim}}});
        for f in &self.forgers {
            match api.patch(f, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(_) => self.written += 1,
                Err(e) => println!("outage: forging {f}'s parent: {e}"),
            }
        }
    }

    /// Once hns serves again: watches the forgers for a while and reports.
    pub async fn judge(self, client: &Client) -> Vec<Figure> {
        let api: Api<Namespace> = Api::all(client.clone());
        let copies = |ns: &str| {
            let rbs: Api<RoleBinding> = Api::namespaced(client.clone(), ns);
            async move {
                rbs.list(&ListParams::default().labels(INHERITED_FROM)).await.map_or(0, |l| l.items.len())
            }
        };
        let mut propagated = std::collections::BTreeSet::new();
        let mut reverted = 0;
        let mut control_copied = false;
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            reverted = 0;
            for f in &self.forgers {
                if copies(f).await > 0 {
                    propagated.insert(f.clone());
                }
                let parent =
                    api.get(f).await.ok().and_then(|n| n.metadata.annotations?.get(keys::PARENT).cloned());
                reverted += usize::from(parent.is_none());
            }
            control_copied |= copies(&self.control).await > 0;
            if reverted == self.forgers.len() && control_copied && start.elapsed() > Duration::from_secs(5) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let mut all: Vec<&str> = self.forgers.iter().map(String::as_str).collect();
        all.extend([self.control.as_str(), self.victim.as_str()]);
        delete_namespaces(client, &all).await;
        let n = self.forgers.len();
        vec![
            Figure::info(SUITE, "parents forged while hns was down", format!("{}/{n}", self.written)),
            Figure::zero(SUITE, "forged-state propagations", propagated.len()),
            Figure::target(SUITE, "forged parents reverted", format!("{reverted}/{n}"), "all", reverted == n),
            Figure::target(
                SUITE,
                "control: a real child got the copy",
                control_copied,
                "true",
                control_copied,
            ),
        ]
    }
}
