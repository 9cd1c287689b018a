//! Idempotent producer registration: `POST /v1/producers`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Body of `POST /v1/producers`: obtains a producer id and epoch for idempotent produce.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(examples(json!({}), json!({"producer_id": 7})))]
pub struct InitProducerRequest {
    /// An existing producer id to start a new session for. The server bumps its epoch, which
    /// fences every older session of that id (their produce requests get 409
    /// `producer_fenced`) and restarts sequences at 0. Absent: a new producer id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0)]
    pub producer_id: Option<i64>,
}

/// A producer session: send these in every produce request's `producer` fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(examples(json!({"producer_id": 7, "producer_epoch": 0})))]
pub struct ProducerIdentity {
    /// Producer id, stable across sessions of the same producer.
    #[schema(minimum = 0)]
    pub producer_id: i64,
    /// Epoch of this session; a higher epoch for the same id fences this one.
    #[schema(minimum = 0, maximum = 32767)]
    pub producer_epoch: i16,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn init_producer_request_accepts_an_empty_body() {
        let request: InitProducerRequest = serde_json::from_value(json!({})).unwrap();
        assert_eq!(request.producer_id, None);
    }

    #[test]
    fn init_producer_request_rejects_unknown_fields() {
        let result: Result<InitProducerRequest, _> =
            serde_json::from_value(json!({"producer_epoch": 1}));
        assert!(result.is_err());
    }
}
