//! Helpers for unit tests only (compiled under `cfg(test)`). Pure and at the lowest layer, so
//! the tests of any module may use them.

use std::collections::BTreeMap;

/// A map of owned strings from `(key, value)` pairs: labels, annotations, a query.
pub fn string_map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}
