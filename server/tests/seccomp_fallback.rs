//! Under a real seccomp filter that denies io_uring (as Docker >= 25 and containerd >= 2.0 do by
//! default), `auto` falls back to plain syscalls and serves traffic, and `io_uring` refuses to
//! start with a message that names the fix.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

use strata_server::io::seccomp::deny_io_uring;

const STRATA: &str = env!("CARGO_BIN_EXE_strata");

fn probe(io_backend: &str, denied: bool) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(STRATA);
    command
        .args(["io-probe", "--io-backend", io_backend, "--data-dir"])
        .arg(dir.path());
    if denied {
        deny_io_uring(&mut command);
    }
    command.output().unwrap()
}

#[test]
fn auto_falls_back_to_sync_when_seccomp_denies_io_uring() {
    let free = probe("auto", false);
    assert!(
        String::from_utf8_lossy(&free.stdout).contains("\"backend\":\"io_uring\""),
        "{free:?}"
    );
    let denied = probe("auto", true);
    let stdout = String::from_utf8_lossy(&denied.stdout);
    assert!(denied.status.success(), "{denied:?}");
    assert!(stdout.contains("\"backend\":\"sync\""), "{stdout}");
    assert!(
        stdout.contains("EPERM"),
        "the reason names the errno: {stdout}"
    );
}

#[test]
fn strict_io_uring_refuses_to_start_when_seccomp_denies_it() {
    let denied = probe("io_uring", true);
    assert!(!denied.status.success());
    let stderr = String::from_utf8_lossy(&denied.stderr);
    assert!(
        stderr.contains("EPERM") && stderr.contains("seccomp"),
        "{stderr}"
    );
}

fn http(address: &str, request: &str) -> String {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

#[test]
fn a_server_under_the_filter_serves_produce_and_fetch_on_the_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(STRATA);
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = deny_io_uring(&mut command).spawn().unwrap();
    // The first line says the port is bound; the "listening" line comes once it is ready.
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("listening on http://") {
        line.clear();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "no listening line"
        );
    }
    let address = line
        .split("listening on http://")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let health = http(
        &address,
        "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(health.contains("\"io_backend\":\"sync\""), "{health}");
    let body = r#"{"name":"t","partitions":1}"#;
    let created = http(
        &address,
        &format!(
            "POST /v1/topics HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    );
    assert!(created.starts_with("HTTP/1.1 201"), "{created}");
    let body = r#"{"records":[{"value":"on the fallback"}]}"#;
    let produced = http(
        &address,
        &format!(
            "POST /v1/topics/t/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    );
    assert!(produced.contains("\"offset\":0"), "{produced}");
    let fetched = http(
        &address,
        "GET /v1/topics/t/partitions/0/records?offset=0 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(fetched.contains("on the fallback"), "{fetched}");
    child.kill().unwrap();
    child.wait().unwrap();
}
