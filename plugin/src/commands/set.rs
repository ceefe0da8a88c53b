//! `kubectl hns set NS --parent P | --root, -a | -f`: a namespace's place in the hierarchy and
//! whether it allows cascading deletion.

use std::process::ExitCode;

use clap::ArgGroup;
use hns_api::HierarchyConfiguration;
use serde_json::{Map, Value};

use crate::client::KubeFlags;
use crate::hns::{self, Hns};
use crate::outln;

/// Set a namespace's parent, or make it a root, and allow or forbid cascading deletion.
///
/// The change is written only if the namespace's configuration has not changed since it was
/// read; the server refuses cycles, missing parents and moves you have no rights for, and says
/// why.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  # Make \"team\" the parent of \"app\" (also: -n app --parent team)
  kubectl hns set app --parent team

  # Make \"app\" a root namespace again
  kubectl hns set app --root

  # Allow deleting \"team\"'s subnamespaces when it (or its anchor) is deleted
  kubectl hns set team --allow-cascading-deletion")]
#[command(group(ArgGroup::new("place").args(["parent", "root"])))]
#[command(group(ArgGroup::new("cascading").args(["allow_cascading_deletion", "forbid_cascading_deletion"])))]
#[command(group(ArgGroup::new("change").required(true).multiple(true)
    .args(["parent", "root", "allow_cascading_deletion", "forbid_cascading_deletion"])))]
pub struct SetArgs {
    /// The namespace to change (or give it with -n).
    // Not the id `namespace`: that is -n's, which this would hide.
    #[arg(id = "ns", value_name = "NAMESPACE")]
    namespace: Option<String>,
    /// Make P the parent.
    #[arg(short = 'p', long, value_name = "P")]
    parent: Option<String>,
    /// Make the namespace a root (no parent).
    #[arg(short = 'r', long)]
    root: bool,
    /// Allow deleting the namespace's subnamespaces when it (or its subnamespace) is deleted.
    #[arg(short = 'a', long = "allowCascadingDeletion", visible_alias = "allow-cascading-deletion")]
    allow_cascading_deletion: bool,
    /// Forbid cascading deletion.
    #[arg(short = 'f', long = "forbidCascadingDeletion", visible_alias = "forbid-cascading-deletion")]
    forbid_cascading_deletion: bool,
}

/// How many times `set` reads and writes. A hierarchy configuration's resourceVersion is its
/// namespace's, which hns's controller also moves (a parent's finalizer when it gains a
/// subnamespace, tree labels), so a write checked against the version read may meet a conflict
/// that has nothing to do with the hierarchy: then the change is planned again on a fresh read
/// (client-go's RetryOnConflict does the same for its callers).
const ATTEMPTS: usize = 5;

/// Runs `set`.
pub async fn run(kube: &KubeFlags, args: SetArgs) -> anyhow::Result<ExitCode> {
    let ns = kube.namespace_arg(args.namespace.as_deref(), "kubectl hns set")?;
    let hns = Hns::new(kube.client().await?);
    let plan = write_plan(&hns, &ns, &args).await?;
    for line in &plan.unchanged {
        outln!("{line}")?;
    }
    if plan.spec.is_empty() {
        outln!("No changes made")?;
        return Ok(ExitCode::SUCCESS);
    }
    for line in &plan.changes {
        outln!("{line}")?;
    }
    let n = plan.changes.len();
    let noun = if n == 1 { "property" } else { "properties" };
    // HNC's line, spelling and all ("Succesfully"), so scripts that grep it keep working.
    outln!("Succesfully updated {n} {noun} of the hierarchical configuration of {ns}")?;
    Ok(ExitCode::SUCCESS)
}

/// Plans the change on the current configuration and writes it, unless the namespace changed
/// in between; returns the plan that was written (or had nothing to write).
async fn write_plan(hns: &Hns, ns: &str, args: &SetArgs) -> hns::Result<Plan> {
    let mut attempt = 1;
    loop {
        let current = hns.hierarchy(ns).await?;
        let plan = plan(ns, args, &current);
        if plan.spec.is_empty() {
            return Ok(plan);
        }
        let rv = current.metadata.resource_version.as_deref();
        match hns.patch_hierarchy(ns, rv, Value::Object(plan.spec.clone())).await {
            Err(e) if e.code() == Some(409) && attempt < ATTEMPTS => attempt += 1,
            written => return written.map(|_| plan),
        }
    }
}

/// What `set` will change, in HNC's words.
#[derive(Debug, Default, PartialEq)]
struct Plan {
    /// The merge patch of the spec.
    spec: Map<String, Value>,
    /// One line per change.
    changes: Vec<String>,
    /// One line per request that is already so.
    unchanged: Vec<String>,
}

