//! The connection layer against the real binary: HTTPS with a test CA (HTTP/2 by ALPN, a
//! client trusting another CA refused, a renewed certificate served without a restart), mTLS
//! principals, quotas (429 with Retry-After, nothing stored, other principals unaffected),
//! slow clients cut off, the connection limit and CORS.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};
use serde_json::json;
use strata_tests::{Api, Server, ServerOptions, binary, eventually, expect_error};

/// A CA that signs server and client certificates, written as PEM files.
struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl TestCa {
    fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        TestCa {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A certificate for `common_name` (with `127.0.0.1` and `localhost` as SANs): PEM of
    /// the certificate and of its key.
    fn issue(&self, common_name: &str) -> (String, String) {
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params
            .subject_alt_names
            .push(SanType::IpAddress([127, 0, 0, 1].into()));
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn https_client(ca: &TestCa, identity: Option<(&str, &str)>) -> reqwest::Client {
    let root = reqwest::Certificate::from_pem(ca.pem.as_bytes()).unwrap();
    let mut builder = reqwest::Client::builder()
        .tls_certs_only([root])
        .timeout(Duration::from_secs(20));
    if let Some((cert, key)) = identity {
        let pem = format!("{cert}{key}");
        builder = builder.identity(reqwest::Identity::from_pem(pem.as_bytes()).unwrap());
    }
    builder.build().unwrap()
}

fn https_url(server: &Server, path: &str) -> String {
    format!("https://127.0.0.1:{}{path}", server.address().port())
}

#[tokio::test]
async fn https_with_a_test_ca_speaks_http2_and_reloads_a_renewed_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("strata test CA");
    let (cert, key) = ca.issue("localhost");
    let cert_file = write(dir.path(), "server.pem", &cert);
    let key_file = write(dir.path(), "server.key", &key);
    let server = Server::start(ServerOptions::with_args(&[
        "--tls-cert-file",
        cert_file.to_str().unwrap(),
        "--tls-key-file",
        key_file.to_str().unwrap(),
    ]));
    let client = https_client(&ca, None);
    let response = client
        .get(https_url(&server, "/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.version(),
        reqwest::Version::HTTP_2,
        "ALPN picks h2"
    );
    let other = TestCa::new("another CA");
    let refused = https_client(&other, None)
        .get(https_url(&server, "/healthz"))
        .send()
        .await;
    assert!(refused.is_err(), "a client trusting another CA must fail");
    let plain = reqwest::get(format!("{}/healthz", server.base_url())).await;
    assert!(plain.is_err() || !plain.unwrap().status().is_success());

    // Renew the certificate from another CA: new connections get it, without a restart.
    let (cert, key) = other.issue("localhost");
    write(dir.path(), "server.key.new", &key);
    write(dir.path(), "server.pem.new", &cert);
    std::fs::rename(dir.path().join("server.key.new"), &key_file).unwrap();
    std::fs::rename(dir.path().join("server.pem.new"), &cert_file).unwrap();
    eventually(
        Duration::from_secs(10),
        "the renewed certificate is served",
        || async {
            https_client(&other, None)
                .get(https_url(&server, "/healthz"))
                .send()
                .await
                .is_ok()
        },
    )
    .await;
}

#[tokio::test]
async fn mtls_takes_the_principal_from_the_client_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("strata test CA");
    let (cert, key) = ca.issue("localhost");
    let ca_file = write(dir.path(), "ca.pem", &ca.pem);
    let cert_file = write(dir.path(), "server.pem", &cert);
    let key_file = write(dir.path(), "server.key", &key);
    let server = Server::start(ServerOptions::with_args(&[
        "--auth-mode",
        "mtls",
        "--auth-super-users",
        "ops",
        "--tls-cert-file",
        cert_file.to_str().unwrap(),
        "--tls-key-file",
        key_file.to_str().unwrap(),
        "--tls-client-ca-file",
        ca_file.to_str().unwrap(),
    ]));
    let (ops_cert, ops_key) = ca.issue("ops");
    let ops = https_client(&ca, Some((&ops_cert, &ops_key)));
    let created = ops
        .post(https_url(&server, "/v1/topics"))
        .json(&json!({"name": "orders"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let (alice_cert, alice_key) = ca.issue("alice");
    let alice = https_client(&ca, Some((&alice_cert, &alice_key)));
    let denied = alice
        .get(https_url(&server, "/v1/topics/orders"))
        .send()
        .await
        .unwrap();
    let body = expect_error(denied, 403, "forbidden").await;
    assert_eq!(
        body["error"]["message"],
        "alice may not describe topic \"orders\""
    );
    // Without a client certificate there is no connection at all.
    let anonymous = https_client(&ca, None)
        .get(https_url(&server, "/v1/topics"))
        .send()
        .await;
    assert!(anonymous.is_err() || anonymous.unwrap().status() == 401);
    // A certificate from a CA the server does not trust is refused too.
    let stranger_ca = TestCa::new("stranger");
    let (cert, key) = stranger_ca.issue("ops");
    let stranger = https_client(&ca, Some((&cert, &key)))
        .get(https_url(&server, "/v1/topics"))
        .send()
        .await;
    assert!(stranger.is_err() || stranger.unwrap().status() == 401);
}

fn cli_key(data_dir: &Path, principal: &str) -> String {
    let output = std::process::Command::new(binary())
        .args(["auth", "create-key", "--principal", principal, "--data-dir"])
        .arg(data_dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap().trim().to_string()
}

fn bearer_api(server: &Server, token: &str) -> Api {
    let mut headers = reqwest::header::HeaderMap::new();
    let value = format!("Bearer {token}").parse().unwrap();
    headers.insert(reqwest::header::AUTHORIZATION, value);
    Api {
        base: server.base_url(),
        client: reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .unwrap(),
    }
}

#[tokio::test]
async fn over_quota_is_429_with_retry_after_stores_nothing_and_spares_others() {
    let dir = tempfile::tempdir().unwrap();
    let alice_token = cli_key(dir.path(), "alice");
    let bob_token = cli_key(dir.path(), "bob");
    let server = Server::start(ServerOptions {
        args: [
            "--auth-mode",
            "api_key",
            "--auth-super-users",
            "alice,bob",
            "--quota-produce-bytes-per-second",
            "3000",
        ]
        .map(String::from)
        .to_vec(),
        data_dir: Some(dir.path().to_path_buf()),
        env: Vec::new(),
    });
    let (alice, bob) = (
        bearer_api(&server, &alice_token),
        bearer_api(&server, &bob_token),
    );
    alice.create_topic("t", 1).await;
    // Larger than a second's quota: the charge is capped at it, so the first request empties
    // the bucket and a second one within the next second is refused (a window of 1 s, where a
    // smaller body left about 0.3 s).
    let big = json!({"records": [{"value": "x".repeat(4000)}]});
    let first = alice.post("/v1/topics/t/records", &big).await;
    assert_eq!(first.status(), 200);
    let second = alice.post("/v1/topics/t/records", &big).await;
    let retry_after: u64 = second.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=2).contains(&retry_after), "{retry_after}");
    expect_error(second, 429, "quota_exceeded").await;
    assert_eq!(
        alice.offsets("t", 0).await["latest"],
        1,
        "the refused produce wrote nothing"
    );
    let other = bob.post("/v1/topics/t/records", &big).await;
    assert_eq!(other.status(), 200, "bob has his own quota");
    eventually(Duration::from_secs(10), "alice's quota refills", || async {
        alice.post("/v1/topics/t/records", &big).await.status() == 200
    })
    .await;
}

/// Sends `head` on a raw socket, then nothing: the answer (or the close) must come within 5 s.
fn stall(server: &Server, head: &str) -> String {
    let mut socket = TcpStream::connect(server.address()).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    socket.write_all(head.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let result = socket.read_to_end(&mut answer);
    assert!(result.is_ok(), "still open after 5 s: {result:?}");
    String::from_utf8_lossy(&answer).to_string()
}

#[tokio::test]
async fn slow_clients_are_cut_off_and_the_connection_limit_answers_503() {
    let server = Server::start(ServerOptions::with_args(&[
        "--header-read-timeout-ms",
        "500",
        "--request-body-timeout-ms",
        "500",
        "--max-connections",
        "3",
    ]));
    let body_stalled = stall(
        &server,
        "POST /v1/topics HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         content-length: 100\r\n\r\n{\"name\":",
    );
    assert!(body_stalled.starts_with("HTTP/1.1 408"), "{body_stalled}");
    assert!(body_stalled.contains("request_timeout"), "{body_stalled}");
    let headers_stalled = stall(&server, "GET /healthz HTTP/1.1\r\nhost: x\r\n");
    assert!(!headers_stalled.contains("200 OK"), "{headers_stalled}");
    // A kept-alive connection that sends nothing more is closed too (stall reads to the end).
    let idle = stall(&server, "GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n");
    assert!(idle.starts_with("HTTP/1.1 200"), "{idle}");
    // Nothing of the stalled create happened.
    let api = Api::new(&server);
    let topics = api.get_json("/v1/topics").await;
    assert_eq!(topics["topics"].as_array().unwrap().len(), 1, "{topics}");

    let held: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(server.address()).unwrap())
        .collect();
    let over = stall(&server, "GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n");
    assert!(over.starts_with("HTTP/1.1 503"), "{over}");
    assert!(over.contains("\"busy\""), "{over}");
    drop(held);
    eventually(Duration::from_secs(10), "slots free up", || async {
        api.get("/healthz").await.status() == 200
    })
    .await;
}

#[tokio::test]
async fn cors_is_off_by_default_and_answers_preflights_for_configured_origins() {
    let preflight = |server: &Server| {
        reqwest::Client::new()
            .request(
                reqwest::Method::OPTIONS,
                format!("{}/v1/topics", server.base_url()),
            )
            .header("origin", "https://app.example")
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization,content-type",
            )
            .send()
    };
    let closed = Server::start_default();
    let response = preflight(&closed).await.unwrap();
    assert!(
        response
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );
    let open = Server::start(ServerOptions::with_args(&[
        "--cors-allowed-origins",
        "https://app.example",
    ]));
    let response = preflight(&open).await.unwrap();
    assert_eq!(
        response.headers()["access-control-allow-origin"],
        "https://app.example"
    );
    let methods = response.headers()["access-control-allow-methods"]
        .to_str()
        .unwrap();
    assert!(methods.contains("POST"), "{methods}");
}

#[tokio::test]
async fn open_streams_and_long_polls_are_limited_per_principal() {
    let server = Server::start(ServerOptions::with_args(&[
        "--max-streams-per-principal",
        "2",
    ]));
    let api = Api::new(&server);
    api.create_topic("t", 1).await;
    let path = "/v1/topics/t/partitions/0/records";
    let sse = || {
        api.client
            .get(api.url(path))
            .header("accept", "text/event-stream")
            .send()
    };
    let first = sse().await.unwrap();
    let second = sse().await.unwrap();
    assert_eq!(
        (first.status().as_u16(), second.status().as_u16()),
        (200, 200)
    );
    expect_error(sse().await.unwrap(), 429, "quota_exceeded").await;
    let poll = api.get(&format!("{path}?offset=0&max_wait_ms=5000")).await;
    expect_error(poll, 429, "quota_exceeded").await;
    // A fetch that does not wait holds no slot.
    assert_eq!(api.get(&format!("{path}?offset=0")).await.status(), 200);
    drop(first);
    eventually(
        Duration::from_secs(10),
        "the closed stream's slot is free",
        || async {
            let response = sse().await.unwrap();
            response.status() == 200
        },
    )
    .await;
    drop(second);
}

#[tokio::test]
async fn member_fetches_are_charged_to_the_fetch_quota() {
    let server = Server::start(ServerOptions::with_args(&[
        "--quota-fetch-bytes-per-second",
        "1000",
    ]));
    let api = Api::new(&server);
    api.create_topic("t", 1).await;
    api.produce("t", &json!({"records": [{"value": 1}]})).await;
    let joined = api
        .post("/v1/groups/g/members", &json!({"topics": ["t"]}))
        .await;
    assert_eq!(joined.status(), 200);
    let member: serde_json::Value = joined.json().await.unwrap();
    let path = format!(
        "/v1/groups/g/members/{}/records?generation={}&max_wait_ms=0",
        member["member_id"].as_str().unwrap(),
        member["generation"]
    );
    assert_eq!(api.get(&path).await.status(), 200);
    let over = api.get(&path).await;
    assert!(over.headers().contains_key("retry-after"));
    expect_error(over, 429, "quota_exceeded").await;
}
