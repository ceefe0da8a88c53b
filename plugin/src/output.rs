//! How commands print: text for people (coloured by [`crate::paint`]), JSON or YAML for tools.

use clap::ValueEnum;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use serde::Serialize;

/// Formats for commands whose output is data.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataFormat {
    /// JSON.
    Json,
    /// YAML.
    Yaml,
}

/// Errors encoding output.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// JSON encoding failed.
    #[error("encoding JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// YAML encoding failed.
    #[error("encoding YAML: {0}")]
    Yaml(#[from] serde_saphyr::ser::Error),
}

/// `value` in `format`, ending with a newline.
pub fn data(value: &impl Serialize, format: DataFormat) -> Result<String, Error> {
    Ok(match format {
        DataFormat::Json => serde_json::to_string_pretty(value)? + "\n",
        DataFormat::Yaml => yaml(value)?,
    })
}

/// `value` as YAML, the way kubectl writes it: a long string stays on its line (where a `grep`
/// finds it whole), a string with newlines is a literal block.
pub fn yaml(value: &impl Serialize) -> Result<String, serde_saphyr::ser::Error> {
    let mut options = serde_saphyr::SerializerOptions::default();
    // Strings longer than this would be folded into `>` blocks: none is.
    options.folded_wrap_chars = usize::MAX;
    serde_saphyr::to_string_with_options(value, options)
}

/// A condition as HNC prints it: `Type (Reason): Message`.
pub fn condition(c: &Condition) -> String {
    format!("{} ({}): {}", c.type_, c.reason, c.message)
}

/// A condition for JSON and YAML output.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct ConditionView {
    /// E.g. `ActivitiesHalted`.
    #[serde(rename = "type")]
    pub type_: String,
    /// E.g. `ParentMissing`.
    pub reason: String,
    /// What is wrong.
    pub message: String,
}

impl From<&Condition> for ConditionView {
    fn from(c: &Condition) -> Self {
        ConditionView { type_: c.type_.clone(), reason: c.reason.clone(), message: c.message.clone() }
    }
}

/// Lays out rows as columns two spaces apart, the last column unpadded.
pub fn columns(rows: &[Vec<String>]) -> String {
    aligned(rows, 2, 0)
}

/// Lays out rows as kubectl's tables are: columns three spaces apart and at least six wide
/// (kubectl's tabwriter settings), the last column unpadded.
pub fn kubectl_columns(rows: &[Vec<String>]) -> String {
    aligned(rows, 3, 6)
}

/// Rows as columns `padding` spaces apart, each column at least `min_width` wide padding
/// included, as Go's tabwriter lays them out.
fn aligned(rows: &[Vec<String>], padding: usize, min_width: usize) -> String {
    let widths: Vec<usize> = (0..rows.first().map_or(0, Vec::len))
        .map(|i| rows.iter().map(|r| r.get(i).map_or(0, |c| c.chars().count())).max().unwrap_or(0))
        .map(|w| (w + padding).max(min_width))
        .collect();
    let mut out = String::new();
    for row in rows {
        let last = row.len().saturating_sub(1);
        for (i, cell) in row.iter().enumerate() {
            out.push_str(cell);
            if i < last {
                out.push_str(&" ".repeat(widths[i] - cell.chars().count()));
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up() {
        let rows = vec![
            vec!["A".to_string(), "LONGER".into(), "x".into()],
            vec!["BBB".into(), "y".into(), "z".into()],
        ];
        assert_eq!(columns(&rows), "A    LONGER  x\nBBB  y       z\n");
        assert_eq!(kubectl_columns(&rows), "A     LONGER   x\nBBB   y        z\n");
    }

    #[test]
    fn data_formats() {
        let v = serde_json::json!({"a": [1]});
        assert_eq!(data(&v, DataFormat::Json).unwrap(), "{\n  \"a\": [\n    1\n  ]\n}\n");
        assert_eq!(data(&v, DataFormat::Yaml).unwrap(), "a:\n- 1\n");
        // Strings that YAML would read as something else stay strings (label values, above all).
        let tricky = serde_json::json!({"labels": {"a": "yes", "b": "true", "c": "1", "d": "0755", "e": "null", "f": "~", "g": "", "h": "on"}});
        let yaml = data(&tricky, DataFormat::Yaml).unwrap();
        let back: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(back, tricky, "{yaml}");
        let message = "ActivitiesHalted: the parent of this namespace, team-a, does not exist; hns will not propagate anything into it";
        let text = serde_json::json!({"message": message, "script": "one\ntwo\n"});
        let yaml = data(&text, DataFormat::Yaml).unwrap();
        assert_eq!(yaml, format!("message: \"{message}\"\nscript: |\n  one\n  two\n"));
    }
}
