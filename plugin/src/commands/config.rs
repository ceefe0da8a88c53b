//! `kubectl hns config describe | set-resource | delete-type`: which kinds propagate down the
//! hierarchy, and how.

use std::fmt::Write;
use std::process::ExitCode;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::Subcommand;
use hns_api::config::Mode;
use hns_api::{HNCConfiguration, ResourceSpec, ResourceStatus};
use serde::Serialize;

use crate::client::KubeFlags;
use crate::hns::Hns;
use crate::output::{self, ConditionView, DataFormat};
use crate::paint::{Paint, Styles as _};
use crate::prompt::{self, Unasked};
use crate::{out, outln};

/// View or change which kinds propagate down the hierarchy (the cluster's HNCConfiguration).
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  # Show which kinds propagate
  kubectl hns config describe

  # Propagate secrets down the hierarchy
  kubectl hns config set-resource secrets --mode Propagate")]
pub struct ConfigArgs {
    #[command(subcommand)]
    command: ConfigCommand,
}

#[derive(Subcommand, Debug)]
enum ConfigCommand {
    /// Show the kinds hns synchronizes, with their modes and counts.
    #[command(after_help = "\
Examples:
  # Show the configuration
  kubectl hns config describe

  # The same as YAML
  kubectl hns config describe -o yaml")]
    Describe {
        /// Print the configuration as data.
        #[arg(short = 'o', long, value_enum)]
        output: Option<DataFormat>,
    },
    /// Set the propagation mode of a kind.
    ///
    /// Switching straight from Ignore to Propagate may overwrite objects in descendants with
    /// their ancestors' copies, so it needs --force. Remove deletes every propagated copy, so it
    /// asks first on a terminal. Without a terminal (scripts) it goes ahead without asking, as
    /// HNC's plugin did; --yes skips the question.
    #[command(
        name = "set-resource",
        after_help = "\
Examples:
  # Set the mode of a core kind
  kubectl hns config set-resource secrets --mode Ignore

  # Set the mode of a custom kind
  kubectl hns config set-resource crontabs --group stable.example.com --mode Propagate

  # Delete every propagated copy of a kind, without asking
  kubectl hns config set-resource secrets --mode Remove --yes"
    )]
    SetResource {
        /// Plural resource name, e.g. secrets.
        resource: String,
        /// API group of the kind; empty for the core group.
        #[arg(long, default_value = "")]
        group: String,
        /// The mode.
        #[arg(long, ignore_case = true, value_parser = mode_parser())]
        mode: Mode,
        /// Allow switching directly from Ignore to Propagate.
        #[arg(short = 'f', long)]
        force: bool,
        /// Do not ask before removing copies.
        #[arg(short = 'y', long)]
        yes: bool,
    },
    /// Stop configuring a kind: hns stops synchronizing it.
    ///
    /// Copies already made stay where they are but are no longer kept up to date; set the mode
    /// to Remove first to delete them. Deleting a propagated kind asks first on a terminal.
    /// Without a terminal (scripts) it goes ahead without asking, as HNC's plugin did; --yes
    /// skips the question.
    #[command(
        name = "delete-type",
        after_help = "\
Examples:
  # Stop configuring a core kind
  kubectl hns config delete-type --resource secrets

  # Stop configuring a custom kind
  kubectl hns config delete-type --group stable.example.com --resource crontabs"
    )]
    DeleteType {
        /// API group of the kind; empty for the core group.
        #[arg(long, default_value = "")]
        group: String,
        /// Plural resource name, e.g. secrets.
        #[arg(long)]
        resource: String,
        /// Do not ask.
        #[arg(short = 'y', long)]
        yes: bool,
    },
}

/// `--mode`: HNC's modes as clap's possible values (hns-api knows nothing of clap), so `--help`,
/// completion and a wrong value's error list them. Matching ignores case, as it always has.
fn mode_parser() -> impl TypedValueParser<Value = Mode> {
    let values = Mode::ALL.map(|m| PossibleValue::new(m.as_str()).help(mode_help(m)));
    // The parser has already matched the value to one of these names, in any case.
    PossibleValuesParser::new(values).map(|s| {
        Mode::ALL.into_iter().find(|m| m.as_str().eq_ignore_ascii_case(&s)).expect("a possible value")
    })
}

/// What a mode does, for `--help`.
fn mode_help(mode: Mode) -> &'static str {
    match mode {
        Mode::Propagate => "Copy objects to every descendant",
        Mode::Remove => "Delete every copy and make no more",
        Mode::Ignore => "Leave existing copies alone and make none",
        Mode::AllowPropagate => "Copy only objects that ask for it with a selector annotation",
    }
}

