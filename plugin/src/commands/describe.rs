//! `kubectl hns describe NS [-o json|yaml]`: a namespace's parent, children, cascading
//! deletion, conditions and recent hns events.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write;
use std::process::ExitCode;

use futures::StreamExt;
use hns_api::duration::human_duration;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::client::KubeFlags;
use crate::hns::{self, Hns};
use crate::out;
use crate::output::{self, ConditionView, DataFormat};
use crate::paint::{Paint, Styles as _};

/// Describe a namespace's place in the hierarchy.
///
/// Shows its parent, its children (subnamespaces marked), whether deleting it may delete its
/// subnamespaces (set on it or on an ancestor), its conditions, and recent events hns reported
/// about objects in it.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  # Describe namespace \"team\" (also: -n team)
  kubectl hns describe team

  # The same as JSON, for scripts
  kubectl hns describe team -o json")]
pub struct DescribeArgs {
    /// The namespace to describe (or give it with -n).
    // Not the id `namespace`: that is -n's, which this would hide.
    #[arg(id = "ns", value_name = "NAMESPACE")]
    namespace: Option<String>,
    /// Print the description as data.
    #[arg(short = 'o', long, value_enum)]
    output: Option<DataFormat>,
}

/// Runs `describe`.
pub async fn run(kube: &KubeFlags, args: DescribeArgs) -> anyhow::Result<ExitCode> {
    let namespace = kube.namespace_arg(args.namespace.as_deref(), "kubectl hns describe")?;
    let hns = Hns::new(kube.client().await?);
    let d = read(&hns, &namespace).await?;
    match args.output {
        Some(format) => out!("{}", output::data(&d, format)?)?,
        None => out!("{}", text(&d, &Paint::for_stream(&std::io::stdout()), Timestamp::now()))?,
    }
    Ok(ExitCode::SUCCESS)
}

/// What `describe` shows.
#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Description {
    /// The namespace.
    pub namespace: String,
    /// When its deletion was requested, if it is terminating.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminating_since: Option<Time>,
    /// Its parent.
    pub parent: Option<String>,
    /// Its children.
    pub children: Vec<Child>,
    /// Its own `allowCascadingDeletion`.
    pub allow_cascading_deletion: bool,
    /// The nearest ancestor allowing cascading deletion, when the namespace itself does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cascading_deletion_allowed_by: Option<String>,
    /// Its conditions.
    pub conditions: Vec<ConditionView>,
    /// Recent events hns reported about objects in it.
    pub events: Vec<EventView>,
    /// Which events could not be read, and why (the others are shown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events_error: Option<String>,
    /// Whether the events in the namespace were read (so that none means none).
    #[serde(skip)]
    pub events_inside_read: bool,
}

/// A child namespace.
#[derive(Serialize, Debug, PartialEq)]
pub struct Child {
    /// Its name.
    pub name: String,
    /// Whether it is a subnamespace.
    pub subnamespace: bool,
    /// Whether it is being deleted.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub terminating: bool,
}

/// An event.
#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    /// When it last happened.
    pub last_seen: Option<Time>,
    /// E.g. `CannotPropagateObject`.
    pub reason: String,
    /// `Kind:namespace/name`, as HNC shows it.
    pub object: String,
    /// What happened.
    pub message: String,
}

impl From<&Event> for EventView {
    fn from(e: &Event) -> Self {
        let last_seen = e
            .last_timestamp
            .clone()
            .or_else(|| e.event_time.as_ref().map(|t| Time(t.0)))
            .or_else(|| e.metadata.creation_timestamp.clone());
        let o = &e.involved_object;
        EventView {
            last_seen,
            reason: e.reason.clone().unwrap_or_default(),
            object: format!(
                "{}:{}/{}",
                o.kind.as_deref().unwrap_or_default(),
                o.namespace.as_deref().unwrap_or_default(),
                o.name.as_deref().unwrap_or_default()
            ),
            message: e.message.clone().unwrap_or_default(),
        }
    }
}

