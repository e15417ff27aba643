//! What CloudStack accepts in a string parameter, and how to make a text fit before it is
//! sent. Pure functions; the wording of what is sent lives in `wording`.
//!
//! CloudStack refuses a request, before the command runs, when:
//! - a `STRING` parameter is longer than its `@Parameter(length = …)`, 255 when not declared
//!   (`ParamProcessWorker`, error 431). The length is Java's `String.length()`: UTF-16 code
//!   units, so a character outside the Basic Multilingual Plane counts 2;
//! - any value holds an ASCII control character other than LF and CR (`ApiServer`, 431).
//!
//! A text that does not fit is never sent as it is: a refusal is for good, so the
//! notification would never go out.

/// The length of a `STRING` parameter that declares none (`@Parameter.length` default).
pub const DEFAULT_STRING_LENGTH: usize = 255;

/// `generateAlert` `description` (`GenerateAlertCmd`, `length = 999`).
pub const ALERT_DESCRIPTION_LENGTH: usize = 999;

/// `addAnnotation` `annotation` (`AddAnnotationCmd`, no declared length).
pub const ANNOTATION_LENGTH: usize = DEFAULT_STRING_LENGTH;

/// `listAlerts` / `listAnnotations` `keyword` (`BaseListCmd`, no declared length).
pub const KEYWORD_LENGTH: usize = DEFAULT_STRING_LENGTH;

/// The length CloudStack measures: UTF-16 code units, as Java's `String.length()`.
pub fn java_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// Whether CloudStack refuses a value holding `c` (`ApiServer`: 0x00–0x1F except LF and CR,
/// and 0x7F).
pub fn is_refused_control(c: char) -> bool {
    (c.is_ascii_control() && c != '\n' && c != '\r') || c == '\u{7f}'
}

/// A text for one line of a CloudStack alert or annotation: every control character (C0,
/// DEL and C1, line breaks included) becomes a visible `\xNN` / `\u{NNNN}` escape, and a
/// character outside the Basic Multilingual Plane becomes U+FFFD: CloudStack's database
/// tables are `utf8` (three bytes at most) and refuse four-byte characters.
pub fn one_line(s: &str) -> String {
    crate::base::untrusted::controls_escaped(s)
        .chars()
        .map(|c| if c.len_utf16() > 1 { '\u{fffd}' } else { c })
        .collect()
}

/// `s` cut to at most `max` UTF-16 units, ending in `…` when cut. Never splits a character.
pub fn fit(s: &str, max: usize) -> String {
    if java_len(s) <= max {
        return s.to_string();
    }
    let budget = max.saturating_sub(1);
    let mut used = 0;
    let mut out = String::new();
    for c in s.chars() {
        let n = c.len_utf16();
        if used + n > budget {
            break;
        }
        used += n;
        out.push(c);
    }
    if max > 0 {
        out.push('…');
    }
    out
}

/// `body`, cut so that `body + " " + tail` fits in `max` units, then the tail. The tail (a
/// marker) is kept whole; it must itself fit.
pub fn fit_with_tail(body: &str, tail: &str, max: usize) -> String {
    let room = max.saturating_sub(java_len(tail) + 1);
    format!("{} {tail}", fit(body, room))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_len_counts_utf16_units() {
        assert_eq!(java_len("abc"), 3);
        assert_eq!(java_len("é"), 1);
        assert_eq!(java_len("€"), 1);
        assert_eq!(java_len("😀"), 2);
        assert_eq!(java_len("a😀b"), 4);
    }

    #[test]
    fn refused_controls_are_those_of_apiserver() {
        let refused: Vec<u32> = (0u32..0x80)
            .filter(|&n| is_refused_control(char::from_u32(n).unwrap()))
            .collect();
        let mut expected: Vec<u32> = (0..0x20).filter(|&n| n != 0x0a && n != 0x0d).collect();
        expected.push(0x7f);
        assert_eq!(refused, expected);
        assert!(!is_refused_control('\u{85}'));
    }

    #[test]
    fn one_line_escapes_controls_and_replaces_astral_characters() {
        // Fitted again before it is sent, a text must not change.
        let once = one_line("a\\b\n\u{1b}😀");
        assert_eq!(one_line(&once), once);
        assert_eq!(
            one_line("web\n\x1b[31mred\t\u{7f}\u{9b}"),
            "web\\x0a\\x1b[31mred\\x09\\x7f\\x9b"
        );
        assert_eq!(one_line("k8s 😀 ü"), "k8s \u{fffd} ü");
        assert!(one_line("a\u{0}b").chars().all(|c| !is_refused_control(c)));
    }

    #[test]
    fn fit_cuts_on_character_boundaries() {
        assert_eq!(fit("abcdef", 6), "abcdef");
        assert_eq!(fit("abcdef", 5), "abcd…");
        assert_eq!(fit("😀😀😀", 4), "😀…");
        assert_eq!(java_len(&fit("😀😀😀", 4)), 3);
        assert_eq!(fit("ab", 0), "");
        for max in 0..20 {
            assert!(java_len(&fit("a😀b😀c😀d😀e", max)) <= max);
        }
    }

    #[test]
    fn fit_with_tail_keeps_the_tail() {
        let t = fit_with_tail(&"x".repeat(300), "[tail]", 255);
        assert_eq!(java_len(&t), 255);
        assert!(t.ends_with("… [tail]"));
        assert_eq!(fit_with_tail("short", "[tail]", 255), "short [tail]");
    }
}
