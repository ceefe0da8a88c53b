//! `kubectl hns get KIND -n ROOT [--subtree=false] [-l SELECTOR] [-o wide|json|yaml|name]`: the
//! objects of any kind in a namespace and all its descendants, as `kubectl get -A` prints them;
//! `get namespaces -n ROOT`: the subtree's namespaces.

use std::process::ExitCode;

use anyhow::{anyhow, bail};
use clap::ValueEnum;
use kube::api::{GetParams, ListParams};
use kube::Client;
use serde_json::Value;

use crate::client::KubeFlags;
use crate::fanout::{self, Answers};
use crate::forest;
use crate::hns::{self, Hns};
use crate::kinds::{self, Kind};
use crate::output::{self, DataFormat};
use crate::stdout;
use crate::table::{self, Table};
use crate::{out, outln};

/// How many forbidden namespaces the warning names before it counts the rest.
const NAMED_FORBIDDEN: usize = 10;

/// List objects of any kind in a namespace and all its descendants.
///
/// KIND is what kubectl get takes: plural, singular or short name, Kind, or resource.group
/// (pods, pod, po, Pod, deployments.apps). Each namespace of the subtree is read with your own
/// rights, one request per namespace, many at once. Namespaces you may not read are named in
/// one warning on stderr; the others are listed, and the command succeeds, as long as you may
/// read at least one (else it fails with the server's refusal). Namespaces are listed in the
/// subtree's order: ROOT, then each child's subtree in turn, by name.
///
/// `get namespaces -n ROOT` lists the subtree's namespaces themselves (one GET each, so -l does
/// not apply; select by the tree labels instead: kubectl get ns -l ROOT.tree.hnc.x-k8s.io/depth).
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  # The pods of \"team-a\" and every namespace below it
  kubectl hns get pods -n team-a

  # Only those labelled app=web, with the wide columns
  kubectl hns get pods -n team-a -l app=web -o wide

  # Deployments of team-a alone, as JSON
  kubectl hns get deployments.apps -n team-a --subtree=false -o json

  # The namespaces of team-a's subtree
  kubectl hns get ns -n team-a

  # What user \"dev-user\" may see of them
  kubectl hns get pods -n team-a --as=dev-user")]
pub struct GetArgs {
    /// The kind to list, as kubectl get takes it (pods, po, deployments.apps, ns…).
    #[arg(value_name = "KIND")]
    resource: String,
    /// List the whole subtree of the namespace (-n); --subtree=false lists the namespace alone.
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    subtree: bool,
    /// Only objects with these labels, as kubectl's -l takes them (app=web,tier!=db).
    #[arg(short = 'l', long)]
    selector: Option<String>,
    /// Print the objects as JSON, YAML, their names, or a table with every column.
    #[arg(short = 'o', long, value_enum)]
    output: Option<GetFormat>,
}

/// The output formats of `get`, as kubectl get names them.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum GetFormat {
    /// The table with every column the server offers.
    Wide,
    /// A List, as JSON.
    Json,
    /// A List, as YAML.
    Yaml,
    /// kind/name, one a line.
    Name,
}

impl GetFormat {
    /// The data format it prints objects in; `None` for names (and for the table).
    fn data(self) -> Option<DataFormat> {
        match self {
            GetFormat::Json => Some(DataFormat::Json),
            GetFormat::Yaml => Some(DataFormat::Yaml),
            GetFormat::Name | GetFormat::Wide => None,
        }
    }
}

/// Runs `get`.
pub async fn run(kube: &KubeFlags, args: GetArgs) -> anyhow::Result<ExitCode> {
    let connection = kube.connect().await?;
    let root = kube.namespace.clone().unwrap_or(connection.namespace);
    let client = connection.client;
    let hns = Hns::new(client.clone());
    let roots = [root.clone()];
    // Both at once; the kind is checked first, as kubectl checks it before anything else.
    let (groups, forest) = tokio::join!(kinds::discover(&client), forest::walk(&hns, &roots));
    let kind = kinds::resolve(&groups?, &args.resource)?;
    let namespaces: Vec<String> = match (args.subtree, forest) {
        (true, Ok(forest)) => forest.subtree(&root).into_iter().map(str::to_string).collect(),
        (false, _) => vec![root.clone()],
        // Without the right to read ROOT's place in the hierarchy, its subtree is unknown:
        // ROOT alone is listed, so that a refusal is about the kind asked for, as kubectl's.
        (true, Err(e)) if e.code() == Some(403) => {
            eprintln!("Warning: listing {root} alone: its subtree cannot be read ({e})");
            vec![root.clone()]
        }
        (true, Err(e)) => return Err(e.into()),
    };
    let place = Place { root: &root, subtree: args.subtree, total: namespaces.len() };
    if kind.is_namespaces() {
        if args.selector.is_some() {
            bail!("-l does not apply to namespaces here (each is read by name); select the subtree's namespaces by label with: kubectl get ns -l {root}.tree.hnc.x-k8s.io/depth,SELECTOR");
        }
        return list_namespaces(&client, namespaces, args.output, &place).await;
    }
    if !kind.namespaced {
        bail!(
            "{} are not namespaced, so no namespace's subtree holds any: list them with kubectl get {}",
            kind.resource(),
            kind.resource()
        );
    }
    list_objects(&client, &kind, namespaces, &args, &place).await
}