fn plan(ns: &str, args: &SetArgs, current: &HierarchyConfiguration) -> Plan {
    let mut p = Plan::default();
    let old = current.spec.parent.as_deref().filter(|s| !s.is_empty());
    match (&args.parent, args.root, old) {
        (Some(new), _, Some(old)) if new == old => {
            p.unchanged.push(format!("Parent of {ns} is already {old}; unchanged"))
        }
        (Some(new), _, Some(old)) => {
            p.changes.push(format!("Changing the parent of {ns} from {old} to {new}"));
            p.spec.insert("parent".into(), new.as_str().into());
        }
        (Some(new), _, None) => {
            p.changes.push(format!("Setting the parent of {ns} to {new}"));
            p.spec.insert("parent".into(), new.as_str().into());
        }
        (None, true, Some(old)) => {
            p.changes.push(format!("Unsetting the parent of {ns} (was previously {old})"));
            p.spec.insert("parent".into(), Value::Null);
        }
        (None, true, None) => p.unchanged.push(format!("{ns} is already a root namespace; unchanged")),
        (None, false, _) => {}
    }
    let allow = if args.allow_cascading_deletion {
        Some(true)
    } else if args.forbid_cascading_deletion {
        Some(false)
    } else {
        None
    };
    match allow {
        Some(a) if a == current.spec.allow_cascading_deletion => {
            p.unchanged.push(format!("Cascading deletion for '{ns}' is already set to {a}; unchanged"));
        }
        Some(a) => {
            let verb = if a { "Allowing" } else { "Forbidding" };
            p.changes.push(format!("{verb} cascading deletion on '{ns}'"));
            p.spec.insert("allowCascadingDeletion".into(), a.into());
        }
        None => {}
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use hns_api::HierarchyConfigurationSpec;
    use serde_json::json;

    #[derive(Parser, Debug)]
    struct Wrapper {
        #[command(flatten)]
        args: SetArgs,
    }

    fn args(argv: &[&str]) -> SetArgs {
        Wrapper::try_parse_from(std::iter::once("x").chain(argv.iter().copied())).unwrap().args
    }

    fn current(parent: Option<&str>, cascading: bool) -> HierarchyConfiguration {
        HierarchyConfiguration::new(
            "hierarchy",
            HierarchyConfigurationSpec {
                parent: parent.map(str::to_string),
                allow_cascading_deletion: cascading,
                ..Default::default()
            },
        )
    }

    #[test]
    fn flags_need_a_change_and_exclude_their_opposites() {
        for bad in [
            &["ns"][..],
            &["ns", "--parent", "p", "--root"],
            &["ns", "-a", "-f"],
            &["-a", "--forbid-cascading-deletion"],
        ] {
            assert!(
                Wrapper::try_parse_from(std::iter::once("x").chain(bad.iter().copied())).is_err(),
                "{bad:?}"
            );
        }
        let a = args(&["ns", "-p", "p", "-a"]);
        assert_eq!((a.parent.as_deref(), a.allow_cascading_deletion), (Some("p"), true));
        // HNC's camelCase and kubectl's kebab-case; the namespace may come from -n.
        assert!(args(&["--allow-cascading-deletion"]).allow_cascading_deletion);
        assert!(args(&["ns", "--forbid-cascading-deletion"]).forbid_cascading_deletion);
        assert!(args(&["ns", "--forbidCascadingDeletion"]).forbid_cascading_deletion);
    }

    #[test]
    fn plans_in_hnc_words() {
        let p = plan("ns", &args(&["ns", "--parent", "b"]), &current(Some("a"), false));
        assert_eq!(p.changes, ["Changing the parent of ns from a to b"]);
        assert_eq!(Value::Object(p.spec), json!({"parent": "b"}));

        let p = plan("ns", &args(&["ns", "-p", "b", "-a"]), &current(None, false));
        assert_eq!(p.changes, ["Setting the parent of ns to b", "Allowing cascading deletion on 'ns'"]);
        assert_eq!(Value::Object(p.spec), json!({"parent": "b", "allowCascadingDeletion": true}));

        let p = plan("ns", &args(&["ns", "--root", "-f"]), &current(Some("a"), true));
        assert_eq!(
            p.changes,
            ["Unsetting the parent of ns (was previously a)", "Forbidding cascading deletion on 'ns'"]
        );
        assert_eq!(Value::Object(p.spec), json!({"parent": null, "allowCascadingDeletion": false}));
    }

    #[test]
    fn what_is_already_so_is_not_written() {
        let p = plan("ns", &args(&["ns", "-r", "-f"]), &current(None, false));
        assert!(p.spec.is_empty() && p.changes.is_empty());
        assert_eq!(
            p.unchanged,
            [
                "ns is already a root namespace; unchanged",
                "Cascading deletion for 'ns' is already set to false; unchanged"
            ]
        );
        let p = plan("ns", &args(&["ns", "-p", "a"]), &current(Some("a"), false));
        assert_eq!(p.unchanged, ["Parent of ns is already a; unchanged"]);
    }
}
