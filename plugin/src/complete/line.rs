//! What the words already typed say: kubectl's flags (which cluster to ask), `--group`, and
//! whether the word being completed is a file name.

use clap::{Args, FromArgMatches, ValueHint};

use crate::kube_flags::KubeFlags;

/// The kubectl flags among `words`, so that lookups ask the cluster the command will (`--context`,
/// `--kubeconfig`, `--as`…). Words that are not kubectl flags are skipped; flags that do not
/// parse leave the defaults.
pub fn kube_flags(words: &[String]) -> KubeFlags {
    let mut spec = KubeFlags::augment_args(clap::Command::new("kubectl-hns").no_binary_name(true));
    spec.build();
    let kept = known_flags(&spec, words);
    spec.try_get_matches_from(kept)
        .ok()
        .and_then(|m| KubeFlags::from_arg_matches(&m).ok())
        .unwrap_or_default()
}

/// The words of `spec`'s flags, with their values.
fn known_flags(spec: &clap::Command, words: &[String]) -> Vec<String> {
    let mut kept = Vec::new();
    let mut words = words.iter();
    while let Some(word) = words.next() {
        if word == "--" {
            break;
        }
        let Some((arg, inline)) = flag(spec, word) else { continue };
        kept.push(word.clone());
        if !inline && takes_separate_value(arg) {
            kept.extend(words.next().cloned());
        }
    }
    kept
}

/// The argument `word` names, and whether it carries its value (`--x=v`, `-nfoo`).
fn flag<'a>(cmd: &'a clap::Command, word: &str) -> Option<(&'a clap::Arg, bool)> {
    if let Some(long) = word.strip_prefix("--") {
        let (name, inline) = long.split_once('=').map_or((long, false), |(n, _)| (n, true));
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_long_and_visible_aliases().is_some_and(|longs| longs.contains(&name)))?;
        return Some((arg, inline));
    }
    let mut shorts = word.strip_prefix('-')?.chars();
    let short = shorts.next()?;
    let arg = cmd.get_arguments().find(|a| a.get_short() == Some(short))?;
    Some((arg, shorts.next().is_some()))
}

fn takes_separate_value(arg: &clap::Arg) -> bool {
    arg.get_num_args().is_some_and(|n| n.takes_values()) && !arg.is_require_equals_set()
}

/// The value of the last `--long V` or `--long=V` among `words`.
pub fn value_of(words: &[String], long: &str) -> Option<String> {
    let flag = format!("--{long}");
    let mut value = None;
    let mut words = words.iter();
    while let Some(word) = words.next() {
        if *word == flag {
            value = words.next().cloned();
        } else if let Some(v) = word.strip_prefix(&flag).and_then(|rest| rest.strip_prefix('=')) {
            value = Some(v.to_string());
        }
    }
    value
}

/// Whether `current` is the value of a flag that takes a file (`--kubeconfig <TAB>`), which the
/// shell completes better than we could.
pub fn completes_file(cmd: &clap::Command, typed: &[String], current: &str) -> bool {
    let mut cmd = cmd.clone();
    cmd.build();
    let arg = if current.starts_with("--") && current.contains('=') {
        flag(&cmd, current).map(|(arg, _)| arg)
    } else {
        typed
            .last()
            .and_then(|prev| flag(&cmd, prev))
            .filter(|(arg, inline)| !inline && takes_separate_value(arg))
            .map(|(arg, _)| arg)
    };
    arg.is_some_and(|a| matches!(a.get_value_hint(), ValueHint::FilePath | ValueHint::AnyPath))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn kubectl_flags_are_read_among_other_words() {
        let flags = kube_flags(&words(
            "tree --context c team -o yaml --kubeconfig=/k -n ns --as u --insecure-skip-tls-verify x",
        ));
        assert_eq!(flags.context.as_deref(), Some("c"));
        assert_eq!(flags.kubeconfig.as_deref(), Some(std::path::Path::new("/k")));
        assert_eq!(flags.namespace.as_deref(), Some("ns"));
        assert_eq!(flags.as_user.as_deref(), Some("u"));
        assert_eq!(flags.insecure_skip_tls_verify, Some(true));
        assert_eq!(kube_flags(&words("-nteam")).namespace.as_deref(), Some("team"));
    }

    #[test]
    fn flags_that_do_not_parse_leave_the_defaults() {
        let flags = kube_flags(&words("tree --request-timeout nonsense --context"));
        assert!(flags.context.is_none() && flags.request_timeout.is_none());
    }

    #[test]
    fn the_last_group_counts() {
        assert_eq!(value_of(&words("set-resource --group a --group=b"), "group").as_deref(), Some("b"));
        assert_eq!(value_of(&words("set-resource --groups x"), "group"), None);
    }

    #[test]
    fn kubeconfig_values_are_files() {
        let mut cmd = KubeFlags::augment_args(clap::Command::new("x"));
        cmd = cmd.subcommand(clap::Command::new("tree"));
        assert!(completes_file(&cmd, &words("tree --kubeconfig"), ""));
        assert!(completes_file(&cmd, &words("tree"), "--kubeconfig=/tm"));
        assert!(!completes_file(&cmd, &words("tree --context"), ""));
        assert!(!completes_file(&cmd, &words("tree --kubeconfig=/k"), ""));
    }
}
