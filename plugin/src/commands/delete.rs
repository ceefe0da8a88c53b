//! `kubectl hns delete CHILD -n PARENT [-a]`: deletes a subnamespace.

use std::process::ExitCode;

use serde_json::json;

use crate::client::KubeFlags;
use crate::forest::{self, Scope};
use crate::hns::{self, Hns};
use crate::outln;
use crate::prompt::{self, Unasked};

/// Delete a subnamespace of the namespace given with -n (required: the context's namespace does
/// not count).
///
/// A subnamespace that has subnamespaces of its own is deleted only with
/// --allowCascadingDeletion, which deletes everything below it too: that asks first on a
/// terminal, and without one (scripts) needs --yes (HNC's plugin had no delete command).
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct DeleteArgs {
    /// Name of the subnamespace.
    child: String,
    /// Allow deleting the subnamespace's descendants with it (sets allowCascadingDeletion on it).
    #[arg(short = 'a', long = "allowCascadingDeletion", visible_alias = "allow-cascading-deletion")]
    allow_cascading_deletion: bool,
    /// Do not ask before a cascading deletion (needed for one without a terminal).
    #[arg(short = 'y', long)]
    yes: bool,
}

const EXAMPLES: &str = "\
Examples:
  # Delete subnamespace \"kid\" of \"team\"
  kubectl hns delete kid -n team

  # Delete \"kid\" with the subnamespaces below it (asks first on a terminal)
  kubectl hns delete kid -n team --allow-cascading-deletion

  # The same from a script, without asking
  kubectl hns delete kid -n team --allow-cascading-deletion --yes";

/// Runs `delete`.
pub async fn run(kube: &KubeFlags, args: DeleteArgs) -> anyhow::Result<ExitCode> {
    let parent = kube.parent_arg("kubectl hns delete")?;
    let child = args.child;
    let hns = Hns::new(kube.client().await?);
    // Only ever touch the configuration of an actual subnamespace of the parent.
    if let Err(e) = hns.subnamespace(&parent, &child).await {
        return Err(not_a_subnamespace(&hns, &parent, &child, e).await);
    }
    if args.allow_cascading_deletion {
        let names = [child.clone()];
        let forest = forest::load(&hns, Scope::Subtrees(&names)).await?;
        let below = forest.descendants(&child);
        // HNC's lines. A leaf is not patched (deleting it cascades nowhere), so deleting it needs
        // no right on its hierarchy configuration.
        if !below.is_empty() {
            prompt::confirm(&cascade_question(&child, &below), args.yes, Unasked::NeedsYes)?;
        }
        if forest.get(&child).is_some_and(|n| n.allow_cascading_deletion) {
            outln!("Cascading deletion for '{child}' is already set to 'true'; unchanged")?;
        } else if !below.is_empty() {
            outln!("Allowing cascading deletion on '{child}'")?;
            hns.patch_hierarchy(&child, None, json!({"allowCascadingDeletion": true})).await?;
        }
    }
    hns.delete_subnamespace(&parent, &child).await?;
    // HNC's words, so scripts written for it keep working.
    outln!("Successfully deleted \"{child}\" subnamespace anchor in \"{parent}\" namespace")?;
    Ok(ExitCode::SUCCESS)
}

/// Why `child` could not be found as a subnamespace of `parent` (`e`), in words that say what
/// to do: a full child is not deleted this way, and says how it is.
async fn not_a_subnamespace(hns: &Hns, parent: &str, child: &str, e: hns::Error) -> anyhow::Error {
    if e.code() != Some(404) {
        return e.into();
    }
    match hns.hierarchy(child).await {
        Ok(hc) if hc.spec.parent.as_deref() == Some(parent) => anyhow::anyhow!(
            "\"{child}\" is a full namespace, a child of \"{parent}\" but not a subnamespace of it: kubectl hns delete removes subnamespaces only. To take it out of the hierarchy: kubectl hns set {child} --root; to delete it: kubectl delete namespace {child}"
        ),
        _ => anyhow::anyhow!(
            "{e}: \"{parent}\" has no subnamespace \"{child}\" (its children: kubectl hns tree {parent})"
        ),
    }
}

/// How many names a question lists before summing up the rest.
const NAMED: usize = 10;

fn cascade_question(child: &str, below: &[&str]) -> String {
    let n = below.len();
    let mut names = below.iter().take(NAMED).copied().collect::<Vec<_>>().join(", ");
    if n > NAMED {
        names.push_str(&format!(" and {} more", n - NAMED));
    }
    let noun = if n == 1 { "namespace" } else { "namespaces" };
    format!("Delete \"{child}\" and the {n} {noun} below it ({names}), with everything in them?")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_question_names_what_goes() {
        assert_eq!(
            cascade_question("a", &["b"]),
            "Delete \"a\" and the 1 namespace below it (b), with everything in them?"
        );
        let many: Vec<String> = (0..12).map(|i| format!("n{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(cascade_question("a", &many)
            .contains("12 namespaces below it (n0, n1, n2, n3, n4, n5, n6, n7, n8, n9 and 2 more)"));
    }
}
