//! Authentication and authorization against the real binary: API keys made by the CLI and the
//! admin API, 401 for anything without a valid key, ACLs per route (allow, deny, prefix, deny
//! wins), listings filtered to what the caller may describe, revocation on the next request,
//! key-file reloads, and requests without valid credentials that change nothing.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use strata_tests::{
    Api, Server, SseEvent, SseParser, bearer_client, binary, cli_create_key, eventually,
    expect_error, start_secured,
};

fn cli_revoke_all(data_dir: &Path) {
    let list = Command::new(binary())
        .args(["auth", "list-keys", "--data-dir"])
        .arg(data_dir)
        .output()
        .unwrap();
    assert!(list.status.success(), "{list:?}");
    for line in String::from_utf8(list.stdout).unwrap().lines() {
        let id = line.split('\t').next().unwrap();
        let revoke = Command::new(binary())
            .args(["auth", "revoke-key", id, "--data-dir"])
            .arg(data_dir)
            .output()
            .unwrap();
        assert!(revoke.status.success(), "{revoke:?}");
    }
}

/// A server with API keys on, `admin` a super user, and the admin's token.
fn secured_server() -> (Server, tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let admin = cli_create_key(dir.path(), "admin");
    (start_secured(dir.path()), dir, admin)
}

/// Helpers that send `token` (or no token) with every request.
fn api_as(server: &Server, token: Option<&str>) -> Api {
    Api {
        base: server.base_url(),
        client: bearer_client(token),
    }
}

async fn create_key(admin: &Api, principal: &str) -> (String, String) {
    let response = admin
        .post("/v1/auth/keys", &json!({"principal": principal}))
        .await;
    assert_eq!(response.status(), 201);
    let body = ok_json_any(response).await;
    let token = body["token"].as_str().unwrap().to_string();
    (body["id"].as_str().unwrap().to_string(), token)
}

async fn ok_json_any(response: reqwest::Response) -> Value {
    let status = response.status();
    let text = response.text().await.unwrap();
    assert!(status.is_success(), "{status}: {text}");
    serde_json::from_str(&text).unwrap()
}

async fn grant(admin: &Api, principal: &str, kind: &str, name: &str, pattern: &str, op: &str) {
    acl(admin, principal, kind, name, pattern, op, "allow").await;
}

async fn acl(
    admin: &Api,
    principal: &str,
    kind: &str,
    name: &str,
    pattern: &str,
    operation: &str,
    permission: &str,
) {
    let rule = json!({
        "principal": principal, "resource_type": kind, "resource_name": name,
        "pattern_type": pattern, "operation": operation, "permission": permission,
    });
    let response = admin.post("/v1/acls", &rule).await;
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
}

