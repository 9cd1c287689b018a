//! Parse errors in the API's words: serde and axum name Rust types (`expected u64`,
//! `to a \`u32\``, `expected struct ProduceRequest`), which a client never sees anywhere else.
//! The rest of their message (where, what was found) stays.

/// Rust integer and float types, and what the API calls them (the ranges the OpenAPI document
/// gives). Longer names first, so `u16` is not read inside `u1…`.
const TYPES: &[(&str, &str)] = &[
    ("usize", "a non-negative integer"),
    ("u64", "a non-negative integer"),
    ("u32", "an integer from 0 to 4294967295"),
    ("u16", "an integer from 0 to 65535"),
    ("u8", "an integer from 0 to 255"),
    ("i64", "an integer"),
    ("i32", "an integer from -2147483648 to 2147483647"),
    ("i16", "an integer from -32768 to 32767"),
    ("f64", "a number"),
];

/// Whole phrases of Rust's integer parser and of the extractors.
const PHRASES: &[(&str, &str)] = &[
    ("Failed to deserialize query string: ", "invalid query: "),
    (
        "Failed to deserialize the JSON body into the target type: ",
        "invalid JSON body: ",
    ),
    ("Invalid URL: ", "invalid path: "),
    ("Cannot parse", "cannot parse"),
    (
        "cannot parse integer from empty string",
        "an empty value where a number is expected",
    ),
    (
        "invalid digit found in string",
        "not a number (digits only)",
    ),
    (
        "number too large to fit in target type",
        "a number out of range",
    ),
    (
        "number too small to fit in target type",
        "a number out of range",
    ),
    ("expected a sequence", "expected an array"),
    ("expected a map", "expected an object"),
];

/// `message` with Rust type names and parser phrases replaced by the API's words.
pub(crate) fn plain(message: &str) -> String {
    let mut text = message.to_string();
    for (from, to) in PHRASES {
        text = text.replace(from, to);
    }
    for (rust, words) in TYPES {
        text = text.replace(&format!("expected {rust}"), &format!("expected {words}"));
        text = text.replace(&format!("to a `{rust}`"), &format!("as {words}"));
    }
    without_struct_names(&text)
}

/// `expected struct Name` (and `enum`) names a Rust type: say what JSON it is instead.
fn without_struct_names(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("expected struct ") {
        out.push_str(&rest[..at]);
        out.push_str("expected a JSON object");
        let after = &rest[at + "expected struct ".len()..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        rest = &after[name_len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::plain;

    #[test]
    fn rust_types_become_the_apis_words_and_the_rest_stays() {
        for (rust, plain_text) in [
            (
                "invalid value: integer `-1`, expected u64 at line 1 column 12",
                "invalid value: integer `-1`, expected a non-negative integer at line 1 column 12",
            ),
            (
                "invalid type: string \"now\", expected i64",
                "invalid type: string \"now\", expected an integer",
            ),
            (
                "Invalid URL: Cannot parse value at index 1 with value `x` to a `u32`",
                "invalid path: cannot parse value at index 1 with value `x` as an integer from 0 to 4294967295",
            ),
            (
                "Failed to deserialize query string: offset: invalid digit found in string",
                "invalid query: offset: not a number (digits only)",
            ),
            (
                "Failed to deserialize query string: max_bytes: cannot parse integer from empty string",
                "invalid query: max_bytes: an empty value where a number is expected",
            ),
            (
                "invalid type: sequence, expected struct ProduceRequest at line 1",
                "invalid type: sequence, expected a JSON object at line 1",
            ),
            ("missing field `records`", "missing field `records`"),
        ] {
            assert_eq!(plain(rust), plain_text);
        }
    }
}
