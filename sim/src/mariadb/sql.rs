//! SQL text: string and date literals, and rows batched into `INSERT` statements.

use std::fmt::Write as _;

use crate::time::SimTime;

/// Rows per `INSERT` written by [`PrivateMariaDb::mirror`](super::PrivateMariaDb::mirror): well
/// under the client's and the server's 16 MiB `max_allowed_packet` with any realistic name lengths.
const ROWS_PER_INSERT: usize = 1000;

/// `INSERT` statements of `head` for `count` rows, each written by `write_row` (its index,
/// id - 1).
pub(super) fn rows(
    count: usize,
    head: &str,
    mut write_row: impl FnMut(&mut String, usize),
) -> String {
    let mut out = String::new();
    let mut inserts = Inserts::new(head);
    let mut row = String::new();
    for i in 0..count {
        row.clear();
        write_row(&mut row, i);
        inserts.push(&mut out, &row);
    }
    inserts.finish(&mut out);
    out
}

/// `INSERT` statements of at most [`ROWS_PER_INSERT`] rows each, one row a line.
struct Inserts<'a> {
    head: &'a str,
    in_statement: usize,
}

impl<'a> Inserts<'a> {
    fn new(head: &'a str) -> Self {
        Inserts {
            head,
            in_statement: 0,
        }
    }

    fn push(&mut self, sql: &mut String, row: &str) {
        if self.in_statement == ROWS_PER_INSERT {
            self.finish(sql);
        }
        sql.push_str(if self.in_statement == 0 {
            self.head
        } else {
            ",\n"
        });
        sql.push_str(row);
        self.in_statement += 1;
    }

    fn finish(&mut self, sql: &mut String) {
        if self.in_statement > 0 {
            sql.push_str(";\n");
            self.in_statement = 0;
        }
    }
}

/// A string literal for the server's default `sql_mode` (backslash escapes on): quotes and
/// backslashes escaped, and the characters the client or the line reader could trip on.
pub(super) fn quote(sql: &mut String, text: &str) {
    sql.push('\'');
    for c in text.chars() {
        match c {
            '\'' => sql.push_str("\\'"),
            '\\' => sql.push_str("\\\\"),
            '\0' => sql.push_str("\\0"),
            '\n' => sql.push_str("\\n"),
            '\r' => sql.push_str("\\r"),
            '\u{1a}' => sql.push_str("\\Z"),
            c => sql.push(c),
        }
    }
    sql.push('\'');
}

pub(super) fn quoted(text: &str) -> String {
    let mut s = String::new();
    quote(&mut s, text);
    s
}

/// A `DATETIME` literal in UTC, as CloudStack stores dates: `'2024-06-05 07:51:22'`.
pub(super) fn datetime(sql: &mut String, t: SimTime) {
    let text = t.to_cloudstack();
    let _ = write!(sql, "'{} {}'", &text[..10], &text[11..19]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_literals_escape_quotes_backslashes_and_control_characters() {
        assert_eq!(quoted("plain"), "'plain'");
        assert_eq!(
            quoted("it's a \\ \"test\"\n\r\0\u{1a}; 🚀"),
            "'it\\'s a \\\\ \"test\"\\n\\r\\0\\Z; 🚀'"
        );
    }

    #[test]
    fn inserts_are_cut_every_thousand_rows() {
        let mut sql = String::new();
        let mut inserts = Inserts::new("INSERT INTO t VALUES\n");
        for n in 0..2001 {
            inserts.push(&mut sql, &format!("({n})"));
        }
        inserts.finish(&mut sql);
        assert_eq!(sql.matches("INSERT INTO t VALUES").count(), 3);
        assert_eq!(sql.matches(";\n").count(), 3);
        assert!(sql.starts_with("INSERT INTO t VALUES\n(0),\n(1),\n"));
        assert!(sql.contains("(999);\nINSERT INTO t VALUES\n(1000),\n"));
        assert!(sql.ends_with("INSERT INTO t VALUES\n(2000);\n"));

        let mut empty = String::new();
        Inserts::new("INSERT INTO t VALUES\n").finish(&mut empty);
        assert_eq!(empty, "");
    }
}