/// Reads the description of `ns`.
pub async fn read(hns: &Hns, ns: &str) -> hns::Result<Description> {
    let hc = hns.hierarchy(ns).await?;
    let status = hc.status.unwrap_or_default();
    let subnamespaces: BTreeMap<String, bool> = if status.children.is_empty() {
        BTreeMap::new()
    } else {
        hns.subnamespaces(ns)
            .await?
            .into_iter()
            .filter_map(|s| Some((s.metadata.name?, s.metadata.deletion_timestamp.is_some())))
            .collect()
    };
    // A full child's deletion shows only on its own configuration: a few reads at a time.
    let mut children: Vec<Child> = futures::stream::iter(&status.children)
        .map(|c| async {
            let terminating = match subnamespaces.get(c) {
                Some(terminating) => *terminating,
                None => is_terminating(hns, c).await,
            };
            Child { name: c.clone(), subnamespace: subnamespaces.contains_key(c), terminating }
        })
        .buffered(8)
        .collect()
        .await;
    children.sort_by(|a, b| a.name.cmp(&b.name));
    let parent = hc.spec.parent.filter(|p| !p.is_empty());
    let allowed_by = match (&parent, hc.spec.allow_cascading_deletion) {
        (Some(p), false) => ancestor_allowing_cascade(hns, ns, p).await,
        _ => None,
    };
    let read = hns.events(ns, hns_api::EVENT_COMPONENT).await;
    let mut events: Vec<EventView> = read.events.iter().map(EventView::from).collect();
    let events_error = (!read.unreadable.is_empty()).then(|| read.unreadable.join("; "));
    let events_inside_read = !read.inside_unread;
    events.sort_by(|a: &EventView, b| b.last_seen.cmp(&a.last_seen));
    Ok(Description {
        namespace: ns.to_string(),
        terminating_since: hc.metadata.deletion_timestamp,
        parent,
        children,
        allow_cascading_deletion: hc.spec.allow_cascading_deletion,
        cascading_deletion_allowed_by: allowed_by,
        conditions: status.problems().map(ConditionView::from).collect(),
        events,
        events_error,
        events_inside_read,
    })
}

/// Whether namespace `ns` is being deleted, as far as the user may read it.
async fn is_terminating(hns: &Hns, ns: &str) -> bool {
    hns.hierarchy(ns).await.is_ok_and(|hc| hc.metadata.deletion_timestamp.is_some())
}

/// The nearest ancestor of `ns` (starting at `parent`) that allows cascading deletion, as far
/// as the user may read; hns lets any of them allow it for the whole subtree.
async fn ancestor_allowing_cascade(hns: &Hns, ns: &str, parent: &str) -> Option<String> {
    let mut seen = HashSet::from([ns.to_string()]);
    let mut next = Some(parent.to_string());
    while let Some(current) = next.take() {
        if !seen.insert(current.clone()) {
            return None;
        }
        let hc = hns.hierarchy(&current).await.ok()?;
        if hc.spec.allow_cascading_deletion {
            return Some(current);
        }
        next = hc.spec.parent;
    }
    None
}

