//! Extractors that turn every kind of bad input into our error body: `ApiJson`, `ApiQuery` and
//! `ApiPath` wrap axum's, with rejections mapped to `bad_json`, `bad_query`, `bad_path`,
//! `unsupported_media_type` and `request_too_large`. Handlers never see axum's plain-text errors.

use axum::extract::FromRequest;
use axum::extract::FromRequestParts;
use axum::extract::rejection::{BytesRejection, JsonRejection, PathRejection, QueryRejection};
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use serde::de::DeserializeOwned;
use serde_json::Value;
use strata_openapi::ErrorCode;

use super::error::ApiError;

/// A JSON body: `Content-Type: application/json` (or `+json`), a JSON object, decoded into
/// `T`. Integral floats (`5.0`) count as integers, since JSON has one number type and JSON
/// Schema's `integer` matches them.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        let ApiJsonBytes(body) = ApiJsonBytes::from_request(request, state).await?;
        parse_json(&body).map(ApiJson)
    }
}

/// The bytes of a JSON body, not yet parsed (for operations that also count its size).
#[derive(Debug)]
pub struct ApiJsonBytes(pub axum::body::Bytes);

impl<S: Send + Sync> FromRequest<S> for ApiJsonBytes {
    type Rejection = ApiError;

    async fn from_request(request: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        let is_json = request
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|m| m.trim().to_ascii_lowercase())
            .is_some_and(|m| m == "application/json" || m.ends_with("+json"));
        if !is_json {
            return Err(ApiError::new(
                ErrorCode::UnsupportedMediaType,
                "expected a JSON body with Content-Type: application/json",
            ));
        }
        axum::body::Bytes::from_request(request, state)
            .await
            .map(ApiJsonBytes)
            .map_err(ApiError::from)
    }
}

/// Decodes a JSON object body into `T` (see [`ApiJson`]).
///
/// # Errors
/// 400 `bad_json` when the body is not a JSON object of the expected shape.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    parse_json_except(body, |_| {})
}

/// [`parse_json`], with the int64 rule held only to what `user_data` leaves of the body: a
/// record's JSON value is the producer's data, where an id above int64 is as valid as any
/// other JSON number, while the API's own numbers (offsets, timestamps) are Kafka int64s.
///
/// # Errors
/// As [`parse_json`].
pub fn parse_json_except<T: DeserializeOwned>(
    body: &[u8],
    user_data: impl Fn(&mut Value),
) -> Result<T, ApiError> {
    let bad = |e: &serde_json::Error| {
        // serde_json names bytes that are not UTF-8 "an invalid unicode code point", which
        // reads like a bad escape; say what is wrong with the body instead.
        if let Err(not_text) = std::str::from_utf8(body) {
            return ApiError::new(
                ErrorCode::BadJson,
                format!(
                    "invalid JSON body: byte {} is not UTF-8, and JSON text must be; send \
                     binary values as base64 (value_format=base64)",
                    not_text.valid_up_to()
                ),
            );
        }
        ApiError::new(
            ErrorCode::BadJson,
            format!(
                "invalid JSON body: {}",
                super::plain_errors::plain(&super::json_text::describe(e))
            ),
        )
    };
    // serde would also read a struct from an array of its fields: a body is an object.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::new(
            ErrorCode::BadJson,
            "invalid JSON body: the body must be a JSON object",
        ));
    }
    if has_long_digit_run(body) {
        let mut value: Value = serde_json::from_slice(body).map_err(|e| bad(&e))?;
        user_data(&mut value);
        if exceeds_int64(&value) {
            return Err(ApiError::new(
                ErrorCode::BadJson,
                "invalid JSON body: integers are at most 9223372036854775807 (int64)",
            ));
        }
    }
    match serde_json::from_slice::<T>(body) {
        Ok(value) => Ok(value),
        Err(first) => {
            let Ok(mut value) = serde_json::from_slice::<Value>(body) else {
                return Err(bad(&first));
            };
            if !integral_floats_to_integers(&mut value) {
                return Err(bad(&first));
            }
            serde_json::from_value(value).map_err(|e| bad(&e))
        }
    }
}

/// Whether `text` is a decimal integer above `i64::MAX`.
fn above_int64(text: &str) -> bool {
    let digits = text.strip_prefix('+').unwrap_or(text);
    digits.len() >= 19
        && digits.bytes().all(|b| b.is_ascii_digit())
        && digits
            .parse::<u128>()
            .map_or(true, |n| n > i64::MAX as u128)
}

