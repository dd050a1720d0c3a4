//! A document's table as columns: the rows of one of its arrays (`steps`,
//! `findings`, ...) read back into typed columns, so a front end gets numpy
//! arrays without building a Python object per row.
//!
//! Invariants: every row must be an object holding every named member, of
//! the named kind (an integer for `Int`, any number for `Float`, a string for
//! `Text`); the first that is not is an error naming the table, row and
//! member. Values are the document's own (already rounded as it stores them).

use crate::error::{Error, Result};
use crate::json::{JsonLimits, Node, Value, parse};

/// The kind of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// 64-bit integers.
    Int,
    /// 64-bit floats (integers widen).
    Float,
    /// Strings.
    Text,
}

/// One column's values.
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    /// Integers.
    Int(Vec<i64>),
    /// Floats.
    Float(Vec<f64>),
    /// Strings.
    Text(Vec<String>),
}

/// The columns `names` of the array `table` of the JSON `document`, in the
/// order asked.
///
/// # Errors
/// Not JSON, no such array, or a row member missing or of another kind.
pub fn table_columns(
    document: &[u8],
    table: &str,
    names: &[(String, Kind)],
) -> Result<Vec<Column>> {
    let doc = parse(document, JsonLimits::default())?;
    let rows = doc
        .root()
        .and_then(|r| r.get(table))
        .filter(Value::is_array)
        .ok_or_else(|| Error::invalid(format!("the document has no table '{table}'")))?;
    let n = rows.len().unwrap_or(0);
    let mut out: Vec<Column> = names
        .iter()
        .map(|(_, kind)| match kind {
            Kind::Int => Column::Int(Vec::with_capacity(n)),
            Kind::Float => Column::Float(Vec::with_capacity(n)),
            Kind::Text => Column::Text(Vec::with_capacity(n)),
        })
        .collect();
    for (i, row) in rows.elements().enumerate() {
        for ((name, _), column) in names.iter().zip(out.iter_mut()) {
            let value = row.get(name).map(|v| v.node());
            let ok = match (column, value) {
                (Column::Int(c), Some(Node::Int(x))) => {
                    c.push(x);
                    true
                }
                (Column::Float(c), Some(Node::Int(x))) => {
                    c.push(x as f64);
                    true
                }
                (Column::Float(c), Some(Node::Float { value, .. })) => {
                    c.push(value);
                    true
                }
                (Column::Text(c), Some(_)) => match row.get(name).and_then(|v| v.as_str()) {
                    Some(s) => {
                        c.push(s.to_owned());
                        true
                    }
                    None => false,
                },
                _ => false,
            };
            if !ok {
                return Err(Error::invalid(format!(
                    "{table}[{i}].{name} is missing or not of its column's kind"
                )));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_become_columns() {
        let doc = br#"{"steps":[{"step":1,"d":2.5,"k":"a"},{"step":2,"d":3,"k":"b"}]}"#;
        let names = [
            ("step".to_owned(), Kind::Int),
            ("d".to_owned(), Kind::Float),
            ("k".to_owned(), Kind::Text),
        ];
        let cols = table_columns(doc, "steps", &names).unwrap();
        assert_eq!(cols[0], Column::Int(vec![1, 2]));
        assert_eq!(cols[1], Column::Float(vec![2.5, 3.0]));
        assert_eq!(cols[2], Column::Text(vec!["a".into(), "b".into()]));
        let e = table_columns(br#"{"steps":[{"step":1.5}]}"#, "steps", &names[..1]).unwrap_err();
        assert_eq!(
            e.message(),
            "steps[0].step is missing or not of its column's kind"
        );
        assert!(table_columns(b"{}", "steps", &names).is_err());
    }
}
