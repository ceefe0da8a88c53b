//! `kubectl hns create CHILD -n PARENT`: makes a subnamespace.

use std::process::ExitCode;

use crate::client::KubeFlags;
use crate::hns::Hns;
use crate::outln;

/// Create a subnamespace of the namespace given with -n (required, as in HNC's plugin: the
/// context's namespace does not count).
///
/// The new namespace belongs to its parent: it is deleted with its parent's Subnamespace object
/// (`kubectl hns delete`), and needs only the right to create subnamespaces in the parent.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  # Create subnamespace \"kid\" of \"team\"
  kubectl hns create kid -n team

  # Create it as another user, to check that user's rights
  kubectl hns create kid -n team --as=dev-user")]
pub struct CreateArgs {
    /// Name of the new namespace.
    child: String,
}

/// Runs `create`.
pub async fn run(kube: &KubeFlags, args: CreateArgs) -> anyhow::Result<ExitCode> {
    let parent = kube.parent_arg("kubectl hns create")?;
    Hns::new(kube.client().await?).create_subnamespace(&parent, &args.child).await?;
    // HNC's words, so scripts written for it keep working.
    outln!("Successfully created \"{}\" subnamespace anchor in \"{parent}\" namespace", args.child)?;
    Ok(ExitCode::SUCCESS)
}
