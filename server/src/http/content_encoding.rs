//! `Content-Encoding` of request bodies: `gzip` is decoded before any handler sees the body,
//! `identity` is the body itself, and any other coding is refused with 415 (RFC 9110 §15.5.16)
//! instead of being handed on as if it were plain, which turned a gzip JSON body into a
//! baffling `bad_json` and let a mislabelled body through.

use std::io::Read;

use axum::http::HeaderMap;
use axum::http::header::CONTENT_ENCODING;
use bytes::Bytes;
use strata_openapi::ErrorCode;

use super::error::ApiError;

/// The body as its handler must read it: decoded when it came gzip-encoded.
///
/// # Errors
/// 415 `unsupported_media_type` for a coding other than `gzip` or `identity`; 400
/// `bad_header` when the body is not the gzip data the header says; 413
/// `request_too_large` when it decodes to more than `limit` bytes (the limit holds for what
/// the handlers see, so a small compressed body cannot unpack into gigabytes).
pub fn decoded(headers: &HeaderMap, body: Bytes, limit: usize) -> Result<Bytes, ApiError> {
    let Some(value) = headers.get(CONTENT_ENCODING) else {
        return Ok(body);
    };
    let codings: Vec<String> = value
        .to_str()
        .unwrap_or("?")
        .split(',')
        .map(|c| c.trim().to_ascii_lowercase())
        .filter(|c| !c.is_empty() && c != "identity")
        .collect();
    match codings.as_slice() {
        [] => Ok(body),
        [gzip] if gzip == "gzip" || gzip == "x-gzip" => gunzip(&body, limit),
        _ => Err(ApiError::new(
            ErrorCode::UnsupportedMediaType,
            format!(
                "Content-Encoding {:?} is not supported: send gzip or identity",
                value.to_str().unwrap_or("(not text)")
            ),
        )),
    }
}

fn gunzip(body: &[u8], limit: usize) -> Result<Bytes, ApiError> {
    let mut out = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    flate2::read::MultiGzDecoder::new(body)
        .take(cap)
        .read_to_end(&mut out)
        .map_err(|error| {
            ApiError::new(
                ErrorCode::BadHeader,
                format!("Content-Encoding is gzip, but the body does not decode: {error}"),
            )
        })?;
    if out.len() > limit {
        return Err(ApiError::new(
            ErrorCode::RequestTooLarge,
            format!("the request body decodes to more than the server's limit of {limit} bytes"),
        ));
    }
    Ok(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use axum::http::HeaderValue;

    use super::*;

    fn headers(coding: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_ENCODING, HeaderValue::from_str(coding).unwrap());
        headers
    }

    fn gzip(data: &[u8]) -> Bytes {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(data).unwrap();
        Bytes::from(encoder.finish().unwrap())
    }

    #[test]
    fn gzip_is_decoded_and_identity_or_none_is_the_body() {
        let plain = Bytes::from_static(b"{\"records\":[]}");
        assert_eq!(
            decoded(&HeaderMap::new(), plain.clone(), 100).unwrap(),
            plain
        );
        assert_eq!(
            decoded(&headers("identity"), plain.clone(), 100).unwrap(),
            plain
        );
        for coding in ["gzip", "GZIP", "x-gzip", "identity, gzip"] {
            assert_eq!(decoded(&headers(coding), gzip(&plain), 100).unwrap(), plain);
        }
    }

    #[test]
    fn other_codings_bad_data_and_bombs_are_refused() {
        let plain = Bytes::from_static(b"abc");
        for coding in ["br", "deflate", "gzip, gzip", "x-bogus"] {
            let refused = decoded(&headers(coding), plain.clone(), 100).unwrap_err();
            assert_eq!(refused.code(), ErrorCode::UnsupportedMediaType, "{coding}");
        }
        let refused = decoded(&headers("gzip"), plain, 100).unwrap_err();
        assert_eq!(refused.code(), ErrorCode::BadHeader);
        let bomb = gzip(&vec![0u8; 10_000]);
        assert!(bomb.len() < 100);
        let refused = decoded(&headers("gzip"), bomb.clone(), 9_999).unwrap_err();
        assert_eq!(refused.code(), ErrorCode::RequestTooLarge);
        assert_eq!(
            decoded(&headers("gzip"), bomb, 10_000).unwrap().len(),
            10_000
        );
    }
}
