//! The README's curl tour runs as written: every block after a `<!-- tour -->` line is run by
//! bash, in order, against a fresh server, and every curl in it must answer 2xx. The README can
//! then never drift from what the server does.

use std::process::Command;

use strata_tests::Server;

/// The tour blocks of the README, in order.
fn tour_blocks(readme: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut lines = readme.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "<!-- tour -->" {
            continue;
        }
        let fence = lines.next().unwrap_or_default();
        assert!(
            fence.starts_with("```bash"),
            "a tour block is a bash block: {fence}"
        );
        let block: Vec<&str> = lines
            .by_ref()
            .take_while(|l| !l.starts_with("```"))
            .collect();
        blocks.push(block.join("\n"));
    }
    blocks
}

/// Wraps curl so that every call reports its HTTP status on stderr (and a timeout that
/// `--max-time` asked for, as an SSE example does, counts as success).
const PRELUDE: &str = r#"set -euo pipefail
curl() {
  local rc=0
  command curl -w '%{stderr}TOUR-STATUS %{http_code}\n' "$@" || rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 28 ]; then return "$rc"; fi
  return 0
}
"#;

#[test]
fn the_readme_curl_tour_runs_as_written() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let blocks = tour_blocks(&readme);
    assert!(blocks.len() >= 2, "the README has its tour blocks");
    let tour = blocks.join("\n");
    assert!(tour.contains("S=http://localhost:8080"), "the tour sets S");
    let server = Server::start_default();
    let tour = tour.replace(
        "S=http://localhost:8080",
        &format!("S={}", server.base_url()),
    );
    let calls = tour.matches("curl -").count();
    let work = tempfile::tempdir().unwrap();
    let output = Command::new("bash")
        .arg("-c")
        .arg(format!("{PRELUDE}{tour}"))
        .current_dir(work.path())
        .output()
        .expect("running bash");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the tour failed ({}):\nstderr:\n{stderr}\nstdout:\n{stdout}",
        output.status
    );
    let statuses: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("TOUR-STATUS "))
        .collect();
    assert_eq!(statuses.len(), calls, "every curl ran:\n{stderr}\n{stdout}");
    for (i, status) in statuses.iter().enumerate() {
        assert!(
            status.starts_with('2'),
            "curl #{} answered {status}:\nstdout:\n{stdout}",
            i + 1
        );
    }
}
