//! The server's Tables (`meta.k8s.io/v1` `Table`, asked for with `Accept: …;as=Table`), several
//! printed as one the way kubectl prints a Table: the columns the server chose, upper-cased,
//! those of priority 0 unless wide, optionally after a NAMESPACE column as `kubectl get -A`
//! prints it.

use serde::Deserialize;
use serde_json::Value;

use crate::output;

/// The `Accept` header asking for a Table, with plain JSON as the fallback kubectl also offers.
const ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

/// `request` asking for a Table without the objects behind its rows (`includeObject=None`):
/// only the cells are printed, and each row's object metadata would make the answer several
/// times larger to send and to read.
pub fn request(request: http::Request<Vec<u8>>) -> Result<http::Request<Vec<u8>>, http::uri::InvalidUri> {
    let (mut parts, body) = request.into_parts();
    let uri = parts.uri.to_string();
    let separator = if uri.contains('?') { '&' } else { '?' };
    parts.uri = format!("{uri}{separator}includeObject=None").parse()?;
    parts.headers.insert(http::header::ACCEPT, http::HeaderValue::from_static(ACCEPT));
    Ok(http::Request::from_parts(parts, body))
}

/// A Table as the server sends it (the parts that are printed).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Table {
    /// The columns.
    #[serde(default)]
    pub column_definitions: Vec<Column>,
    /// The rows, in the server's order.
    #[serde(default)]
    pub rows: Vec<Row>,
}

/// A column of a Table.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Column {
    /// Its heading.
    pub name: String,
    /// 0 for the columns kubectl always prints; more for those of `-o wide`.
    #[serde(default)]
    pub priority: i64,
}

/// A row of a Table.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Row {
    /// Its cells, one per column.
    #[serde(default)]
    pub cells: Vec<Value>,
}

/// The rows of `tables`, each labelled with its namespace, as one table in the order given.
/// The columns are the first table's that has any: they are the kind's, the same in every
/// namespace.
pub fn render(tables: &[(String, Table)], namespace_column: bool, wide: bool) -> String {
    let columns: &[Column] =
        tables.iter().map(|(_, t)| &t.column_definitions).find(|c| !c.is_empty()).map_or(&[], Vec::as_slice);
    let shown: Vec<usize> = (0..columns.len()).filter(|&i| wide || columns[i].priority == 0).collect();
    let mut header: Vec<String> = shown.iter().map(|&i| columns[i].name.to_uppercase()).collect();
    if namespace_column {
        header.insert(0, "NAMESPACE".into());
    }
    let mut lines = vec![header];
    for (ns, table) in tables {
        for row in &table.rows {
            let mut line: Vec<String> =
                shown.iter().map(|&i| row.cells.get(i).map_or(String::new(), cell)).collect();
            if namespace_column {
                line.insert(0, ns.clone());
            }
            lines.push(line);
        }
    }
    output::kubectl_columns(&lines)
}

/// A cell as kubectl prints it: text up to its first line break (then `...`), anything else as
/// Go's `fmt.Sprint` would (`<nil>` for null).
fn cell(value: &Value) -> String {
    match value {
        Value::String(s) => match s.find(['\n', '\r', '\x0c']) {
            Some(end) => format!("{}...", &s[..end]),
            None => s.clone(),
        },
        Value::Null => "<nil>".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A pods Table as kube-apiserver sends it (two priority-1 columns for -o wide).
    fn pods(names: &[&str]) -> Table {
        serde_json::from_value(json!({
            "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": "1"},
            "columnDefinitions": [
                {"name": "Name", "type": "string", "format": "name", "priority": 0},
                {"name": "Ready", "type": "string", "priority": 0},
                {"name": "Restarts", "type": "string", "priority": 0},
                {"name": "IP", "type": "string", "priority": 1},
                {"name": "Node", "type": "string", "priority": 1},
            ],
            "rows": names.iter().map(|n| json!({"cells": [n, "0/1", 0, null, "<none>"], "object": {}})).collect::<Vec<_>>(),
        }))
        .unwrap()
    }

    #[test]
    fn tables_of_several_namespaces_print_as_one() {
        let empty = Table::default();
        let tables = [
            ("team-a".into(), pods(&["web-1", "web-2"])),
            ("team-a-dev".into(), empty),
            ("x".into(), pods(&["db"])),
        ];
        assert_eq!(
            render(&tables, true, false),
            "NAMESPACE   NAME    READY   RESTARTS\n\
             team-a      web-1   0/1     0\n\
             team-a      web-2   0/1     0\n\
             x           db      0/1     0\n"
        );
        assert_eq!(
            render(&tables[2..], false, true),
            "NAME   READY   RESTARTS   IP      NODE\n\
             db     0/1     0          <nil>   <none>\n"
        );
    }

    #[test]
    fn the_columns_come_from_a_table_that_has_them() {
        let no_columns = Table { column_definitions: vec![], rows: vec![] };
        let out = render(&[("a".into(), no_columns), ("b".into(), pods(&["p"]))], true, false);
        assert!(out.starts_with("NAMESPACE   NAME   READY   RESTARTS\nb "), "{out}");
    }

    #[test]
    fn a_table_is_asked_for_without_its_objects() {
        let list = http::Request::get("/api/v1/namespaces/a/pods?&labelSelector=x%3Dy").body(vec![]).unwrap();
        let list = request(list).unwrap();
        assert_eq!(list.uri(), "/api/v1/namespaces/a/pods?&labelSelector=x%3Dy&includeObject=None");
        assert_eq!(list.headers()[http::header::ACCEPT], ACCEPT);
        let get = request(http::Request::get("/api/v1/namespaces/a").body(vec![]).unwrap()).unwrap();
        assert_eq!(get.uri(), "/api/v1/namespaces/a?includeObject=None");
    }

    #[test]
    fn cells_as_kubectl_prints_them() {
        assert_eq!(cell(&json!("two\nlines")), "two...");
        assert_eq!(cell(&json!(3)), "3");
        assert_eq!(cell(&json!(true)), "true");
        assert_eq!(cell(&Value::Null), "<nil>");
        assert_eq!(cell(&json!("plain")), "plain");
    }
}
