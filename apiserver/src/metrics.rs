//! Prometheus metrics (text format), served on their own plain-HTTP port like HNC's
//! `--metrics-addr`: counts only, nothing a scrape could learn about objects.
//!
//! Counters are bumped where things happen; gauges that describe the hierarchy (namespaces per
//! condition, propagated objects per kind) are computed from the forest and the syncers at
//! scrape time, so they can never drift from what hns actually holds.

use std::sync::Arc;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::auth::certs::ServingCert;
use crate::hierarchy::conditions;
use crate::hierarchy::policy::Policy;
use crate::propagation::Propagation;
use crate::store::cache::Cache;
use crate::store::quota_ledgers::LedgerStore;

/// Labels of per-kind series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// The object kind, e.g. `RoleBinding`.
    pub kind: String,
}

/// Labels of per-kind write series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// The object kind.
    pub kind: String,
    /// `create`, `update` or `delete`.
    pub action: String,
}

/// The `action`s of propagation's writes that can fail.
pub const WRITE_ACTIONS: [&str; 3] = ["create", "update", "delete"];

/// Labels of the condition gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConditionLabels {
    /// Condition type.
    pub condition: String,
    /// Condition reason.
    pub reason: String,
}

/// Counters updated as hns works.
#[derive(Default)]
pub struct Metrics {
    /// Namespace reconciles by the controller.
    pub reconciles: Counter,
    /// Reconciles that failed and were retried.
    pub reconcile_errors: Counter,
    /// Writes to Namespace objects by the controller.
    pub namespace_writes: Counter,
    /// Writes of propagated objects.
    pub object_writes: Family<WriteLabels, Counter>,
    /// Writes of propagated objects that failed (and are retried), but for write races.
    pub object_write_errors: Family<WriteLabels, Counter>,
    /// 1 while this replica holds the controller Lease.
    pub leader: Gauge,
    /// Namespaces whose forged hierarchy state the controller wrote back.
    pub forgeries_reverted: Counter,
}

/// What a scrape reads besides the counters.
pub struct Sources {
    /// The forest.
    pub cache: Arc<Cache>,
    /// The administrator's settings.
    pub policy: Policy,
    /// The propagated kinds.
    pub propagation: Arc<Propagation>,
    /// The counters.
    pub metrics: Arc<Metrics>,
    /// The serving certificate.
    pub serving: Arc<ServingCert>,
    /// The hierarchical quotas' ledgers.
    pub ledgers: Arc<LedgerStore>,
}