/// Whether `body` holds 19 or more digits in a row: only then can a number exceed int64, so
/// only then is the body parsed twice.
///
/// It runs over every JSON body, megabytes of base64 on produce, so it looks at 8 bytes at a
/// time: a run of 19 digits always covers one whole aligned 8-byte block, and only around such
/// a block are bytes counted one by one.
pub fn has_long_digit_run(body: &[u8]) -> bool {
    const BLOCK: usize = 8;
    body.chunks_exact(BLOCK).enumerate().any(|(index, block)| {
        let mut word = [0u8; BLOCK];
        word.copy_from_slice(block);
        all_digits(u64::from_ne_bytes(word)) && {
            let start = (index * BLOCK).saturating_sub(LONG_RUN);
            let end = (index * BLOCK + BLOCK + LONG_RUN).min(body.len());
            body.get(start..end).is_some_and(digit_run_of_19)
        }
    })
}

/// Digits in a row that may exceed int64.
const LONG_RUN: usize = 19;

/// Whether all 8 bytes of `word` are ASCII digits: every byte is 0x3_ and adding 6 keeps it
/// 0x3_ (no byte carries into the next: each stays below 0x46).
fn all_digits(word: u64) -> bool {
    const HIGH: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    const THREES: u64 = 0x3030_3030_3030_3030;
    const SIXES: u64 = 0x0606_0606_0606_0606;
    word & HIGH == THREES && word.wrapping_add(SIXES) & HIGH == THREES
}

/// The plain count: whether `bytes` holds [`LONG_RUN`] digits in a row.
fn digit_run_of_19(bytes: &[u8]) -> bool {
    let mut run = 0;
    for byte in bytes {
        run = if byte.is_ascii_digit() { run + 1 } else { 0 };
        if run >= LONG_RUN {
            return true;
        }
    }
    false
}

/// Whether any number in `value` is an integer above `i64::MAX`.
fn exceeds_int64(value: &Value) -> bool {
    match value {
        Value::Number(number) => number.is_u64() && number.as_i64().is_none(),
        Value::Array(items) => items.iter().any(exceeds_int64),
        Value::Object(fields) => fields.values().any(exceeds_int64),
        _ => false,
    }
}

/// Rewrites every float with no fractional part (within the exactly representable range) as
/// an integer; returns whether it changed anything.
fn integral_floats_to_integers(value: &mut Value) -> bool {
    match value {
        Value::Number(number) if number.is_f64() => {
            let Some(float) = number.as_f64() else {
                return false;
            };
            if float.fract() != 0.0 || float.abs() >= i64::MAX as f64 {
                return false;
            }
            *value = if float < 0.0 {
                Value::from(float as i64)
            } else {
                Value::from(float as u64)
            };
            true
        }
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |changed, v| integral_floats_to_integers(v) | changed),
        Value::Object(fields) => fields
            .values_mut()
            .fold(false, |changed, v| integral_floats_to_integers(v) | changed),
        _ => false,
    }
}

/// Query parameters. Numbers above 2^63-1 are refused: every integer of the API is a Kafka
/// int64 at most (offsets, timestamps, durations), as the OpenAPI document says.
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        if let Some(pair) = query
            .split('&')
            .find(|pair| pair.split('=').nth(1).is_some_and(above_int64))
            .filter(|pair| is_numeric_field::<T>(query, pair))
        {
            return Err(ApiError::new(
                ErrorCode::BadQuery,
                format!("{pair}: integers are at most 9223372036854775807 (int64)"),
            ));
        }
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(value)| ApiQuery(value))
            .map_err(ApiError::from)
    }
}

/// Whether the parameter of `pair` (in `query`) is a number to `T`: the query does not parse
/// once that value is replaced by text. A name or an id made of digits is text, whatever its
/// length; only a number field is held to int64.
fn is_numeric_field<T: DeserializeOwned>(query: &str, pair: &str) -> bool {
    let name = pair.split('=').next().unwrap_or_default();
    let probe: String = query
        .split('&')
        .map(|p| {
            if p == pair {
                format!("{name}=x")
            } else {
                p.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("&");
    let parses = |q: &str| {
        format!("/?{q}")
            .parse::<axum::http::Uri>()
            .ok()
            .and_then(|uri| axum::extract::Query::<T>::try_from_uri(&uri).ok())
            .is_some()
    };
    !parses(&probe)
}

/// Path parameters.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        match rejection {
            JsonRejection::MissingJsonContentType(_) => ApiError::new(
                ErrorCode::UnsupportedMediaType,
                "expected a JSON body with Content-Type: application/json",
            ),
            JsonRejection::BytesRejection(bytes) => bytes.into(),
            other => ApiError::new(
                ErrorCode::BadJson,
                super::plain_errors::plain(&other.body_text()),
            ),
        }
    }
}

