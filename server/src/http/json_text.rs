//! `json` values kept as the producer wrote them.
//!
//! A `json` value is stored as its own text with the whitespace between tokens removed, and a
//! fetch answers that text. Parsing it into a `serde_json::Value` and writing it back, as
//! Strata once did, changed the producer's data: an integer past 64 bits came back as a float
//! (`123456789012345678901234567890` as `1.2345678901234568e+29`), `1.10` as `1.1`, and object
//! keys sorted, which breaks a signature computed over the document.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use strata_openapi::JsonText;

/// The bytes of JSON text that are outside its strings, with their positions: string
/// contents and their quotes are left out, so what remains is structure, numbers, literals and
/// whitespace.
pub(crate) fn outside_strings(text: &[u8]) -> impl Iterator<Item = (usize, u8)> + '_ {
    let (mut in_string, mut escaped) = (false, false);
    text.iter().enumerate().filter_map(move |(index, &byte)| {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            return None;
        }
        if byte == b'"' {
            in_string = true;
            return None;
        }
        Some((index, byte))
    })
}

/// Appends `text`, one valid JSON value, to `out` without the whitespace outside strings.
pub(crate) fn append_compact(text: &[u8], out: &mut Vec<u8>) {
    out.reserve(text.len());
    let mut run_start = 0;
    for (index, byte) in outside_strings(text) {
        if matches!(byte, b' ' | b'\t' | b'\n' | b'\r') {
            out.extend_from_slice(&text[run_start..index]);
            run_start = index + 1;
        }
    }
    out.extend_from_slice(&text[run_start..]);
}

/// Checks that `text` is one JSON value a JSON reader can hold.
///
/// This is serde_json's own full parse, values discarded: besides the syntax it refuses a
/// number beyond a double's range (`1e400`), which most readers (serde_json, Python's
/// `json`, JavaScript) cannot take either, so storing one would break every consumer's fetch.
///
/// # Errors
/// serde_json's error, naming the line and column.
pub(crate) fn check(text: &[u8]) -> Result<(), serde_json::Error> {
    serde_json::from_slice::<Checked>(text).map(|_| ())
}

/// serde_json's message for `error`, with what its terse escape errors mean. A lone surrogate
/// (`"\ud800"`, which some encoders write for text that is not Unicode) is reported by
/// serde_json as "unexpected end of hex escape", which names neither the surrogate nor the rule.
pub(crate) fn describe(error: &serde_json::Error) -> String {
    let message = error.to_string();
    let escape = [
        "hex escape",
        "surrogate",
        "unicode code point",
        "invalid escape",
    ];
    if escape.iter().any(|e| message.contains(e)) {
        format!(
            "{message} (a \\u escape takes four hex digits, and a surrogate \\ud800-\\udfff \
             only comes as a high-low pair: JSON text must be Unicode)"
        )
    } else {
        message
    }
}

/// A stored value as the `json` format answers it: its compact text, or `None` when the bytes
/// are not such a value (then fetch answers them as base64).
pub(crate) fn stored_json(bytes: &[u8]) -> Option<JsonText> {
    check(bytes).ok()?;
    let mut compact = Vec::with_capacity(bytes.len());
    append_compact(bytes, &mut compact);
    let text = String::from_utf8(compact).ok()?;
    RawValue::from_string(text).ok().map(JsonText::new)
}

/// Any JSON value, read through `deserialize_any` so numbers are parsed (and range-checked),
/// unlike `IgnoredAny`, which skips them by their syntax alone.
struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> Visitor<'de> for CheckedVisitor {
    type Value = Checked;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
        while seq.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
        while map.next_entry::<IgnoredAny, Checked>()?.is_some() {}
        Ok(Checked)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    fn compact(text: &str) -> String {
        let mut out = Vec::new();
        append_compact(text.as_bytes(), &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn whitespace_between_tokens_goes_and_everything_else_stays() {
        let text = "{ \"z\" : [1 , 2.50,\t1e2 ],\n \"a b\\\" \\\\\" : \"x \\u0020 y\", \"n\": 123456789012345678901234567890 }";
        assert_eq!(
            compact(text),
            r#"{"z":[1,2.50,1e2],"a b\" \\":"x \u0020 y","n":123456789012345678901234567890}"#
        );
    }

    #[test]
    fn numbers_past_a_double_are_refused_and_long_integers_are_not() {
        assert!(check(b"1e400").is_err());
        assert!(check(b"{\"a\": [-1e999]}").is_err());
        assert!(check(b"123456789012345678901234567890").is_ok());
        assert!(check(b"{\"a\": 1} x").is_err());
        assert!(check(b"{\"a\": 1,}").is_err());
    }

    #[test]
    fn stored_bytes_answer_compact_or_not_at_all() {
        let answered = stored_json(b" {\"b\": 1, \"a\": 1.10} ").unwrap();
        assert_eq!(answered.get(), r#"{"b":1,"a":1.10}"#);
        assert!(stored_json(b"not json").is_none());
        assert!(stored_json(&[0xff, 0xfe]).is_none());
        assert!(stored_json(b"\"\xff\"").is_none());
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "[ a-z\"\\\\\u{e9}\n]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map("[a-z \"]{0,4}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Pretty-printed or compact, a value compacts to serde_json's own compact text, so
        /// nothing but whitespace outside strings is ever dropped.
        #[test]
        fn compacting_pretty_text_gives_the_compact_text(value in json_value()) {
            let pretty = serde_json::to_string_pretty(&value).unwrap();
            let expected = serde_json::to_string(&value).unwrap();
            prop_assert_eq!(compact(&pretty), expected.clone());
            prop_assert_eq!(compact(&expected), expected);
            prop_assert!(check(pretty.as_bytes()).is_ok());
        }
    }

    #[test]
    fn a_value_built_from_json_matches_its_text() {
        let value = json!({"k": [1, "two"]});
        assert_eq!(JsonText::from(&value).get(), r#"{"k":[1,"two"]}"#);
        assert_eq!(JsonText::string("a\"b").get(), r#""a\"b""#);
    }
}
