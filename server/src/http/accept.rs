//! Content negotiation: picks the representation an `Accept` header prefers, with q-values and
//! wildcards as RFC 9110 section 12.5.1 defines them.
//!
//! Each offered media type gets the quality of the most specific range that matches it
//! (`type/subtype` over `type/*` over `*/*`); `q=0` rules a type out. The offered type with the
//! highest quality wins, and ties go to the server's order of preference. A missing or empty
//! header accepts the first offer.

use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::header::ACCEPT;
use axum::http::request::Parts;
use strata_openapi::ErrorCode;

use super::error::ApiError;

/// One media range of an `Accept` header.
#[derive(Debug, Clone, PartialEq)]
struct MediaRange {
    kind: String,
    subtype: String,
    quality: f32,
}

impl MediaRange {
    /// How specifically this range matches `kind/subtype`: 2 exact, 1 `type/*`, 0 `*/*`.
    fn specificity(&self, kind: &str, subtype: &str) -> Option<u8> {
        match (self.kind.as_str(), self.subtype.as_str()) {
            ("*", "*") => Some(0),
            (k, "*") if k == kind => Some(1),
            (k, s) if k == kind && s == subtype => Some(2),
            _ => None,
        }
    }
}

/// Parses the ranges of an `Accept` value; unparseable elements are ignored (as browsers and
/// proxies send odd values, and refusing them helps nobody), a bad q-value counts as 1.
fn parse(accept: &str) -> Vec<MediaRange> {
    accept
        .split(',')
        .filter_map(|element| {
            let mut parts = element.split(';');
            let media = parts.next()?.trim().to_ascii_lowercase();
            let (kind, subtype) = media.split_once('/')?;
            if kind.is_empty() || subtype.is_empty() {
                return None;
            }
            let mut quality = 1.0;
            for parameter in parts {
                if let Some((name, value)) = parameter.split_once('=')
                    && name.trim().eq_ignore_ascii_case("q")
                {
                    quality = value.trim().parse::<f32>().unwrap_or(1.0).clamp(0.0, 1.0);
                }
            }
            Some(MediaRange {
                kind: kind.trim().to_string(),
                subtype: subtype.trim().to_string(),
                quality,
            })
        })
        .collect()
}

/// The quality `ranges` give `media` (`type/subtype`), from the most specific matching range.
fn quality(ranges: &[MediaRange], media: &str) -> f32 {
    let (kind, subtype) = media.split_once('/').unwrap_or((media, ""));
    ranges
        .iter()
        .filter_map(|range| range.specificity(kind, subtype).map(|s| (s, range.quality)))
        .max_by(|a, b| a.0.cmp(&b.0))
        .map_or(0.0, |(_, quality)| quality)
}

/// The index in `offers` (the server's preference order) of the representation to send.
///
/// # Errors
/// 406 `not_acceptable` when the header rules out every offer.
pub fn negotiate(headers: &HeaderMap, offers: &[&str]) -> Result<usize, ApiError> {
    let accept = headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(",");
    if accept.trim().is_empty() {
        return Ok(0);
    }
    let ranges = parse(&accept);
    if ranges.is_empty() {
        return Ok(0);
    }
    let mut best: Option<(usize, f32)> = None;
    for (index, offer) in offers.iter().enumerate() {
        let q = quality(&ranges, offer);
        if q > 0.0 && best.is_none_or(|(_, best_q)| q > best_q) {
            best = Some((index, q));
        }
    }
    best.map(|(index, _)| index).ok_or_else(|| {
        ApiError::new(
            ErrorCode::NotAcceptable,
            format!("Accept must allow one of {}", offers.join(", ")),
        )
    })
}

/// The representations an endpoint offers, in the server's order of preference (ties in
/// `Accept` go to the earlier one); several media types may name one representation.
pub trait Offers: Copy + Send + Sync + 'static {
    /// Media type and representation, most preferred first.
    const OFFERS: &'static [(&'static str, Self)];
}

/// Extracts the representation the request's `Accept` prefers among `T`'s offers, or answers
/// 406 `not_acceptable`, so a handler receives a decided format instead of a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted<T>(pub T);

impl<S: Send + Sync, T: Offers> FromRequestParts<S> for Accepted<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let media: Vec<&str> = T::OFFERS.iter().map(|(media, _)| *media).collect();
        let index = negotiate(&parts.headers, &media)?;
        T::OFFERS
            .get(index)
            .or(T::OFFERS.first())
            .map(|(_, offer)| Accepted(*offer))
            .ok_or_else(|| ApiError::new(ErrorCode::NotAcceptable, "nothing to offer"))
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    const OFFERS: &[&str] = &[
        "application/json",
        "application/x-ndjson",
        "text/event-stream",
    ];

    fn pick(accept: &str) -> Result<usize, ErrorCode> {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_str(accept).unwrap());
        negotiate(&headers, OFFERS).map_err(|e| e.code())
    }

    #[test]
    fn a_low_q_value_loses_to_a_later_type() {
        assert_eq!(pick("text/event-stream;q=0.1, application/json"), Ok(0));
        assert_eq!(pick("application/json;q=0.5, text/event-stream"), Ok(2));
    }

    #[test]
    fn wildcards_and_ties_follow_the_server_order() {
        assert_eq!(pick("*/*"), Ok(0));
        assert_eq!(pick("text/*"), Ok(2));
        assert_eq!(pick("application/x-ndjson, application/json"), Ok(0));
        assert_eq!(pick("text/html, */*;q=0.1"), Ok(0));
    }

    #[test]
    fn the_most_specific_range_decides_and_q_zero_rules_out() {
        assert_eq!(pick("application/*;q=0.2, application/x-ndjson"), Ok(1));
        assert_eq!(pick("*/*, application/json;q=0"), Ok(1));
        assert_eq!(pick("text/html"), Err(ErrorCode::NotAcceptable));
        assert_eq!(
            pick("application/json;q=0, */*;q=0"),
            Err(ErrorCode::NotAcceptable)
        );
    }

    #[test]
    fn a_missing_header_or_garbage_accepts_the_first_offer() {
        assert_eq!(
            negotiate(&HeaderMap::new(), OFFERS).map_err(|e| e.code()),
            Ok(0)
        );
        assert_eq!(pick("garbage"), Ok(0));
        assert_eq!(pick("application/json;q=abc"), Ok(0));
    }
}
