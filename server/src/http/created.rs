//! A 201 answer that says where the new resource lives (`Location`), as RFC 9110 asks of a
//! `POST` that creates one: a client can follow it instead of building the URL itself.

use axum::Json;
use axum::http::header::LOCATION;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// `201 Created` with `body` and a `Location` of the new resource's path.
#[derive(Debug)]
pub struct Created<T> {
    location: String,
    body: T,
}

impl<T> Created<T> {
    /// `template` is one of [`super::paths`]; each `(placeholder, value)` fills it.
    pub fn at(template: &str, values: &[(&str, &str)], body: T) -> Self {
        let location = values
            .iter()
            .fold(template.to_string(), |path, (name, value)| {
                path.replace(&format!("{{{name}}}"), value)
            });
        Self { location, body }
    }
}

impl<T: Serialize> IntoResponse for Created<T> {
    fn into_response(self) -> Response {
        let mut response = (StatusCode::CREATED, Json(self.body)).into_response();
        // Names and ids are validated to URL-safe characters; one that is not a valid header
        // value only costs the header.
        if let Ok(value) = HeaderValue::from_str(&self.location) {
            response.headers_mut().insert(LOCATION, value);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_location_fills_every_placeholder() {
        let created = Created::at(
            super::super::paths::LEGAL_HOLD,
            &[("topic", "orders"), ("id", "7")],
            (),
        );
        assert_eq!(created.location, "/v1/topics/orders/legal-holds/7");
        let response = created.into_response();
        assert_eq!(response.status(), StatusCode::CREATED);
        assert_eq!(
            response.headers()[LOCATION],
            "/v1/topics/orders/legal-holds/7"
        );
    }
}