impl Sources {
    /// The text exposition of every metric, as of now.
    pub fn render(&self) -> String {
        let mut registry = Registry::with_prefix("hns");
        let m = &self.metrics;
        let counters = [
            ("reconciles", "Namespace reconciles by the controller", &m.reconciles),
            (
                "reconcile_errors",
                "Reconciles that failed and were retried (not write races, not copies: see object_write_errors)",
                &m.reconcile_errors,
            ),
            ("namespace_writes", "Writes to Namespace objects by the controller", &m.namespace_writes),
            (
                "forgeries_reverted",
                "Namespaces whose hierarchy annotations, written past hns's webhooks, the controller reverted",
                &m.forgeries_reverted,
            ),
        ];
        for (name, help, counter) in counters {
            registry.register(name, help, counter.clone());
        }
        registry.register("object_writes", "Writes of propagated objects", m.object_writes.clone());
        registry.register(
            "object_write_errors",
            "Writes of propagated objects that failed and are retried (quota, webhook, permission; not write races)",
            m.object_write_errors.clone(),
        );
        registry.register(
            "watch_lag_seconds",
            "Wait for the namespace watch to bring a namespace version hns already knew of (e.g. its own write)",
            self.cache.watch_lag.clone(),
        );
        registry.register("leader", "1 while this replica leads", m.leader.clone());

        let (namespace_count, by_condition) = self.namespace_conditions();
        let gauges = [
            (
                "serving_certificate_expiry_timestamp_seconds",
                "When the serving certificate expires, in seconds since the Unix epoch (0: none served yet)",
                self.serving.not_after(),
            ),
            ("namespaces", "Namespaces in the forest", namespace_count),
            ("watches", "Watches open", self.cache.hub.watches() as i64),
            (
                "quota_namespaces_unknown_usage",
                "Namespaces under a hierarchical quota whose usage the quota ledger does not know yet (usage increases there are refused until it does)",
                self.ledgers.unknown_usage() as i64,
            ),
        ];
        for (name, help, value) in gauges {
            let gauge: Gauge = Gauge::default();
            gauge.set(value);
            registry.register(name, help, gauge);
        }
        registry.register("namespace_conditions", "Namespaces with each condition", by_condition);

        let sources: Family<KindLabels, Gauge> = Family::default();
        let copies: Family<KindLabels, Gauge> = Family::default();
        for s in self.propagation.syncers() {
            let (n_sources, n_copies) = s.counts();
            // Zeros for every propagated kind and action, so `rate()` in an alert or a
            // dashboard has a series before the first failure.
            for action in WRITE_ACTIONS {
                let _ = m
                    .object_write_errors
                    .get_or_create(&WriteLabels { kind: s.resource.kind.clone(), action: action.into() });
            }
            let kind = KindLabels { kind: s.resource.kind.clone() };
            sources.get_or_create(&kind).set(n_sources as i64);
            copies.get_or_create(&kind).set(n_copies as i64);
        }
        registry.register("source_objects", "Objects of propagated kinds that are sources", sources);
        registry.register("propagated_objects", "Copies made by propagation", copies);

        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut out, &registry);
        out
    }

    /// How many namespaces the forest holds, and how many have each condition: zeros for every
    /// pair, as HNC gives, so that dashboards see the series before trouble.
    fn namespace_conditions(&self) -> (i64, Family<ConditionLabels, Gauge>) {
        let by_condition: Family<ConditionLabels, Gauge> = Family::default();
        let forest = self.cache.read();
        let label = |condition: &str, reason: &str| ConditionLabels {
            condition: condition.to_string(),
            reason: reason.to_string(),
        };
        for (condition, reason) in conditions::ALL {
            let _ = by_condition.get_or_create(&label(condition, reason));
        }
        for node in forest.iter() {
            for c in conditions::conditions(&forest, &self.policy, node.name()) {
                by_condition.get_or_create(&label(c.type_, c.reason)).inc();
            }
        }
        (forest.len() as i64, by_condition)
    }
}

/// The Content-Type of Prometheus' text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `GET /metrics` on the secure port, behind its authentication and authorization (a scraper
/// needs `get` on the non-resource URL `/metrics`, e.g. from the ClusterRole `hns-metrics-reader`).
pub async fn secure(sources: actix_web::web::Data<Arc<Sources>>) -> actix_web::HttpResponse {
    actix_web::HttpResponse::Ok().content_type(CONTENT_TYPE).body(sources.render())
}

/// Serves `GET /metrics` over plain HTTP on `addr` until shutdown, with no authentication: for
/// local debugging only (`--metrics-bind-address`); the secure port serves `/metrics` to
/// authorized scrapers.
pub async fn serve(addr: std::net::SocketAddr, sources: Arc<Sources>) -> std::io::Result<()> {
    use actix_web::{web, App, HttpResponse, HttpServer};
    let server = HttpServer::new(move || {
        let sources = sources.clone();
        App::new().route(
            "/metrics",
            web::get().to(move || {
                let body = sources.render();
                async move { HttpResponse::Ok().content_type(CONTENT_TYPE).body(body) }
            }),
        )
    })
    .workers(1)
    .disable_signals()
    .bind(addr)?;
    tracing::info!(%addr, "serving metrics");
    server.run().await
}
