//! `deploy/krew/hns.yaml` against krew's rules for a plugin manifest (krew's own validation, plus
//! what installing needs): the right apiVersion and kind, the name krew installs under, every
//! platform selected by os and arch with a uri, a sha256 and a `bin` that the archive's `files`
//! mapping puts in place, and a version and download URLs that match this crate.

use std::collections::BTreeSet;
use std::path::{Component, Path};

use serde::Deserialize;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Plugin {
    api_version: String,
    kind: String,
    metadata: Metadata,
    spec: Spec,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Metadata {
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Spec {
    version: String,
    homepage: Option<String>,
    short_description: String,
    description: Option<String>,
    caveats: Option<String>,
    platforms: Vec<Platform>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Platform {
    selector: Selector,
    uri: String,
    sha256: String,
    bin: String,
    files: Vec<FileOperation>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Selector {
    match_labels: std::collections::BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileOperation {
    from: String,
    to: String,
}

const MANIFEST: &str = "../deploy/krew/hns.yaml";

fn manifest() -> (String, Plugin) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(MANIFEST);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let plugin = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (path.file_stem().unwrap().to_string_lossy().into_owned(), plugin)
}

/// A relative path that stays inside the directory it is relative to.
fn contained(p: &str) -> bool {
    let p = Path::new(p);
    !p.is_absolute() && p.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// Where a file operation puts `from` (krew moves it into the directory `to`, keeping its name).
fn destination(op: &FileOperation) -> String {
    let name = Path::new(&op.from).file_name().unwrap().to_string_lossy().into_owned();
    Path::new(&op.to)
        .join(name)
        .components()
        .filter(|c| *c != Component::CurDir)
        .collect::<std::path::PathBuf>()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn the_manifest_follows_krews_rules() {
    let (file_name, p) = manifest();
    assert_eq!(p.api_version, "krew.googlecontainertools.github.com/v1alpha2");
    assert_eq!(p.kind, "Plugin");
    assert_eq!(p.metadata.name, "hns", "kubectl hns is the command");
    assert_eq!(p.metadata.name, file_name, "krew's index names the file after the plugin");
    assert!(p.metadata.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
    assert!(!p.spec.short_description.is_empty() && !p.spec.short_description.contains(['\r', '\n']));
    assert!(p.spec.description.is_some_and(|d| !d.trim().is_empty()));
    assert!(p.spec.homepage.is_some_and(|h| h.starts_with("https://")));
    assert!(p.spec.caveats.is_some());
    assert_eq!(
        p.spec.version,
        format!("v{}", env!("CARGO_PKG_VERSION")),
        "the manifest's version is the crate's"
    );

    let mut platforms = BTreeSet::new();
    for pl in &p.spec.platforms {
        let labels = &pl.selector.match_labels;
        assert_eq!(
            labels.keys().map(String::as_str).collect::<Vec<_>>(),
            ["arch", "os"],
            "krew selects by os and arch only"
        );
        let (os, arch) = (labels["os"].as_str(), labels["arch"].as_str());
        assert!(platforms.insert((os, arch)), "{os}/{arch} twice");
        let archive = format!("kubectl-hns-{os}-{arch}.tar.gz");
        assert_eq!(
            pl.uri,
            format!("https://github.com/hns-dev/hns/releases/download/{}/{archive}", p.spec.version),
            "the archive `make release` builds, under this version"
        );
        assert!(
            pl.sha256.len() == 64 && pl.sha256.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')),
            "{os}/{arch}: sha256 must be 64 lower-case hex digits: {}",
            pl.sha256
        );
        assert!(pl.sha256.chars().any(|c| c != '0'), "{os}/{arch}: a placeholder sha256, no archive built");
        assert!(!pl.files.is_empty(), "{os}/{arch}: files");
        for op in &pl.files {
            assert!(contained(&op.from) && contained(&op.to), "{os}/{arch}: {} -> {}", op.from, op.to);
        }
        let installed: Vec<String> = pl.files.iter().map(destination).collect();
        assert!(contained(&pl.bin), "{os}/{arch}: bin {}", pl.bin);
        let bin = pl.bin.trim_start_matches("./");
        assert!(
            installed.iter().any(|d| d == bin),
            "{os}/{arch}: bin {bin} is not among the files put in place {installed:?}"
        );
        assert_eq!(
            Path::new(bin).file_name().unwrap(),
            "kubectl-hns",
            "kubectl finds plugins by the name kubectl-<plugin>"
        );
    }
    // Only what `make release` builds (on linux/amd64); krew refuses an archive whose sha256
    // does not match.
    let expected: BTreeSet<(&str, &str)> = [("linux", "amd64")].into();
    assert_eq!(platforms, expected);
}

#[test]
fn destinations_follow_krews_moves() {
    assert_eq!(destination(&FileOperation { from: "kubectl-hns".into(), to: ".".into() }), "kubectl-hns");
    assert_eq!(
        destination(&FileOperation { from: "bin/kubectl-hns".into(), to: "out".into() }),
        "out/kubectl-hns"
    );
    assert!(!contained("/abs") && !contained("../up") && contained("./x"));
}
