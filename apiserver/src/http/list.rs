//! List requests: selectors, `limit`/`continue` paging, and the options that go with them.
//!
//! Lists are served from the in-memory cache, so a page is cut from the current state: the
//! continue token records where the previous page ended and the resourceVersion it was cut at.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use base64::Engine;
use kube::core::Selector;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::http::selector::{self, FieldSelector};
use crate::http::status::ApiError;

/// The list options of a request (`metav1.ListOptions`).
#[derive(Debug, Default)]
pub struct ListOptions {
    /// `labelSelector`.
    pub labels: Selector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `limit`; `None` or 0 means everything.
    pub limit: Option<usize>,
    /// Where the previous page ended (`continue`).
    pub after: Option<String>,
    /// The resourceVersion the previous page handed out (`continue`).
    pub continued_at: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct ContinueToken {
    /// resourceVersion the page was cut at, as it was handed out.
    rv: String,
    /// The `namespace/name` key of the last item already sent.
    start: String,
}

impl ListOptions {
    /// Reads the options from the query parameters, refusing malformed ones with a 400.
    pub fn from_query(q: &HashMap<String, String>) -> Result<Self, ApiError> {
        check_booleans(q)?;
        check_numbers(q)?;
        let labels = selector::parse_label_selector(q.get("labelSelector").map_or("", String::as_str))?;
        let fields = FieldSelector::parse(q.get("fieldSelector").map_or("", String::as_str))?;
        let limit = match q.get("limit").map(String::as_str) {
            None | Some("") => None,
            Some(l) => Some(
                l.parse::<i64>()
                    .map_err(|_| ApiError::bad_request(format!("limit: invalid value \"{l}\"")))?,
            )
            .filter(|l| *l > 0)
            .map(|l| l as usize),
        };
        let (after, continued_at) = match q.get("continue").map(String::as_str) {
            None | Some("") => (None, None),
            Some(token) => {
                let token = decode_token(token)?;
                (Some(token.start), Some(token.rv))
            }
        };
        Ok(ListOptions { labels, fields, limit, after, continued_at })
    }

    /// Whether an item passes the selectors. Its labels are read only for a label selector.
    pub fn selects(&self, item: &impl Selectable) -> bool {
        self.fields.matches(item.namespace(), item.name())
            && (self.labels.selects_all() || selector::matches(&self.labels, item.labels().as_deref()))
    }
}

/// What selectors and pages read of a listed object: its key and its labels.
pub trait Selectable {
    /// `metadata.namespace`.
    fn namespace(&self) -> &str;
    /// `metadata.name`.
    fn name(&self) -> &str;
    /// `metadata.labels`.
    fn labels(&self) -> Option<Cow<'_, BTreeMap<String, String>>>;
}

impl Selectable for Value {
    fn namespace(&self) -> &str {
        self["metadata"]["namespace"].as_str().unwrap_or_default()
    }

    fn name(&self) -> &str {
        self["metadata"]["name"].as_str().unwrap_or_default()
    }

    fn labels(&self) -> Option<Cow<'_, BTreeMap<String, String>>> {
        serde_json::from_value(self["metadata"]["labels"].clone()).ok().map(Cow::Owned)
    }
}

/// Boolean parameters take what kubectl and client-go send. Anything else, an empty value too, is
/// refused rather than guessed at (Kubernetes reads every value but "false" and "0" as true, so
/// `watch=null` would open a watch there).
fn check_booleans(q: &HashMap<String, String>) -> Result<(), ApiError> {
    for key in ["watch", "allowWatchBookmarks", "sendInitialEvents"] {
        if let Some(v) = q.get(key) {
            if !matches!(v.to_ascii_lowercase().as_str(), "true" | "false" | "1" | "0") {
                return Err(ApiError::bad_request(format!(
                    "{key}: invalid value \"{v}\": must be true or false"
                )));
            }
        }
    }
    Ok(())
}

/// `limit` and `timeoutSeconds` are integers, present only with a value; `resourceVersion` may be
/// empty (any version), else one of the forms hns hands out ([`crate::resource_version::parse`]:
/// it is opaque to clients, so anything else was never issued).
fn check_numbers(q: &HashMap<String, String>) -> Result<(), ApiError> {
    for key in ["limit", "timeoutSeconds"] {
        if let Some(v) = q.get(key) {
            if v.parse::<u64>().is_err() {
                return Err(ApiError::bad_request(format!(
                    "{key}: invalid value \"{v}\": must be a non-negative integer"
                )));
            }
        }
    }
    match q.get("resourceVersion").filter(|v| !v.is_empty()) {
        Some(v) if crate::resource_version::parse(v).is_none() => {
            Err(ApiError::bad_request(crate::resource_version::not_handed_out(v)))
        }
        _ => Ok(()),
    }
}