/// Where the command looked: ROOT, its subtree or not, and how many namespaces that was.
struct Place<'a> {
    root: &'a str,
    subtree: bool,
    total: usize,
}

impl Place<'_> {
    /// `team-a's subtree`, or `team-a namespace` (kubectl's words for one namespace).
    fn name(&self) -> String {
        match self.subtree {
            true => format!("{}'s subtree", self.root),
            false => format!("{} namespace", self.root),
        }
    }
}

/// Lists the objects of `kind` in each namespace and prints them.
async fn list_objects(
    client: &Client,
    kind: &Kind,
    namespaces: Vec<String>,
    args: &GetArgs,
    place: &Place<'_>,
) -> anyhow::Result<ExitCode> {
    let mut params = ListParams::default();
    if let Some(selector) = &args.selector {
        params = params.labels(selector);
    }
    let requests = |as_table: bool| -> anyhow::Result<Vec<(String, http::Request<Vec<u8>>)>> {
        namespaces
            .iter()
            .map(|ns| {
                Ok((
                    ns.clone(),
                    shaped(kube::core::Request::new(kind.collection(ns)).list(&params)?, as_table)?,
                ))
            })
            .collect()
    };
    let action = format!("list {} in", kind.resource());
    match args.output {
        None | Some(GetFormat::Wide) => {
            let answers: Answers<Table> = send(client, requests(true)?).await?;
            forbidden(&answers, &action, place)?;
            print_tables(&answers.found, true, args.output == Some(GetFormat::Wide), place)?;
        }
        Some(format) => {
            let answers: Answers<Value> = send(client, requests(false)?).await?;
            forbidden(&answers, &action, place)?;
            let items: Vec<Value> =
                answers.found.into_iter().flat_map(|(_, list)| typed_items(list, kind)).collect();
            print_objects(items, format.data(), &kind.name_prefix(), place)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Reads each namespace itself (a user may read namespaces they may not list) and prints them.
async fn list_namespaces(
    client: &Client,
    namespaces: Vec<String>,
    format: Option<GetFormat>,
    place: &Place<'_>,
) -> anyhow::Result<ExitCode> {
    let requests = |as_table: bool| -> anyhow::Result<Vec<(String, http::Request<Vec<u8>>)>> {
        namespaces
            .iter()
            .map(|ns| {
                let get = kube::core::Request::new("/api/v1/namespaces").get(ns, &GetParams::default())?;
                Ok((ns.clone(), shaped(get, as_table)?))
            })
            .collect()
    };
    match format {
        None | Some(GetFormat::Wide) => {
            let answers: Answers<Table> = send(client, requests(true)?).await?;
            forbidden(&answers, "get", place)?;
            print_tables(&answers.found, false, format == Some(GetFormat::Wide), place)?;
        }
        Some(format) => {
            let answers: Answers<Value> = send(client, requests(false)?).await?;
            forbidden(&answers, "get", place)?;
            let items = answers.found.into_iter().map(|(_, ns)| ns).collect();
            print_objects(items, format.data(), "namespace", place)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `request` asking for a Table, or for plain JSON.
fn shaped(mut request: http::Request<Vec<u8>>, as_table: bool) -> anyhow::Result<http::Request<Vec<u8>>> {
    if as_table {
        return Ok(table::request(request)?);
    }
    request.headers_mut().insert(http::header::ACCEPT, http::HeaderValue::from_static("application/json"));
    Ok(request)
}

/// The requests' answers; a failure other than 403 or 404 is the command's error, in the
/// server's words.
async fn send<T: serde::de::DeserializeOwned>(
    client: &Client,
    requests: Vec<(String, http::Request<Vec<u8>>)>,
) -> anyhow::Result<Answers<T>> {
    fanout::send(client, requests).await.map_err(|e| anyhow!(hns::message(&e)))
}

/// Warns of the namespaces the user may not read, in one line; when that is every namespace,
/// fails with the server's refusal instead, as kubectl would for one namespace.
fn forbidden<T>(answers: &Answers<T>, action: &str, place: &Place<'_>) -> anyhow::Result<()> {
    let Some((_, refusal)) = answers.forbidden.first() else { return Ok(()) };
    if answers.found.is_empty() {
        match place.total {
            1 => bail!("{refusal}"),
            _ => bail!("{refusal} (nor in any other namespace of {})", place.name()),
        }
    }
    let names: Vec<&str> = answers.forbidden.iter().map(|(ns, _)| ns.as_str()).collect();
    eprintln!("Warning: {}", forbidden_line(action, &names, place.total, place.root));
    Ok(())
}

/// `cannot list pods in 3 of 100 namespaces of team-a's subtree (forbidden): a, b, c`, naming at
/// most [`NAMED_FORBIDDEN`] namespaces and counting the rest.
fn forbidden_line(action: &str, names: &[&str], total: usize, root: &str) -> String {
    let mut named = names.iter().take(NAMED_FORBIDDEN).copied().collect::<Vec<_>>().join(", ");
    if names.len() > NAMED_FORBIDDEN {
        named.push_str(&format!(" and {} more", names.len() - NAMED_FORBIDDEN));
    }
    format!("cannot {action} {} of {total} namespaces of {root}'s subtree (forbidden): {named}", names.len())
}

/// Prints the namespaces' Tables as one, or says that nothing was found.
fn print_tables(
    tables: &[(String, Table)],
    namespace_column: bool,
    wide: bool,
    place: &Place<'_>,
) -> Result<(), stdout::Error> {
    if tables.iter().all(|(_, t)| t.rows.is_empty()) {
        eprintln!("No resources found in {}.", place.name());
        return Ok(());
    }
    out!("{}", table::render(tables, namespace_column, wide))
}

/// Prints objects as one List in `format`, or (`None`) as `prefix/name` lines; says so when
/// there are none to name.
fn print_objects(
    items: Vec<Value>,
    format: Option<DataFormat>,
    prefix: &str,
    place: &Place<'_>,
) -> anyhow::Result<()> {
    match format {
        Some(format) => out!("{}", output::data(&list(items), format)?)?,
        None if items.is_empty() => eprintln!("No resources found in {}.", place.name()),
        None => {
            for item in items {
                outln!("{prefix}/{}", item["metadata"]["name"].as_str().unwrap_or_default())?;
            }
        }
    }
    Ok(())
}

/// Objects as one List, as `kubectl get -o json` prints objects of several namespaces.
fn list(items: Vec<Value>) -> Value {
    serde_json::json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items})
}

/// The items of a list, each with the apiVersion and kind the list's items leave out.
fn typed_items(mut list: Value, kind: &Kind) -> Vec<Value> {
    let Some(items) = list.get_mut("items").and_then(Value::as_array_mut) else { return Vec::new() };
    let mut items = std::mem::take(items);
    for item in &mut items {
        if let Some(object) = item.as_object_mut() {
            object.entry("apiVersion").or_insert_with(|| kind.api_version().into());
            object.entry("kind").or_insert_with(|| kind.kind.clone().into());
        }
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_line_names_the_forbidden_namespaces() {
        assert_eq!(
            forbidden_line("list pods in", &["a", "b", "c"], 100, "team-a"),
            "cannot list pods in 3 of 100 namespaces of team-a's subtree (forbidden): a, b, c"
        );
        let many: Vec<String> = (0..13).map(|i| format!("ns-{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(
            forbidden_line("get", &many, 20, "r"),
            "cannot get 13 of 20 namespaces of r's subtree (forbidden): ns-0, ns-1, ns-2, ns-3, ns-4, ns-5, ns-6, ns-7, ns-8, ns-9 and 3 more"
        );
    }

    fn answers(found: &[&str], forbidden: &[&str]) -> Answers<()> {
        Answers {
            found: found.iter().map(|n| (n.to_string(), ())).collect(),
            forbidden: forbidden
                .iter()
                .map(|n| (n.to_string(), format!("pods is forbidden in {n}")))
                .collect(),
        }
    }

    #[test]
    fn forbidden_everywhere_is_the_servers_refusal() {
        let place = Place { root: "r", subtree: true, total: 2 };
        assert!(forbidden(&answers(&["r"], &["k"]), "list pods in", &place).is_ok());
        assert_eq!(
            forbidden(&answers(&[], &["r", "k"]), "list pods in", &place).unwrap_err().to_string(),
            "pods is forbidden in r (nor in any other namespace of r's subtree)"
        );
        let alone = Place { root: "r", subtree: false, total: 1 };
        assert_eq!(
            forbidden(&answers(&[], &["r"]), "list pods in", &alone).unwrap_err().to_string(),
            "pods is forbidden in r"
        );
        assert_eq!(alone.name(), "r namespace");
    }

    #[test]
    fn items_carry_their_api_version_and_kind() {
        let deploy = Kind {
            group: "apps".into(),
            version: "v1".into(),
            plural: "deployments".into(),
            kind: "Deployment".into(),
            namespaced: true,
        };
        let list = json!({"kind": "DeploymentList", "items": [{"metadata": {"name": "web"}}]});
        assert_eq!(
            super::list(typed_items(list, &deploy)),
            json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": [
                {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}
            ]})
        );
        assert!(typed_items(json!({"kind": "Status"}), &deploy).is_empty());
    }
}
