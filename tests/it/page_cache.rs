//! The page-cache window (ADR 0014) as an operator sets it: `--page-cache-window-bytes` on a
//! real server, checked against what the kernel holds of the segment file (`mincore`).

use serde_json::{Value, json};
use std::time::Duration;
use strata_tests::{Api, Server, ServerOptions, eventually};

const MIB: u64 = 1 << 20;

/// Produces about 9 MiB (18 requests of 512 KiB) to partition 0 of a new topic; returns the values in order.
async fn fill(api: &Api) -> Vec<Value> {
    api.create_topic("cached", 1).await;
    let mut values = Vec::new();
    for request in 0..18 {
        let records: Vec<Value> = (0..32)
            .map(|i| {
                let mut value = format!("{request}-{i}-");
                value.extend(std::iter::repeat_n('x', 16_384 - value.len()));
                json!({ "value": value })
            })
            .collect();
        values.extend(records.iter().map(|r| r["value"].clone()));
        api.produce("cached", &json!({ "records": records })).await;
    }
    values
}

#[tokio::test]
async fn the_window_setting_bounds_what_the_page_cache_keeps_of_the_log() {
    for (window, bounded) in [(MIB, true), (0, false)] {
        // On the checkout's disk: the advice has no effect on tmpfs pages.
        let data = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let mut options =
            ServerOptions::with_args(&["--page-cache-window-bytes", &window.to_string()]);
        options.data_dir = Some(data.path().to_path_buf());
        let server = Server::start(options);
        let api = Api::new(&server);
        let values = fill(&api).await;
        let log = data.path().join("topics/cached/0/00000000000000000000.log");
        // The log's length, not the file's: the file also holds the reservation ahead of the
        // writes (ADR 0015), zeros that were never cached.
        let described = api.get_json("/v1/topics/cached").await;
        let size = described["partitions"][0]["size_bytes"].as_u64().unwrap();
        assert!(size > 8 * MIB, "{size} bytes written");
        let resident = || strata_server::io::map::resident_bytes(&log).unwrap();
        if bounded {
            // The writer drops pages after it answers the request that made them durable,
            // so the last drop may still be on its way when the answer arrives.
            eventually(
                Duration::from_secs(10),
                &format!("at most 2 MiB of {size} bytes cached"),
                || std::future::ready(resident() <= 2 * MIB),
            )
            .await;
        } else {
            let resident = resident();
            assert!(resident > size - MIB, "window 0 keeps it all: {resident}");
        }
        // Whatever left memory reads back from disk unchanged.
        assert_eq!(api.fetch_values("cached", 0, 0).await, values);
    }
}
