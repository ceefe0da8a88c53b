//! The children of one parent, as the forest keeps them: sorted, shared between copies of the
//! forest until one is written, and small. Most parents have a handful of children (in a deep
//! tree, most have one), and a B-tree's smallest node has room for eleven names, so a few
//! children are kept in one exact-size slice and only many in a B-tree.

use std::collections::BTreeSet;
use std::sync::Arc;

/// Beyond this many children a parent's set is a B-tree: inserting into a slice copies it.
const FEW: usize = 32;

/// The names of one parent's children, in name order.
#[derive(Debug, Clone)]
pub enum Children {
    /// At most [`FEW`], sorted.
    Few(Arc<[Arc<str>]>),
    /// More than [`FEW`].
    Many(Arc<BTreeSet<Arc<str>>>),
}

impl Default for Children {
    fn default() -> Self {
        Children::Few(Arc::new([]))
    }
}

impl Children {
    /// Adds `name`; false if it was there.
    pub fn insert(&mut self, name: Arc<str>) -> bool {
        match self {
            Children::Few(few) => {
                let Err(at) = few.binary_search(&name) else { return false };
                let mut names = Vec::with_capacity(few.len() + 1);
                names.extend(few[..at].iter().cloned());
                names.push(name);
                names.extend(few[at..].iter().cloned());
                *self = if names.len() > FEW {
                    Children::Many(Arc::new(names.into_iter().collect()))
                } else {
                    Children::Few(names.into())
                };
                true
            }
            Children::Many(many) => Arc::make_mut(many).insert(name),
        }
    }

    /// Removes `name`; false if it was not there.
    pub fn remove(&mut self, name: &str) -> bool {
        match self {
            Children::Few(few) => {
                let Ok(at) = few.binary_search_by(|c| (**c).cmp(name)) else { return false };
                let names: Vec<Arc<str>> =
                    few.iter().enumerate().filter(|(i, _)| *i != at).map(|(_, c)| c.clone()).collect();
                *self = Children::Few(names.into());
                true
            }
            Children::Many(many) => {
                let removed = Arc::make_mut(many).remove(name);
                // Back to a slice well below the threshold, so that a parent hovering at it does
                // not switch at every change.
                if many.len() <= FEW / 2 {
                    *self = Children::Few(many.iter().cloned().collect());
                }
                removed
            }
        }
    }

    /// The names, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<str>> {
        let (few, many) = match self {
            Children::Few(few) => (&few[..], None),
            Children::Many(many) => (&[][..], Some(many.iter())),
        };
        few.iter().chain(many.into_iter().flatten())
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        match self {
            Children::Few(few) => few.is_empty(),
            Children::Many(many) => many.is_empty(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(c: &Children) -> Vec<String> {
        c.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn few_and_many_keep_names_in_order_once() {
        let mut c = Children::default();
        let all: Vec<String> = (0..100).map(|i| format!("ns-{:03}", (i * 37) % 100)).collect();
        for (i, n) in all.iter().enumerate() {
            assert!(c.insert(n.as_str().into()));
            assert!(!c.insert(n.as_str().into()), "once");
            assert_eq!(matches!(c, Children::Many(_)), i + 1 > FEW, "a B-tree beyond {FEW}");
        }
        let mut sorted = all.clone();
        sorted.sort();
        assert_eq!(names(&c), sorted);
        for n in &all {
            assert!(c.remove(n));
            assert!(!c.remove(n));
        }
        assert!(c.is_empty());
        assert!(matches!(c, Children::Few(_)), "a slice again");
    }

    #[test]
    fn a_copy_is_not_changed_by_the_original() {
        let mut c = Children::default();
        c.insert("b".into());
        let copy = c.clone();
        c.insert("a".into());
        c.remove("b");
        assert_eq!(names(&copy), ["b"]);
        assert_eq!(names(&c), ["a"]);
    }
}