async fn send(api: &Api, method: Method, path: &str, body: Option<&Value>) -> reqwest::Response {
    let mut request = api.client.request(method, api.url(path));
    if let Some(body) = body {
        request = request.json(body);
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn without_a_valid_key_every_api_route_is_401_and_health_stays_open() {
    let (server, _dir, admin_token) = secured_server();
    let anonymous = api_as(&server, None);
    let wrong = api_as(&server, Some("strata_not-a-key"));
    for api in [&anonymous, &wrong] {
        for (method, path) in [
            (Method::GET, "/v1/topics"),
            (Method::POST, "/v1/topics"),
            (Method::GET, "/v1/groups"),
            (Method::POST, "/v1/producers"),
            (Method::GET, "/v1/acls"),
            (Method::GET, "/v1/auth/keys"),
        ] {
            let response = send(api, method, path, Some(&json!({"name": "t"}))).await;
            let challenge = response.headers().get("www-authenticate").cloned();
            let body = expect_error(response, 401, "unauthenticated").await;
            assert_eq!(challenge.unwrap(), "Bearer realm=\"strata\"", "{body}");
        }
    }
    // The same answer for a missing and a wrong key: nothing says whether a key exists.
    let missing = anonymous.get("/v1/topics").await.text().await.unwrap();
    let unknown = wrong.get("/v1/topics").await.text().await.unwrap();
    assert_eq!(missing, unknown);
    for open in ["/healthz", "/readyz", "/openapi.json"] {
        assert_eq!(anonymous.get(open).await.status(), 200, "{open}");
    }
    let admin = api_as(&server, Some(&admin_token));
    admin.create_topic("orders", 1).await;
    let listed = admin.get_json("/v1/topics").await;
    assert!(
        listed["topics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "orders")
    );
}

/// Every `/v1` route with what it needs, asked by a principal with all rights on `pay.`
/// topics and groups (never 401/403) and by one without any (always 403).
fn routes() -> Vec<(Method, &'static str, Option<Value>)> {
    let records = json!({"records": [{"key": "k", "value": 1}]});
    vec![
        (Method::POST, "/v1/topics", Some(json!({"name": "pay.new"}))),
        (Method::GET, "/v1/topics/pay.orders", None),
        (
            Method::PATCH,
            "/v1/topics/pay.orders/configs",
            Some(json!({"configs": {"retention_ms": 100000}})),
        ),
        (
            Method::POST,
            "/v1/topics/pay.orders/partitions",
            Some(json!({"partitions": 2})),
        ),
        (
            Method::POST,
            "/v1/topics/pay.orders/records",
            Some(records.clone()),
        ),
        (
            Method::POST,
            "/v1/topics/pay.orders/partitions/0/records",
            Some(records),
        ),
        (
            Method::GET,
            "/v1/topics/pay.orders/partitions/0/records",
            None,
        ),
        (
            Method::GET,
            "/v1/topics/pay.orders/partitions/0/offsets",
            None,
        ),
        (
            Method::GET,
            "/v1/topics/pay.orders/partitions/0/segments",
            None,
        ),
        (
            Method::POST,
            "/v1/topics/pay.orders/partitions/0/delete-records",
            Some(json!({"offset": 0})),
        ),
        (
            Method::POST,
            "/v1/groups/pay.g/offsets",
            Some(json!({"offsets": [{"topic": "pay.orders", "partition": 0, "offset": 1}]})),
        ),
        (Method::GET, "/v1/groups/pay.g/offsets", None),
        (Method::GET, "/v1/groups/pay.g/lag", None),
        (Method::GET, "/v1/groups/pay.g", None),
        (
            Method::POST,
            "/v1/groups/pay.g/offsets/reset",
            Some(json!({"topic": "pay.orders", "to": "earliest"})),
        ),
        (
            Method::POST,
            "/v1/groups/pay.m/members",
            Some(json!({"topics": ["pay.orders"]})),
        ),
        (
            Method::POST,
            "/v1/groups/pay.m/members/x/heartbeat",
            Some(json!({"generation": 1})),
        ),
        (
            Method::GET,
            "/v1/groups/pay.m/members/x/records?generation=1",
            None,
        ),
        (Method::DELETE, "/v1/groups/pay.m/members/x", None),
        (Method::DELETE, "/v1/groups/pay.g/offsets", None),
        (Method::DELETE, "/v1/topics/pay.orders", None),
    ]
}

#[tokio::test]
async fn acls_decide_every_route_with_prefixes_and_deny_winning() {
    let (server, _dir, admin_token) = secured_server();
    let admin = api_as(&server, Some(&admin_token));
    let (_, alice_token) = create_key(&admin, "alice").await;
    let (_, bob_token) = create_key(&admin, "bob").await;
    let (alice, bob) = (
        api_as(&server, Some(&alice_token)),
        api_as(&server, Some(&bob_token)),
    );
    admin.create_topic("pay.orders", 1).await;
    admin.create_topic("pay.secret", 1).await;
    admin.create_topic("other", 1).await;
    grant(&admin, "alice", "topic", "pay.", "prefix", "all").await;
    grant(&admin, "alice", "group", "pay.", "prefix", "all").await;
    acl(
        &admin,
        "alice",
        "topic",
        "pay.secret",
        "literal",
        "write",
        "deny",
    )
    .await;

    for (method, path, body) in routes() {
        let response = send(&bob, method.clone(), path, body.as_ref()).await;
        let denied = expect_error(response, 403, "forbidden").await;
        let message = denied["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("bob may not "),
            "{method} {path}: {message}"
        );
        let response = send(&alice, method.clone(), path, body.as_ref()).await;
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        assert!(
            status != 401 && status != 403,
            "{method} {path} refused alice: {status} {text}"
        );
    }
    // Deny wins over the prefix allow, for the denied operation only.
    let write = alice
        .post(
            "/v1/topics/pay.secret/records",
            &json!({"records": [{"value": 1}]}),
        )
        .await;
    let body = expect_error(write, 403, "forbidden").await;
    assert_eq!(
        body["error"]["message"],
        "alice may not write topic \"pay.secret\""
    );
    assert_eq!(
        alice
            .get("/v1/topics/pay.secret/partitions/0/records")
            .await
            .status(),
        200
    );
    // A forbidden topic looks the same whether it exists or not.
    let existing = bob.get("/v1/topics/other").await;
    expect_error(existing, 403, "forbidden").await;
    let missing = bob.get("/v1/topics/nothing").await;
    expect_error(missing, 403, "forbidden").await;
    // Listings show only what the caller may describe.
    let names = |list: Value| -> Vec<String> {
        let mut names: Vec<String> = list["topics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect();
        names.sort();
        names
    };
    // alice created pay.new and deleted pay.orders above.
    let everything = ["__consumer_offsets", "other", "pay.new", "pay.secret"];
    assert_eq!(
        names(alice.get_json("/v1/topics").await),
        ["pay.new", "pay.secret"]
    );
    assert!(names(bob.get_json("/v1/topics").await).is_empty());
    assert_eq!(names(admin.get_json("/v1/topics").await), everything);
    // Only admins manage keys and ACLs.
    for (method, path) in [
        (Method::GET, "/v1/acls"),
        (Method::GET, "/v1/auth/keys"),
        (Method::POST, "/v1/auth/keys"),
    ] {
        let response = send(&alice, method, path, Some(&json!({"principal": "x"}))).await;
        expect_error(response, 403, "forbidden").await;
    }
    let listed = admin.get_json("/v1/acls").await;
    assert_eq!(listed["acls"].as_array().unwrap().len(), 3);
    assert!(
        !admin
            .get("/v1/auth/keys")
            .await
            .text()
            .await
            .unwrap()
            .contains(&alice_token)
    );
}

#[tokio::test]
async fn group_operations_need_read_on_the_group_and_on_each_topic() {
    let (server, _dir, admin_token) = secured_server();
    let admin = api_as(&server, Some(&admin_token));
    let (_, token) = create_key(&admin, "carol").await;
    let carol = api_as(&server, Some(&token));
    admin.create_topic("a", 1).await;
    admin.create_topic("b", 1).await;
    grant(&admin, "carol", "group", "g", "literal", "read").await;
    grant(&admin, "carol", "topic", "a", "literal", "read").await;
    let join_b = carol
        .post("/v1/groups/g/members", &json!({"topics": ["a", "b"]}))
        .await;
    let body = expect_error(join_b, 403, "forbidden").await;
    assert_eq!(body["error"]["message"], "carol may not read topic \"b\"");
    let commit_b = json!({"offsets": [{"topic": "b", "partition": 0, "offset": 0}]});
    let commit = carol.post("/v1/groups/g/offsets", &commit_b).await;
    expect_error(commit, 403, "forbidden").await;
    let join_a = carol
        .post("/v1/groups/g/members", &json!({"topics": ["a"]}))
        .await;
    assert_eq!(join_a.status(), 200);
    let other_group = carol
        .post("/v1/groups/h/members", &json!({"topics": ["a"]}))
        .await;
    expect_error(other_group, 403, "forbidden").await;
}

#[tokio::test]
async fn revocation_and_key_file_changes_take_effect_without_a_restart() {
    let (server, dir, admin_token) = secured_server();
    let admin = api_as(&server, Some(&admin_token));
    let (id, token) = create_key(&admin, "dave").await;
    grant(&admin, "dave", "topic", "*", "literal", "describe").await;
    let dave = api_as(&server, Some(&token));
    assert_eq!(dave.get("/v1/topics").await.status(), 200);
    let revoke = send(&admin, Method::DELETE, &format!("/v1/auth/keys/{id}"), None).await;
    assert_eq!(revoke.status(), 204);
    expect_error(dave.get("/v1/topics").await, 401, "unauthenticated").await;
    let again = send(&admin, Method::DELETE, &format!("/v1/auth/keys/{id}"), None).await;
    expect_error(again, 404, "key_not_found").await;

    // A key made by the CLI while the server runs works once the file is reloaded...
    let erin_token = cli_create_key(dir.path(), "erin");
    let erin = api_as(&server, Some(&erin_token));
    eventually(
        Duration::from_secs(10),
        "the new key is accepted",
        || async { erin.get("/v1/topics").await.status() == 200 },
    )
    .await;
    // ...and a revocation by the CLI (every key, the admin's too) as well.
    cli_revoke_all(dir.path());
    eventually(
        Duration::from_secs(10),
        "revoked keys are refused",
        || async {
            erin.get("/v1/topics").await.status() == 401
                && admin.get("/v1/topics").await.status() == 401
        },
    )
    .await;
}

#[tokio::test]
async fn internal_topics_stay_closed_to_super_users_with_auth_on() {
    let (server, _dir, admin_token) = secured_server();
    let admin = api_as(&server, Some(&admin_token));
    let produce = admin
        .post(
            "/v1/topics/__consumer_offsets/records",
            &json!({"records": [{"value": 1}]}),
        )
        .await;
    expect_error(produce, 409, "internal_topic").await;
    let configs = send(
        &admin,
        Method::PATCH,
        "/v1/topics/__consumer_offsets/configs",
        Some(&json!({"configs": {"retention_ms": 1}})),
    )
    .await;
    expect_error(configs, 409, "internal_topic").await;
}

/// Random requests over every route, without a key or with random, truncated or revoked ones:
/// all are 401 and the server's state (topics, records, configs, offsets, ACLs, keys) is the
/// same afterwards.
#[tokio::test]
async fn no_request_without_valid_credentials_changes_anything() {
    let (server, _dir, admin_token) = secured_server();
    let admin = api_as(&server, Some(&admin_token));
    admin.create_topic("pay.orders", 1).await;
    admin
        .produce(
            "pay.orders",
            &json!({"records": [{"key": "k", "value": 1}]}),
        )
        .await;
    grant(&admin, "alice", "topic", "pay.", "prefix", "all").await;
    let (revoked_id, revoked) = create_key(&admin, "mallory").await;
    let gone = send(
        &admin,
        Method::DELETE,
        &format!("/v1/auth/keys/{revoked_id}"),
        None,
    )
    .await;
    assert_eq!(gone.status(), 204);
    let snapshot = || async {
        json!({
            "topics": admin.get_json("/v1/topics").await,
            "orders": admin.get_json("/v1/topics/pay.orders").await,
            "records": admin.fetch_values("pay.orders", 0, 0).await,
            "groups": admin.get_json("/v1/groups").await,
            "acls": admin.get_json("/v1/acls").await,
            "keys": admin.get_json("/v1/auth/keys").await,
        })
    };
    let before = snapshot().await;
    let credentials = [
        None,
        Some(revoked.clone()),
        Some(admin_token[..admin_token.len() - 1].to_string()),
        Some(format!("{admin_token}x")),
        Some(String::new()),
        Some("strata_".to_string()),
    ];
    let methods = [Method::GET, Method::POST, Method::PATCH, Method::DELETE];
    let mut rng = fastrand::Rng::with_seed(12);
    for round in 0..120 {
        let credential = &credentials[rng.usize(..credentials.len())];
        let api = api_as(&server, credential.as_deref());
        let (_, path, body) = &routes()[rng.usize(..routes().len())];
        let method = methods[rng.usize(..methods.len())].clone();
        let response = send(&api, method.clone(), path, body.as_ref()).await;
        let status = response.status().as_u16();
        // A method a route lacks is refused by the router before authentication (405).
        assert!(
            status == 401 || status == 405,
            "round {round}: {method} {path} with {credential:?} answered {status}"
        );
    }
    let extra = [
        (
            Method::POST,
            "/v1/acls",
            json!({"principal": "mallory", "resource_type": "cluster",
            "resource_name": "", "pattern_type": "literal", "operation": "all",
            "permission": "allow"}),
        ),
        (
            Method::POST,
            "/v1/auth/keys",
            json!({"principal": "mallory"}),
        ),
    ];
    for (method, path, body) in extra {
        let response = send(&api_as(&server, Some(&revoked)), method, path, Some(&body)).await;
        expect_error(response, 401, "unauthenticated").await;
    }
    assert_eq!(snapshot().await, before);
}

#[tokio::test]
async fn an_acl_on_a_resource_named_with_digits_can_be_deleted() {
    // A long run of digits is a name here, not an integer: only number fields are int64.
    let (server, _dir, admin_token) = secured_server();
    let admin = api_as(&server, Some(&admin_token));
    let digits = "999999999999999999999999999999";
    grant(&admin, "carol", "group", digits, "prefix", "read").await;
    let query = format!(
        "/v1/acls?principal=carol&resource_type=group&resource_name={digits}\
         &pattern_type=prefix&operation=read&permission=allow"
    );
    let deleted = send(&admin, Method::DELETE, &query, None).await;
    assert_eq!(deleted.status(), 200, "{}", deleted.text().await.unwrap());
    assert!(
        admin.get_json("/v1/acls").await["acls"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

/// Events of an open SSE response until `name` arrives (then that event), within 10 s.
async fn next_event_named(response: &mut reqwest::Response, name: &str) -> SseEvent {
    let mut parser = SseParser::default();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let chunk = tokio::time::timeout_at(deadline, response.chunk())
            .await
            .unwrap_or_else(|_| panic!("no {name} event within 10 s"))
            .unwrap()
            .unwrap_or_else(|| panic!("the stream ended before a {name} event"));
        if let Some(event) = parser.push(&chunk).into_iter().find(|e| e.event == name) {
            return event;
        }
    }
}

async fn open_stream(api: &Api, path: &str) -> reqwest::Response {
    let response = api
        .client
        .get(api.url(path))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response
}

/// A stream outlives the request that was checked: revoking its key or denying its topic
/// must end it (with the error a new request would get), not leave it delivering records.
#[tokio::test]
async fn open_streams_end_when_their_key_is_revoked_or_their_read_denied() {
    let (server, _dir, admin_token) = secured_server();
    let admin = api_as(&server, Some(&admin_token));
    admin.create_topic("feed", 1).await;
    for principal in ["dave", "erin", "frank"] {
        grant(&admin, principal, "topic", "feed", "literal", "read").await;
        grant(&admin, principal, "group", "readers", "literal", "read").await;
    }
    let (dave_key, dave) = create_key(&admin, "dave").await;
    let (_, erin) = create_key(&admin, "erin").await;
    let (frank_key, frank) = create_key(&admin, "frank").await;
    let dave = api_as(&server, Some(&dave));
    let erin = api_as(&server, Some(&erin));
    let frank = api_as(&server, Some(&frank));
    let path = "/v1/topics/feed/partitions/0/records?offset=0";
    let mut dave_stream = open_stream(&dave, path).await;
    let mut erin_stream = open_stream(&erin, path).await;
    let joined = ok_json_any(
        frank
            .post("/v1/groups/readers/members", &json!({"topics": ["feed"]}))
            .await,
    )
    .await;
    let mut frank_stream = open_stream(
        &frank,
        &format!(
            "/v1/groups/readers/members/{}/records?generation={}",
            joined["member_id"].as_str().unwrap(),
            joined["generation"]
        ),
    )
    .await;
    admin
        .produce("feed", &json!({"records": [{"value": "before"}]}))
        .await;
    for stream in [&mut dave_stream, &mut erin_stream, &mut frank_stream] {
        let event = next_event_named(stream, "records").await;
        assert!(event.data.contains("before"), "{}", event.data);
    }

    for id in [&dave_key, &frank_key] {
        let revoked = send(&admin, Method::DELETE, &format!("/v1/auth/keys/{id}"), None).await;
        assert_eq!(revoked.status(), 204);
    }
    acl(&admin, "erin", "topic", "feed", "literal", "read", "deny").await;
    admin
        .produce("feed", &json!({"records": [{"value": "after"}]}))
        .await;
    for (stream, code) in [
        (&mut dave_stream, "unauthenticated"),
        (&mut erin_stream, "forbidden"),
        (&mut frank_stream, "unauthenticated"),
    ] {
        let event = next_event_named(stream, "server_error").await;
        let body: Value = serde_json::from_str(&event.data).unwrap();
        assert_eq!(body["error"]["code"], code, "{}", event.data);
        assert!(
            stream.chunk().await.unwrap().is_none(),
            "the stream ends after its error"
        );
    }
}

/// A group's committed offsets name topics: a caller who may describe the group but not a
/// topic does not learn of that topic from them (as the lag and every listing already do).
#[tokio::test]
async fn group_offsets_leave_out_topics_the_caller_may_not_describe() {
    let (server, _dir, admin_token) = secured_server();
    let admin = api_as(&server, Some(&admin_token));
    for topic in ["pay.orders", "public"] {
        admin.create_topic(topic, 1).await;
        admin
            .produce(topic, &json!({"records": [{"value": 1}]}))
            .await;
    }
    let commit = json!({"offsets": [
        {"topic": "pay.orders", "partition": 0, "offset": 1},
        {"topic": "public", "partition": 0, "offset": 1},
    ]});
    assert_eq!(
        admin.post("/v1/groups/gg/offsets", &commit).await.status(),
        200
    );
    let (_, token) = create_key(&admin, "hank").await;
    grant(&admin, "hank", "group", "gg", "literal", "describe").await;
    grant(&admin, "hank", "topic", "public", "literal", "describe").await;
    let hank = api_as(&server, Some(&token));
    let seen = ok_json_any(hank.get("/v1/groups/gg/offsets").await).await;
    let topics: Vec<&str> = seen["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["topic"].as_str().unwrap())
        .collect();
    assert_eq!(topics, ["public"], "{seen}");
}

/// An ACL whose name no topic or group can have is refused when added: it looked like
/// protection and matched nothing (`bad name!`, 10,000 characters).
#[tokio::test]
async fn an_acl_that_can_never_match_is_refused() {
    let server = Server::start_default();
    let api = Api::new(&server);
    let rule = |kind: &str, name: String, pattern: &str| {
        json!({"principal": "alice", "resource_type": kind, "resource_name": name,
               "pattern_type": pattern, "operation": "read", "permission": "deny"})
    };
    for (kind, name, pattern) in [
        ("group", "bad name!".to_string(), "literal"),
        ("topic", "x".repeat(10_000), "literal"),
        ("topic", "orders/".to_string(), "prefix"),
    ] {
        let refused = expect_error(
            api.post("/v1/acls", &rule(kind, name, pattern)).await,
            422,
            "invalid",
        )
        .await;
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("can never match"), "{message}");
    }
    for (kind, name, pattern) in [
        ("topic", "orders.".to_string(), "prefix"),
        ("topic", "*".to_string(), "literal"),
        ("group", "billing-1".to_string(), "literal"),
    ] {
        assert_eq!(
            api.post("/v1/acls", &rule(kind, name, pattern))
                .await
                .status(),
            201
        );
    }
}

/// Bumping a producer id's epoch fences every session holding it, and ids are issued in
/// sequence: any logged-in principal could fence another's idempotent producer. Only the
/// principal the id was issued to, or a super user, may bump it now.
#[tokio::test]
async fn only_its_owner_or_a_super_user_may_bump_a_producer_id() {
    let (server, _dir, admin_token) = secured_server();
    let admin = api_as(&server, Some(&admin_token));
    let (_, alice_token) = create_key(&admin, "alice").await;
    let (_, bob_token) = create_key(&admin, "bob").await;
    let (alice, bob) = (
        api_as(&server, Some(&alice_token)),
        api_as(&server, Some(&bob_token)),
    );
    async fn init(api: &Api, body: Value) -> reqwest::Response {
        api.post("/v1/producers", &body).await
    }
    let issued = ok_json_any(init(&bob, json!({})).await).await;
    let id = issued["producer_id"].as_i64().unwrap();
    let refused = expect_error(
        init(&alice, json!({"producer_id": id})).await,
        403,
        "forbidden",
    )
    .await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("another principal"), "{message}");
    let bumped = ok_json_any(init(&bob, json!({"producer_id": id})).await).await;
    assert_eq!(
        bumped["producer_epoch"], 1,
        "alice's refused bump fenced nobody"
    );
    let by_admin = ok_json_any(init(&admin, json!({"producer_id": id})).await).await;
    assert_eq!(by_admin["producer_epoch"], 2);
    // Alice still gets ids of her own.
    let own = ok_json_any(init(&alice, json!({})).await).await;
    let own_id = own["producer_id"].as_i64().unwrap();
    let again = ok_json_any(init(&alice, json!({"producer_id": own_id})).await).await;
    assert_eq!(again["producer_epoch"], 1);

    // Writing with bob's id would move his sequences: refused too, even where alice may write.
    admin.create_topic("shared", 1).await;
    for principal in ["alice", "bob"] {
        grant(&admin, principal, "topic", "shared", "literal", "write").await;
    }
    let batch = |producer_id: i64, epoch: i64| {
        json!({"records": [{"value": 1}],
               "producer": {"producer_id": producer_id, "producer_epoch": epoch,
                            "sequences": {"0": 0}}})
    };
    let path = "/v1/topics/shared/partitions/0/records";
    let refused = expect_error(alice.post(path, &batch(id, 2)).await, 403, "forbidden").await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("another principal"), "{message}");
    // The same through a raw RecordBatch carrying bob's id.
    let options = strata_server::log::BatchOptions {
        producer_id: id,
        producer_epoch: 2,
        base_sequence: 0,
        ..strata_server::log::BatchOptions::default()
    };
    let record = strata_server::log::NewRecord {
        timestamp: 1_700_000_000_000,
        key: None,
        value: Some(bytes::Bytes::from_static(b"raw")),
        headers: Vec::new(),
    };
    let raw = strata_server::log::batch::encode_batch(&options, &[record]).unwrap();
    let response = alice
        .client
        .post(alice.url(path))
        .header("content-type", "application/vnd.strata.record-batches")
        .body(raw)
        .send()
        .await
        .unwrap();
    expect_error(response, 403, "forbidden").await;
    ok_json_any(bob.post(path, &batch(id, 2)).await).await;
    let offsets = admin.offsets("shared", 0).await;
    assert_eq!(
        offsets["latest"], 1,
        "only bob's batch was stored: {offsets}"
    );
}
