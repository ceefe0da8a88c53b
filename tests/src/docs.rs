//! The user guide's commands as tests: reading the fenced blocks of `docs/*.md` and matching
//! shown output. Running them is `tests/tests/docs.rs`; the convention is written there.

use regex::Regex;

/// How a fenced block is used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// ```` ```sh ````: a bash script that must succeed.
    Script,
    /// ```` ```console ````: `$ ` commands, each followed by the output it must print.
    Console,
    /// ```` ```sh migration PHASE … ````: run by `hack/migration-test.sh` instead.
    Migration,
    /// ```` ```sh cluster ````: needs a real cluster; its text must also be a migration block,
    /// so the migration test runs it (or its local equivalent).
    Cluster,
    /// Anything else (yaml, text, …): not run.
    Other,
}

/// A fenced block of a Markdown file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub kind: Kind,
    /// The line of the opening fence, from 1.
    pub line: usize,
    pub body: String,
}

/// The fenced blocks of a Markdown text, in order.
pub fn blocks(markdown: &str) -> Vec<Block> {
    let lines: Vec<&str> = markdown.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(info) = lines[i].trim_start().strip_prefix("```") else {
            i += 1;
            continue;
        };
        let line = i + 1;
        let words: Vec<&str> = info.split_whitespace().collect();
        let mut body = Vec::new();
        i += 1;
        while i < lines.len() && !lines[i].trim_start().starts_with("```") {
            body.push(lines[i]);
            i += 1;
        }
        i += 1;
        let kind = match words.as_slice() {
            ["sh"] => Kind::Script,
            ["console"] => Kind::Console,
            ["sh", "migration", ..] => Kind::Migration,
            ["sh", "cluster"] => Kind::Cluster,
            _ => Kind::Other,
        };
        out.push(Block { kind, line, body: body.join("\n") + "\n" });
    }
    out
}

/// One command of a console block and the output shown for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The line of the `$ `, from 1 within the block's body.
    pub line: usize,
    pub command: String,
    pub expected: Vec<String>,
}

/// The commands of a console block. A command continues onto the next line after a `\`.
pub fn steps(console: &str) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::new();
    let mut continuing = false;
    for (n, l) in console.lines().enumerate() {
        if continuing {
            let step = out.last_mut().expect("a command before its continuation");
            step.command.push('\n');
            step.command.push_str(l);
            continuing = l.ends_with('\\');
        } else if let Some(cmd) = l.strip_prefix("$ ") {
            out.push(Step { line: n + 1, command: cmd.to_string(), expected: Vec::new() });
            continuing = cmd.ends_with('\\');
        } else if let Some(step) = out.last_mut() {
            step.expected.push(l.to_string());
        }
    }
    out
}

/// Whether the shown output `expected` matches `actual`. Whitespace runs count as one space and
/// trailing whitespace and trailing blank lines are ignored; a line `...` stands for any number
/// of lines; within a line, `...` stands for any text and `<word>` for one run of non-space
/// characters (an age, a UID).
pub fn output_matches(expected: &[String], actual: &str) -> bool {
    let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut want: Vec<String> = expected.iter().map(|l| norm(l)).collect();
    let mut got: Vec<String> = actual.lines().map(norm).collect();
    while want.last().is_some_and(String::is_empty) {
        want.pop();
    }
    while got.last().is_some_and(String::is_empty) {
        got.pop();
    }
    let patterns: Vec<Option<Regex>> =
        want.iter().map(|l| if l == "..." { None } else { Some(line_pattern(l)) }).collect();
    lines_match(&patterns, &got)
}

fn line_pattern(line: &str) -> Regex {
    let placeholder = Regex::new(r"<[A-Za-z][A-Za-z0-9-]*>").expect("a valid regex");
    let mut pattern = String::from("^");
    let mut last = 0;
    for m in placeholder.find_iter(line) {
        pattern.push_str(&literal(&line[last..m.start()]));
        pattern.push_str(r"\S+");
        last = m.end();
    }
    pattern.push_str(&literal(&line[last..]));
    pattern.push('$');
    Regex::new(&pattern).expect("an escaped pattern is valid")
}

/// `text` as a pattern, with `...` matching any text.
fn literal(text: &str) -> String {
    text.split("...").map(regex::escape).collect::<Vec<_>>().join(".*")
}

fn lines_match(patterns: &[Option<Regex>], got: &[String]) -> bool {
    match patterns.split_first() {
        None => got.is_empty(),
        Some((None, rest)) => (0..=got.len()).any(|skip| lines_match(rest, &got[skip..])),
        Some((Some(p), rest)) => got.first().is_some_and(|g| p.is_match(g)) && lines_match(rest, &got[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(str::to_string).collect()
    }

    #[test]
    fn blocks_are_found_with_their_kind_and_line() {
        let md = "# T\n\n```sh\nkubectl get ns\n```\ntext\n```console\n$ a\nb\n```\n```yaml\nx: 1\n```\n```sh migration to-hns local=install-hns\nk\n```\n```sh cluster\nk\n```\n";
        let found: Vec<(Kind, usize)> = blocks(md).into_iter().map(|b| (b.kind, b.line)).collect();
        assert_eq!(
            found,
            [
                (Kind::Script, 3),
                (Kind::Console, 7),
                (Kind::Other, 11),
                (Kind::Migration, 14),
                (Kind::Cluster, 17)
            ]
        );
        assert_eq!(blocks(md)[0].body, "kubectl get ns\n");
    }

    #[test]
    fn console_steps_keep_continuations_and_outputs() {
        let s = steps("$ kubectl get \\\n  ns\nNAME\n$ true\n");
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].command, "kubectl get \\\n  ns");
        assert_eq!(s[0].expected, ["NAME"]);
        assert_eq!((s[1].line, s[1].expected.len()), (4, 0));
    }

    #[test]
    fn output_matching_allows_placeholders_and_elisions_only() {
        let shown = lines("NAME   STATUS   AGE\nkid    Ok       <age>");
        assert!(output_matches(&shown, "NAME STATUS AGE\nkid Ok 3s\n\n"));
        assert!(!output_matches(&shown, "NAME STATUS AGE\nkid Missing 3s\n"));
        assert!(!output_matches(&shown, "NAME STATUS AGE\nkid Ok 3s\nother Ok 1s\n"));
        let elided = lines("Error: ...cycle...\n...\nlast");
        assert!(output_matches(&elided, "Error: illegal parent: cycle when x\na\nb\nlast"));
        assert!(output_matches(&elided, "Error: cycle\nlast"));
        assert!(!output_matches(&elided, "Error: no\nlast"));
        assert!(!output_matches(&lines("a.b"), "axb"), "only ... is special");
    }
}
