//! The Rust client generated from `openapi/openapi.json` (clients/rust, progenitor) against the
//! real binary with API keys on: create a topic, produce, fetch, and the typed errors a caller
//! branches on (416 with the valid range, 401, 403), plus the admin operations that turn a 403
//! into an answer. If the contract and the server disagree on a shape, the typed decode fails.

use serde_json::json;
use strata_client::types::{
    AclRule, CreateKeyRequest, CreateTopicRequest, ErrorCode, Operation, PatternType, Permission,
    ProduceAnswer, ProduceRecord, ProduceRequest, ResourceType,
};
use strata_client::{Client, Error};
use strata_tests::{Server, bearer_client, cli_create_key, start_secured};

fn client(server: &Server, token: Option<&str>) -> Client {
    Client::new_with_client(&server.base_url(), bearer_client(token))
}

/// The error code of a documented error answer, and its status.
fn error_of<T: std::fmt::Debug>(
    result: Result<T, Error<strata_client::types::ErrorBody>>,
) -> (u16, strata_client::types::ErrorDetail) {
    match result {
        Err(Error::ErrorResponse(response)) => {
            let status = response.status().as_u16();
            (status, response.into_inner().error)
        }
        other => panic!("expected a documented error answer, got {other:?}"),
    }
}

#[tokio::test]
async fn generated_rust_client_produces_fetches_and_gets_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let admin_token = cli_create_key(dir.path(), "admin");
    let server = start_secured(dir.path());
    let admin = client(&server, Some(&admin_token));

    let request = CreateTopicRequest {
        name: "orders".parse().unwrap(),
        partitions: std::num::NonZeroU32::new(2),
        configs: None,
    };
    let topic = admin.create_topic().body(request).send().await.unwrap();
    assert_eq!(topic.status().as_u16(), 201);
    assert_eq!(topic.partitions.len(), 2);

    let records: Vec<ProduceRecord> = (0..3)
        .map(|i| ProduceRecord {
            key: Some("customer-7".into()),
            value: Some(json!({"order": i})),
            ..ProduceRecord::default()
        })
        .collect();
    let produced = admin
        .produce_to_topic()
        .topic("orders")
        .body(ProduceRequest {
            records,
            expected_offset: None,
            producer: None,
        })
        .send()
        .await
        .unwrap()
        .into_inner();
    // The default answer is per record; `answer=compact` is the other variant.
    let ProduceAnswer::ProduceResponse(produced) = produced else {
        panic!("the default produce answer is per record: {produced:?}");
    };
    let offsets: Vec<i64> = produced.offsets.iter().map(|o| o.offset).collect();
    assert_eq!(offsets, [0, 1, 2], "one key, one partition, gap-free");
    let partition = produced.offsets[0].partition;
    assert!(produced.offsets.iter().all(|o| o.partition == partition));

    let fetched = admin
        .fetch()
        .topic("orders")
        .partition(partition)
        .offset(0)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(fetched.next_offset, 3);
    assert_eq!(fetched.high_watermark, 3);
    let values: Vec<_> = fetched.records.iter().map(|r| r.value.clone()).collect();
    assert_eq!(
        values,
        [
            json!({"order": 0}),
            json!({"order": 1}),
            json!({"order": 2})
        ]
    );
    assert_eq!(fetched.records[2].key.as_deref(), Some("customer-7"));

    let (status, error) = error_of(
        admin
            .fetch()
            .topic("orders")
            .partition(partition)
            .offset(99)
            .send()
            .await,
    );
    assert_eq!(status, 416);
    assert_eq!(error.code, ErrorCode::OffsetOutOfRange);
    assert_eq!(
        (error.earliest_offset, error.latest_offset),
        (Some(0), Some(3))
    );

    let anonymous = client(&server, None);
    let (status, error) = error_of(anonymous.list_topics().send().await);
    assert_eq!((status, error.code), (401, ErrorCode::Unauthenticated));

    let bob_key = admin
        .create_key()
        .body(CreateKeyRequest {
            principal: "bob".into(),
        })
        .send()
        .await
        .unwrap()
        .into_inner();
    let bob = client(&server, Some(&bob_key.token));
    let fetch_as_bob = || bob.fetch().topic("orders").partition(partition).send();
    let (status, error) = error_of(fetch_as_bob().await);
    assert_eq!((status, error.code), (403, ErrorCode::Forbidden));
    assert!(error.message.contains("orders"), "{}", error.message);

    admin
        .add_acl()
        .body(AclRule {
            principal: "bob".into(),
            resource_type: ResourceType::Topic,
            resource_name: "ord".into(),
            pattern_type: PatternType::Prefix,
            operation: Operation::Read,
            permission: Permission::Allow,
        })
        .send()
        .await
        .unwrap();
    let as_bob = fetch_as_bob().await.unwrap().into_inner();
    assert_eq!(as_bob.records.len(), 3, "the ACL turns 403 into records");
}