/// The description as text, HNC's layout; event ages are relative to `now`.
pub fn text(d: &Description, paint: &Paint, now: Timestamp) -> String {
    let mut out = String::new();
    let _ =
        writeln!(out, "{}", paint.head(&format!("Hierarchy configuration for namespace {}", d.namespace)));
    if let Some(since) = &d.terminating_since {
        let age = human_duration(now.duration_since(since.0).as_secs().max(0));
        let hint = format!("if it stays, run: kubectl hns diagnose {}", d.namespace);
        let _ = writeln!(out, "  {} for {age}; {hint}", paint.warn("Terminating"));
    }
    match &d.parent {
        Some(p) => {
            let _ = writeln!(out, "  Parent: {p}");
        }
        None => out.push_str("  No parent\n"),
    }
    if d.children.is_empty() {
        out.push_str("  No children\n");
    } else {
        out.push_str("  Children:\n");
        for c in &d.children {
            let mark = match (c.subnamespace, c.terminating) {
                (true, true) => " (subnamespace, terminating)",
                (true, false) => " (subnamespace)",
                (false, true) => " (terminating)",
                (false, false) => "",
            };
            let _ = writeln!(out, "  - {}{mark}", c.name);
        }
    }
    // HNC's line shows the namespace's own setting; an ancestor's, which hns also honours, gets
    // a line of its own so the first keeps HNC's meaning for scripts.
    let _ = writeln!(out, "  Allows Cascading Deletion: {}", d.allow_cascading_deletion);
    if let (Some(a), false) = (&d.cascading_deletion_allowed_by, d.allow_cascading_deletion) {
        let _ = writeln!(out, "  Cascading deletion allowed by ancestor: {a}");
    }
    if d.conditions.is_empty() {
        out.push_str("  No conditions\n");
    } else {
        out.push_str("  Conditions:\n");
        for c in &d.conditions {
            let _ = writeln!(out, "  - {}", paint.bad(&format!("{} ({}): {}", c.type_, c.reason, c.message)));
        }
    }
    out.push('\n');
    if d.events.is_empty() && !d.events_inside_read {
        // Nothing read: say nothing of "no events", which would not be known.
    } else if d.events.is_empty() {
        out.push_str("No recent HNC events for objects in this namespace\n");
    } else {
        let _ = writeln!(out, "Events from the objects in namespace {}", d.namespace);
        let mut rows =
            vec![vec!["Last Seen".to_string(), "Reason".into(), "Object".into(), "Message".into()]];
        // HNC shows each reason once per object: the latest.
        let mut shown = HashSet::new();
        for e in d.events.iter().filter(|e| shown.insert((&e.reason, &e.object))) {
            let seen = e
                .last_seen
                .as_ref()
                .map_or("<unknown>".to_string(), |t| human_duration(now.duration_since(t.0).as_secs()));
            rows.push(vec![seen, e.reason.clone(), e.object.clone(), e.message.trim().to_string()]);
        }
        out.push_str(&output::columns(&rows));
    }
    if let Some(e) = &d.events_error {
        let _ = writeln!(out, "{} {e}", paint.warn("Events not shown:"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forest::tests::sample;

    fn at(seconds: i64) -> Option<Time> {
        Some(Time(Timestamp::from_second(seconds).unwrap()))
    }

    /// The description of `ns` in the sample forest, as `read` would make it.
    fn of(ns: &str) -> Description {
        let f = sample();
        let n = f.get(ns).unwrap();
        Description {
            namespace: ns.into(),
            terminating_since: None,
            parent: n.parent.clone(),
            children: f
                .children(n)
                .map(|(name, c)| Child {
                    name: name.into(),
                    subnamespace: c.is_some_and(|c| c.subnamespace),
                    terminating: c.is_some_and(|c| c.terminating),
                })
                .collect(),
            allow_cascading_deletion: n.allow_cascading_deletion,
            cascading_deletion_allowed_by: None,
            conditions: n.conditions.iter().map(ConditionView::from).collect(),
            events: Vec::new(),
            events_error: None,
            events_inside_read: true,
        }
    }

    const NOW: i64 = 1_000_000;

    fn render(d: &Description) -> String {
        text(d, &Paint::new(false), Timestamp::from_second(NOW).unwrap())
    }

    #[test]
    fn golden_root_with_children() {
        assert_eq!(
            render(&of("acme-org")),
            "\
Hierarchy configuration for namespace acme-org
  No parent
  Children:
  - team-a
  - team-b (subnamespace)
  Allows Cascading Deletion: false
  No conditions

No recent HNC events for objects in this namespace
"
        );
    }

    #[test]
    fn golden_cycle_member_with_events() {
        let mut d = of("cyc-b");
        d.cascading_deletion_allowed_by = Some("cyc-a".into());
        d.events = vec![
            EventView {
                last_seen: at(NOW - 300),
                reason: "CannotPropagateObject".into(),
                object: "Role:cyc-b/admin".into(),
                message: "Objects with finalizers cannot be propagated\n".into(),
            },
            EventView {
                last_seen: at(NOW - 400),
                reason: "CannotPropagateObject".into(),
                object: "Role:cyc-b/admin".into(),
                message: "an older one, not shown".into(),
            },
            EventView {
                last_seen: None,
                reason: "CannotUpdateObject".into(),
                object: "Secret:cyc-b/s".into(),
                message: "m".into(),
            },
        ];
        assert_eq!(
            render(&d),
            "\
Hierarchy configuration for namespace cyc-b
  Parent: cyc-a
  Children:
  - cyc-a
  - cyc-b-kid (subnamespace)
  Allows Cascading Deletion: false
  Cascading deletion allowed by ancestor: cyc-a
  Conditions:
  - ActivitiesHalted (InCycle): Namespace is a member of the cycle: cyc-a <- cyc-b <- cyc-a

Events from the objects in namespace cyc-b
Last Seen  Reason                 Object            Message
5m         CannotPropagateObject  Role:cyc-b/admin  Objects with finalizers cannot be propagated
<unknown>  CannotUpdateObject     Secret:cyc-b/s    m
"
        );
    }

    #[test]
    fn golden_orphan_without_event_rights() {
        let mut d = of("orphan");
        d.events_error = Some("the events about namespace orphan itself, which Kubernetes keeps in namespace default (events is forbidden: User \"bob\" cannot list resource \"events\")".into());
        assert_eq!(
            render(&d),
            "\
Hierarchy configuration for namespace orphan
  Parent: gone
  No children
  Allows Cascading Deletion: false
  Conditions:
  - ActivitiesHalted (ParentMissing): Parent \"gone\" does not exist

No recent HNC events for objects in this namespace
Events not shown: the events about namespace orphan itself, which Kubernetes keeps in namespace default (events is forbidden: User \"bob\" cannot list resource \"events\")
"
        );
    }

    #[test]
    fn no_events_is_said_only_of_events_read() {
        let mut d = of("orphan");
        d.events_inside_read = false;
        d.events_error = Some("the events in namespace orphan (forbidden)".into());
        let text = render(&d);
        assert!(!text.contains("No recent"), "{text}");
        assert!(text.ends_with("\nEvents not shown: the events in namespace orphan (forbidden)\n"), "{text}");
    }

    #[test]
    fn golden_terminating_namespace_with_a_terminating_child() {
        let mut d = of("acme-org");
        d.children[1].terminating = true;
        d.terminating_since = at(NOW - 90);
        assert_eq!(
            render(&d),
            "\
Hierarchy configuration for namespace acme-org
  Terminating for 90s; if it stays, run: kubectl hns diagnose acme-org
  No parent
  Children:
  - team-a
  - team-b (subnamespace, terminating)
  Allows Cascading Deletion: false
  No conditions

No recent HNC events for objects in this namespace
"
        );
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(v["children"][1]["terminating"], true);
        assert!(v["children"][0].get("terminating").is_none(), "only where true");
        assert!(v["terminatingSince"].is_string());
    }

    #[test]
    fn data_has_every_field() {
        let v = serde_json::to_value(of("orphan")).unwrap();
        assert_eq!(v["parent"], "gone");
        assert_eq!(v["allowCascadingDeletion"], false);
        assert_eq!(v["conditions"][0]["reason"], "ParentMissing");
        assert_eq!(v["events"], serde_json::json!([]));
        assert!(v.get("eventsError").is_none());
    }

    #[test]
    fn events_read_from_the_core_api() {
        let e: Event = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "e", "namespace": "ns"},
            "involvedObject": {"kind": "Role", "name": "admin", "namespace": "ns"},
            "reason": "CannotPropagateObject", "message": "m",
            "reportingComponent": "hns.hnc.x-k8s.io",
            "lastTimestamp": "1970-01-12T13:46:40Z"
        }))
        .unwrap();
        let v = EventView::from(&e);
        assert_eq!(v.object, "Role:ns/admin");
        assert_eq!(v.last_seen, at(NOW));
    }
}
