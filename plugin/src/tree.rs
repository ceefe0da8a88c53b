//! Drawing the forest: HNC's box-drawing tree, with `[s] ` before subnamespaces, ` (terminating)`
//! after namespaces being deleted (hns's addition: HNC showed them as if nothing happened),
//! ` (hidden)` after children the user may not see (by name and kind only: a view may hide a
//! namespace, but must not misstate it) and numbered footnotes for conditions; and the same
//! trees as data for `-o json|yaml`.
//!
//! A cycle is drawn from its first member down to where it closes, marked `↻`, so every
//! namespace shows and the drawing ends.

use std::fmt::Write;

use serde::Serialize;

use crate::forest::{Forest, Node};
use crate::output::{self, ConditionView};
use crate::paint::{Paint, Styles as _};

/// Marks a subnamespace (HNC's).
const SUBNAMESPACE: &str = "[s] ";
/// Marks the namespace that closes a cycle.
const CYCLE: &str = "↻ ";
/// Marks a namespace being deleted.
const TERMINATING: &str = " (terminating)";
/// Marks a child the user may not see.
const HIDDEN: &str = " (hidden)";

/// The trees under `tops`, as text.
pub fn text(forest: &Forest, tops: &[&str], paint: &Paint) -> String {
    let mut d = Drawing {
        forest,
        marks: Marks::new(paint),
        out: String::new(),
        prefix: String::new(),
        path: Vec::new(),
        footnotes: Vec::new(),
        subnamespaces: false,
        cycles: false,
    };
    for top in tops {
        let node = forest.get(top);
        d.label(top, node, false);
        d.out.push('\n');
        if let Some(node) = node {
            d.path.push(node);
            d.children(node);
            d.path.pop();
        }
    }
    let Drawing { mut out, footnotes, subnamespaces, cycles, .. } = d;
    if subnamespaces || cycles {
        out.push('\n');
    }
    if subnamespaces {
        let _ = writeln!(out, "{} indicates subnamespaces", SUBNAMESPACE.trim_end());
    }
    if cycles {
        let _ = writeln!(
            out,
            "{} indicates a cycle: the namespace is its own ancestor, shown above",
            CYCLE.trim_end()
        );
    }
    if !footnotes.is_empty() {
        let _ = writeln!(out, "\n{}", paint.head("Conditions:"));
        for (i, f) in footnotes.iter().enumerate() {
            let _ = writeln!(out, "{}) {f}", i + 1);
        }
    }
    out
}

/// The marks, painted once: `tree -A` writes one per namespace.
struct Marks<'a> {
    paint: &'a Paint,
    subnamespace: String,
    cycle: String,
    terminating: String,
    hidden: String,
}

impl<'a> Marks<'a> {
    fn new(paint: &'a Paint) -> Marks<'a> {
        Marks {
            paint,
            subnamespace: paint.dim(SUBNAMESPACE),
            cycle: paint.warn(CYCLE),
            terminating: paint.warn(TERMINATING),
            hidden: paint.dim(HIDDEN),
        }
    }
}

struct Drawing<'a> {
    forest: &'a Forest,
    marks: Marks<'a>,
    out: String,
    /// What goes before the branches at the current depth: one indent per level above.
    prefix: String,
    /// The namespaces from the top to the current one, to see where a cycle closes.
    path: Vec<&'a Node>,
    footnotes: Vec<String>,
    subnamespaces: bool,
    cycles: bool,
}

impl<'a> Drawing<'a> {
    fn children(&mut self, node: &'a Node) {
        let children = self.forest.children(node);
        let count = children.len();
        for (i, (name, child)) in children.enumerate() {
            let (branch, indent) =
                if i + 1 == count { ("└── ", "    ") } else { ("├── ", "│   ") };
            let closes_cycle = child.is_some_and(|c| self.path.iter().any(|p| std::ptr::eq(*p, c)));
            self.out.push_str(&self.prefix);
            self.out.push_str(branch);
            self.label(name, child, closes_cycle);
            self.out.push('\n');
            if let (Some(child), false) = (child, closes_cycle) {
                let depth = self.prefix.len();
                self.prefix.push_str(indent);
                self.path.push(child);
                self.children(child);
                self.path.pop();
                self.prefix.truncate(depth);
            }
        }
    }

    /// Writes `[s] name (terminating) (1,2)`, or `↻ name` where a cycle closes.
    fn label(&mut self, name: &str, node: Option<&Node>, closes_cycle: bool) {
        if closes_cycle {
            self.cycles = true;
            self.out.push_str(&self.marks.cycle);
        }
        if self.forest.is_subnamespace(name, node) {
            self.subnamespaces = true;
            self.out.push_str(&self.marks.subnamespace);
        }
        self.out.push_str(name);
        if closes_cycle {
            return;
        }
        if node.is_none() {
            self.out.push_str(&self.marks.hidden);
        }
        if node.is_some_and(|n| n.terminating) {
            self.out.push_str(&self.marks.terminating);
        }
        let Some(node) = node.filter(|n| !n.conditions.is_empty()) else { return };
        let mut notes: Vec<usize> = node
            .conditions
            .iter()
            .map(|c| {
                let text = output::condition(c);
                let at = match self.footnotes.iter().position(|f| *f == text) {
                    Some(at) => at,
                    None => {
                        self.footnotes.push(text);
                        self.footnotes.len() - 1
                    }
                };
                at + 1
            })
            .collect();
        // HNC's form: `name (1,3)`, in footnote order.
        notes.sort_unstable();
        notes.dedup();
        let notes: Vec<String> = notes.iter().map(usize::to_string).collect();
        let _ = write!(self.out, " {}", self.marks.paint.bad(&format!("({})", notes.join(","))));
    }
}