/// Runs `config …`.
pub async fn run(kube: &KubeFlags, args: ConfigArgs) -> anyhow::Result<ExitCode> {
    let hns = Hns::new(kube.client().await?);
    let writes = !matches!(args.command, ConfigCommand::Describe { .. });
    let config = match hns.config().await {
        // A change is read first: say that it is the change that needs the rights.
        Err(e) if writes && e.code() == Some(403) => anyhow::bail!(
            "{e}; changing the HNCConfiguration needs the rights to get and update hncconfigurations.hnc.x-k8s.io, cluster-wide (a cluster admin's)"
        ),
        read => read?,
    };
    let rv = config.metadata.resource_version.clone();
    match args.command {
        ConfigCommand::Describe { output: Some(format) } => {
            out!("{}", output::data(&summary(&config), format)?)?
        }
        ConfigCommand::Describe { output: None } => {
            out!("{}", text(&summary(&config), &Paint::for_stream(&std::io::stdout())))?
        }
        ConfigCommand::SetResource { resource, group, mode, force, yes } => {
            let current = configured_mode(&config, &group, &resource).map(str::parse::<Mode>);
            let copies_everything = matches!(mode, Mode::Propagate | Mode::AllowPropagate);
            if current == Some(Ok(Mode::Ignore)) && copies_everything && !force {
                eprintln!("{}", ignore_to_propagate_warning(&resource));
                return Ok(ExitCode::FAILURE);
            }
            if current == Some(Ok(mode)) {
                outln!("{}", set_line(&group, &resource, mode.as_str()))?;
                return Ok(ExitCode::SUCCESS);
            }
            if mode == Mode::Remove {
                let n = copies(&config, &group, &resource);
                if n != Some(0) {
                    let what = type_name(&group, &resource);
                    let question = format!("Set {what} to Remove? hns deletes {}.", its_copies(n));
                    prompt::confirm(&question, yes, Unasked::GoAheadAsHnc)?;
                }
            }
            let mut resources = config.spec.resources;
            match resources.iter_mut().find(|r| r.group == group && r.resource == resource) {
                Some(r) => r.mode = Some(mode.to_string()),
                None => resources.push(ResourceSpec {
                    group: group.clone(),
                    resource: resource.clone(),
                    mode: Some(mode.to_string()),
                }),
            }
            hns.set_config_resources(rv.as_deref(), &resources).await?;
            outln!("{}", set_line(&group, &resource, mode.as_str()))?;
        }
        ConfigCommand::DeleteType { group, resource, yes } => {
            let Some(mode) = configured_mode(&config, &group, &resource) else {
                // HNC's words and outcome: nothing to do is not a failure.
                outln!(
                    "Nothing to delete; No configuration for type with group: {group}, resource: {resource}"
                )?;
                return Ok(ExitCode::SUCCESS);
            };
            if matches!(mode.parse(), Ok(Mode::Propagate | Mode::AllowPropagate)) {
                let n = copies(&config, &group, &resource);
                if n != Some(0) {
                    let question = format!(
                        "Stop synchronizing {}? hns leaves {} in place, no longer kept up to date or cleaned up.",
                        type_name(&group, &resource),
                        its_copies(n)
                    );
                    prompt::confirm(&question, yes, Unasked::GoAheadAsHnc)?;
                }
            }
            let resources: Vec<ResourceSpec> = config
                .spec
                .resources
                .into_iter()
                .filter(|r| !(r.group == group && r.resource == resource))
                .collect();
            hns.set_config_resources(rv.as_deref(), &resources).await?;
            // HNC's words, so scripts written for it keep working.
            outln!("Configuration for type with group: {group}, resource: {resource} is deleted")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The mode the spec gives a kind, if it lists it (no mode means Propagate).
fn configured_mode<'a>(config: &'a HNCConfiguration, group: &str, resource: &str) -> Option<&'a str> {
    config
        .spec
        .resources
        .iter()
        .find(|r| r.group == group && r.resource == resource)
        .map(|r| r.mode.as_deref().filter(|m| !m.is_empty()).unwrap_or(Mode::Propagate.as_str()))
}

/// How many copies hns reports for a kind, if it says.
fn copies(config: &HNCConfiguration, group: &str, resource: &str) -> Option<i32> {
    let status = config.status.as_ref()?;
    status.resources.iter().find(|r| r.group == group && r.resource == resource)?.num_propagated_objects
}

/// "its 3 propagated copies", or "its propagated copies" when the number is unknown.
fn its_copies(copies: Option<i32>) -> String {
    copies.map_or("its propagated copies".to_string(), |n| format!("its {n} propagated copies"))
}

/// `secrets`, or `certificates.stable.example.com`: kubectl's way of naming a kind.
fn type_name(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

fn set_line(group: &str, resource: &str, mode: &str) -> String {
    format!("Configuration for type with group: {group}, resource: {resource} is set to mode {mode}")
}

/// HNC's warning, so the advice reads as HNC users know it.
fn ignore_to_propagate_warning(resource: &str) -> String {
    format!(
        "Switching directly from 'Ignore' to 'Propagate' mode or 'AllowPropagate' mode could cause existing \"{resource}\" objects in child namespaces to be overwritten by objects from ancestor namespaces.\n\
         If you are sure you want to proceed with this operation, use the '--force' flag.\n\
         If you are not sure and would like to see what source objects would be overwritten, please switch to 'Remove' first."
    )
}

/// `config describe` as data.
#[derive(Serialize, Debug, PartialEq)]
pub struct Summary {
    /// Every kind hns synchronizes.
    pub resources: Vec<ResourceStatus>,
    /// Problems with the configuration.
    pub conditions: Vec<ConditionView>,
}

fn summary(config: &HNCConfiguration) -> Summary {
    let status = config.status.clone().unwrap_or_default();
    let mut resources = status.resources;
    resources.sort_by(|a, b| (&a.group, &a.resource).cmp(&(&b.group, &b.resource)));
    Summary { resources, conditions: status.conditions.iter().map(ConditionView::from).collect() }
}

/// HNC's layout: `* Propagating: roles (rbac.authorization.k8s.io/v1)`, with hns's counts.
fn text(s: &Summary, paint: &Paint) -> String {
    let mut out = String::from("Synchronized resources:\n");
    for r in &s.resources {
        let action = match r.mode.parse() {
            Ok(Mode::Propagate) => "Propagating",
            Ok(Mode::Remove) => "Removing",
            Ok(Mode::Ignore) => "Ignoring",
            Ok(Mode::AllowPropagate) => "AllowPropagate",
            Err(_) if r.mode.is_empty() => "Propagating",
            Err(_) => r.mode.as_str(),
        };
        let _ = write!(out, "* {action}: {} ({}/{})", r.resource, r.group, r.version);
        if let (Some(sources), Some(copies)) = (r.num_source_objects, r.num_propagated_objects) {
            let _ = write!(out, "{}", paint.dim(&format!(" — {sources} source objects, {copies} copies")));
        }
        out.push('\n');
    }
    // HNC prints the heading even when there are none.
    out.push_str("\nConditions:\n");
    for c in &s.conditions {
        let _ = writeln!(out, "{}", paint.bad(&format!("{} ({}): {}", c.type_, c.reason, c.message)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hns_api::{HNCConfigurationSpec, HNCConfigurationStatus};

    fn config() -> HNCConfiguration {
        let mut c = HNCConfiguration::new(
            "config",
            HNCConfigurationSpec {
                resources: vec![
                    ResourceSpec { group: String::new(), resource: "secrets".into(), mode: None },
                    ResourceSpec {
                        group: String::new(),
                        resource: "configmaps".into(),
                        mode: Some("Ignore".into()),
                    },
                ],
            },
        );
        let status = |group: &str, resource: &str, mode: &str, n: Option<(i32, i32)>| ResourceStatus {
            group: group.into(),
            version: "v1".into(),
            resource: resource.into(),
            mode: mode.into(),
            num_source_objects: n.map(|n| n.0),
            num_propagated_objects: n.map(|n| n.1),
        };
        c.status = Some(HNCConfigurationStatus {
            resources: vec![
                status("rbac.authorization.k8s.io", "roles", "Propagate", Some((2, 6))),
                status("", "secrets", "Propagate", Some((1, 3))),
                status("", "configmaps", "Ignore", None),
            ],
            conditions: Vec::new(),
        });
        c
    }

    #[test]
    fn golden_describe() {
        assert_eq!(
            text(&summary(&config()), &Paint::new(false)),
            "\
Synchronized resources:
* Ignoring: configmaps (/v1)
* Propagating: secrets (/v1) — 1 source objects, 3 copies
* Propagating: roles (rbac.authorization.k8s.io/v1) — 2 source objects, 6 copies

Conditions:
"
        );
    }

    #[derive(clap::Parser, Debug)]
    struct Wrapper {
        #[command(flatten)]
        args: ConfigArgs,
    }

    fn set_mode(mode: &str) -> Result<Mode, clap::Error> {
        use clap::Parser;
        let w = Wrapper::try_parse_from(["x", "set-resource", "secrets", "--mode", mode])?;
        match w.args.command {
            ConfigCommand::SetResource { mode, .. } => Ok(mode),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn modes_parse_in_any_case_and_a_wrong_one_lists_them() {
        assert_eq!(set_mode("AllowPropagate").unwrap(), Mode::AllowPropagate);
        assert_eq!(set_mode("remove").unwrap(), Mode::Remove);
        let err = set_mode("Often").unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::InvalidValue);
        assert!(
            err.to_string().contains("[possible values: Propagate, Remove, Ignore, AllowPropagate]"),
            "{err}"
        );
    }

    #[test]
    fn modes_and_copies_from_spec_and_status() {
        let c = config();
        assert_eq!(configured_mode(&c, "", "secrets"), Some("Propagate"), "no mode means Propagate");
        assert_eq!(configured_mode(&c, "", "configmaps"), Some("Ignore"));
        assert_eq!(configured_mode(&c, "", "pods"), None);
        assert_eq!(copies(&c, "", "secrets"), Some(3));
        assert_eq!(copies(&c, "", "configmaps"), None, "unknown counts may hide copies");
        assert_eq!(its_copies(Some(3)), "its 3 propagated copies");
        assert_eq!(type_name("stable.example.com", "certificates"), "certificates.stable.example.com");
    }
}