fn decode_token(token: &str) -> Result<ContinueToken, ApiError> {
    let bad = || {
        ApiError::bad_request("continue key is not valid: the token was not issued by this server; start the list again without it")
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token).map_err(|_| bad())?;
    serde_json::from_slice(&bytes).map_err(|_| bad())
}

/// One page of a list.
#[derive(Debug)]
pub struct Page<T> {
    /// The items, in key order.
    pub items: Vec<T>,
    /// Token for the next page, if there is one.
    pub continue_token: Option<String>,
    /// How many items follow this page.
    pub remaining: Option<i64>,
}

impl<T> Default for Page<T> {
    fn default() -> Self {
        Page { items: Vec::new(), continue_token: None, remaining: None }
    }
}

fn key_of(item: &impl Selectable) -> String {
    format!("{}/{}", item.namespace(), item.name())
}

/// Filters `items` (already in key order) and cuts the page the options ask for.
pub fn paginate<T: Selectable>(items: impl IntoIterator<Item = T>, opts: &ListOptions, rv: &str) -> Page<T> {
    let mut selected = items
        .into_iter()
        .filter(|i| opts.after.as_ref().is_none_or(|after| key_of(i).as_str() > after.as_str()))
        .filter(|i| opts.selects(i));
    let Some(limit) = opts.limit else {
        return Page { items: selected.collect(), ..Default::default() };
    };
    let items: Vec<T> = selected.by_ref().take(limit).collect();
    let remaining = selected.count();
    if remaining == 0 {
        return Page { items, ..Default::default() };
    }
    let token = ContinueToken { rv: rv.to_string(), start: items.last().map(key_of).unwrap_or_default() };
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(&token).unwrap_or_default());
    Page { items, continue_token: Some(token), remaining: Some(remaining as i64) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn item(ns: &str, name: &str) -> Value {
        json!({"metadata": {"namespace": ns, "name": name, "labels": {"ns": ns}}})
    }

    fn q(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn names(p: &Page<Value>) -> Vec<String> {
        p.items.iter().map(key_of).collect()
    }

    #[test]
    fn pages_through_everything_once() {
        let all: Vec<Value> = ["a", "b", "c", "d", "e"].iter().map(|n| item(n, "hierarchy")).collect();
        let mut seen = Vec::new();
        let mut query = q(&[("limit", "2")]);
        loop {
            let opts = ListOptions::from_query(&query).unwrap();
            let page = paginate(all.clone(), &opts, "42");
            seen.extend(names(&page));
            match page.continue_token {
                Some(t) => {
                    assert!(page.remaining.unwrap() > 0);
                    query.insert("continue".into(), t);
                }
                None => break,
            }
        }
        assert_eq!(seen, ["a/hierarchy", "b/hierarchy", "c/hierarchy", "d/hierarchy", "e/hierarchy"]);
    }

    #[test]
    fn selectors_filter_before_paging() {
        let all = vec![item("a", "hierarchy"), item("b", "hierarchy"), item("c", "hierarchy")];
        let opts = ListOptions::from_query(&q(&[("labelSelector", "ns notin (a)"), ("limit", "1")])).unwrap();
        let page = paginate(all.clone(), &opts, "1");
        assert_eq!(names(&page), ["b/hierarchy"]);
        assert_eq!(page.remaining, Some(1));
        let opts = ListOptions::from_query(&q(&[("fieldSelector", "metadata.namespace=c")])).unwrap();
        assert_eq!(names(&paginate(all, &opts, "1")), ["c/hierarchy"]);
    }

    #[test]
    fn bad_options_are_400() {
        for (k, v) in [
            ("limit", "x"),
            ("continue", "garbage!"),
            ("labelSelector", "a in b"),
            ("fieldSelector", "spec.x=1"),
            ("watch", "null"),
            ("allowWatchBookmarks", "yes"),
            ("timeoutSeconds", "false"),
            ("timeoutSeconds", "-1"),
            ("resourceVersion", "abc"),
            ("limit", ""),
            ("watch", ""),
        ] {
            assert_eq!(ListOptions::from_query(&q(&[(k, v)])).unwrap_err().code, 400, "{k}={v}");
        }
    }
}