/// One namespace in the trees as data.
#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TreeNode {
    /// The namespace.
    pub name: String,
    /// Whether it is a subnamespace.
    pub subnamespace: bool,
    /// Whether the user may not see it (only its name and kind are known).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub hidden: bool,
    /// True where a cycle closes: the namespace is already above, and its children are there.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cycle: bool,
    /// Whether it is being deleted.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub terminating: bool,
    /// Its conditions.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ConditionView>,
    /// Its children.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<TreeNode>,
}

/// The trees under `tops`, for `-o json|yaml`.
#[derive(Serialize, Debug, PartialEq)]
pub struct Trees {
    /// One per top.
    pub trees: Vec<TreeNode>,
}

/// The trees under `tops` as data.
pub fn data(forest: &Forest, tops: &[&str]) -> Trees {
    Trees { trees: tops.iter().map(|t| node(forest, t, forest.get(t), &mut vec![])).collect() }
}

fn node<'a>(forest: &'a Forest, name: &str, n: Option<&'a Node>, path: &mut Vec<&'a Node>) -> TreeNode {
    let cycle = n.is_some_and(|n| path.iter().any(|p| std::ptr::eq(*p, n)));
    let mut out = TreeNode {
        name: name.to_string(),
        subnamespace: forest.is_subnamespace(name, n),
        hidden: n.is_none(),
        cycle,
        terminating: n.is_some_and(|n| n.terminating) && !cycle,
        conditions: Vec::new(),
        children: Vec::new(),
    };
    if let (Some(n), false) = (n, cycle) {
        out.conditions = n.conditions.iter().map(ConditionView::from).collect();
        path.push(n);
        out.children = forest.children(n).map(|(name, c)| node(forest, name, c, path)).collect();
        path.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forest::tests::{hc, sample};
    use std::collections::BTreeSet;

    #[test]
    fn golden_all_namespaces() {
        let f = sample();
        assert_eq!(
            text(&f, &f.tops(), &Paint::new(false)),
            "\
acme-org
├── team-a
│   └── [s] svc-1
└── [s] team-b
orphan (1)
solo
cyc-a (2)
└── cyc-b (2)
    ├── ↻ cyc-a
    └── [s] cyc-b-kid (3)

[s] indicates subnamespaces
↻ indicates a cycle: the namespace is its own ancestor, shown above

Conditions:
1) ActivitiesHalted (ParentMissing): Parent \"gone\" does not exist
2) ActivitiesHalted (InCycle): Namespace is a member of the cycle: cyc-a <- cyc-b <- cyc-a
3) ActivitiesHalted (AncestorHaltActivities): Propagation paused in \"cyc-b-kid\" and its descendants due to ActivitiesHalted condition on ancestor \"cyc-a\"
"
        );
    }

    #[test]
    fn golden_named_subtree_without_legends() {
        let f = sample();
        assert_eq!(
            text(&f, &["team-a"], &Paint::new(false)),
            "team-a\n└── [s] svc-1\n\n[s] indicates subnamespaces\n"
        );
        assert_eq!(text(&f, &["solo"], &Paint::new(false)), "solo\n");
    }

    #[test]
    fn a_namespace_with_two_conditions_gets_both_notes() {
        let f = Forest::new(
            [hc(
                "x",
                None,
                &[],
                &[("ActivitiesHalted", "ParentMissing", "p"), ("BadConfiguration", "B", "b")],
            )],
            &BTreeSet::new(),
        );
        assert!(text(&f, &["x"], &Paint::new(false)).starts_with("x (1,2)\n"));
    }

    #[test]
    fn terminating_namespaces_are_marked_before_their_notes() {
        let mut f = sample();
        for name in ["team-b", "orphan"] {
            f.mark_terminating(name);
        }
        let text = text(&f, &f.tops(), &Paint::new(false));
        assert!(text.contains("└── [s] team-b (terminating)\n"), "{text}");
        assert!(text.contains("\norphan (terminating) (1)\n"), "{text}");
        let v = serde_json::to_value(data(&f, &["acme-org"])).unwrap();
        assert_eq!(v["trees"][0]["children"][1]["terminating"], true);
        assert!(v["trees"][0].get("terminating").is_none(), "only where true");
    }

    #[test]
    fn colour_only_adds_escapes() {
        let f = sample();
        let coloured = text(&f, &f.tops(), &Paint::new(true));
        assert!(coloured.contains("\u{1b}["), "{coloured}");
        assert_eq!(console::strip_ansi_codes(&coloured), text(&f, &f.tops(), &Paint::new(false)));
    }

    #[test]
    fn data_nests_and_cuts_cycles() {
        let f = sample();
        let v = serde_json::to_value(data(&f, &["cyc-a"])).unwrap();
        assert_eq!(v["trees"][0]["name"], "cyc-a");
        assert_eq!(v["trees"][0]["conditions"][0]["reason"], "InCycle");
        let b = &v["trees"][0]["children"][0];
        assert_eq!(b["name"], "cyc-b");
        assert_eq!(
            b["children"][0],
            serde_json::json!({"name": "cyc-a", "subnamespace": false, "cycle": true})
        );
        assert_eq!(b["children"][1]["subnamespace"], true);
    }
}