impl From<BytesRejection> for ApiError {
    fn from(rejection: BytesRejection) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                ErrorCode::RequestTooLarge,
                "request body exceeds max_request_bytes",
            )
        } else {
            ApiError::new(
                ErrorCode::BadJson,
                super::plain_errors::plain(&rejection.body_text()),
            )
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::new(
            ErrorCode::BadQuery,
            super::plain_errors::plain(&rejection.body_text()),
        )
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        ApiError::new(
            ErrorCode::BadPath,
            super::plain_errors::plain(&rejection.body_text()),
        )
    }
}

/// A raw body (size-limited like every body).
#[derive(Debug)]
pub struct ApiBytes(pub axum::body::Bytes);

impl<S: Send + Sync> FromRequest<S> for ApiBytes {
    type Rejection = ApiError;

    async fn from_request(request: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        axum::body::Bytes::from_request(request, state)
            .await
            .map(ApiBytes)
            .map_err(ApiError::from)
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Body {
        count: u32,
        nested: Option<Vec<u64>>,
    }

    proptest::proptest! {
        /// The block-wise scan finds exactly the runs the plain count finds.
        #[test]
        fn long_digit_runs_are_found_block_wise(
            body in proptest::collection::vec(
                proptest::prop_oneof![
                    9 => proptest::char::range('0', '9'),
                    1 => proptest::prop_oneof![proptest::strategy::Just('a'), proptest::strategy::Just(':'), proptest::strategy::Just('/')],
                ],
                0..120,
            ),
        ) {
            let body: Vec<u8> = body.into_iter().map(|c| c as u8).collect();
            proptest::prop_assert_eq!(has_long_digit_run(&body), digit_run_of_19(&body));
        }
    }

    #[test]
    fn every_byte_value_is_classified_as_a_digit_or_not() {
        for byte in 0..=u8::MAX {
            let word = u64::from_ne_bytes([b'5', b'5', b'5', byte, b'5', b'5', b'5', b'5']);
            assert_eq!(all_digits(word), byte.is_ascii_digit(), "byte {byte:#x}");
        }
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Query {
        name: Option<String>,
        offset: Option<u64>,
    }

    async fn query(uri: &str) -> Result<Query, ApiError> {
        let (mut parts, ()) = axum::http::Request::builder()
            .uri(uri)
            .body(())
            .unwrap()
            .into_parts();
        ApiQuery::<Query>::from_request_parts(&mut parts, &())
            .await
            .map(|ApiQuery(q)| q)
    }

    #[tokio::test]
    async fn only_number_fields_are_held_to_int64() {
        let digits = "99999999999999999999999";
        let named = query(&format!("/?name={digits}&offset=5")).await.unwrap();
        assert_eq!(named.name.as_deref(), Some(digits));
        assert_eq!(named.offset, Some(5));
        let refused = query(&format!("/?name=a&offset={digits}"))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), ErrorCode::BadQuery);
        assert!(
            refused.body().error.message.contains("int64"),
            "{refused:?}"
        );
        let above = query(&format!("/?offset={}", u64::MAX)).await.unwrap_err();
        assert!(above.body().error.message.contains("int64"), "{above:?}");
    }

    #[test]
    fn integral_floats_are_integers_and_fractions_are_not() {
        let body: Body = parse_json(br#"{"count": 3.0, "nested": [1.0, 2]}"#).unwrap();
        assert_eq!(
            body,
            Body {
                count: 3,
                nested: Some(vec![1, 2])
            }
        );
        for bad in [
            &br#"{"count": 3.5}"#[..],
            br#"{"count": -1.0}"#,
            br#"[3, null]"#,
            br#"  [3]"#,
            br#"{"count": 1e300}"#,
            br#"{"count": 1, "nested": [9223372036854775808]}"#,
            b"not json",
        ] {
            let error = parse_json::<Body>(bad).unwrap_err();
            assert_eq!(
                error.code(),
                ErrorCode::BadJson,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
