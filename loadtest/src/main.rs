//! `strata-loadtest`: produce, consume, end-to-end and consumer-group load against a running
//! Strata, closed or open loop, with every acknowledged record verified and the no-storage
//! and disk baselines measured in the same run. See the README's "Load testing" section.

// A load generator measures and paces real time: that is its job, so it reads the clock and
// sleeps.
#![allow(clippy::disallowed_methods)]

mod batch;
mod cli;
mod client;
mod consumer;
mod disk;
mod group_log;
mod memory;
mod null_server;
mod pacer;
mod payload;
mod plot;
mod producer;
mod progress;
mod report;
mod run;
mod stats;
mod tcp_bound;
mod verify;

use clap::Parser;

use cli::{Cli, Command};
use report::{Report, Workload};

/// Exit status of a run whose verification failed.
const VERIFICATION_FAILED: i32 = 2;

fn main() -> anyhow::Result<()> {
    memory::keep_freed_memory();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run_command())
}

async fn run_command() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let (workload, args) = match cli.command {
        Command::Produce(args) => (Workload::Produce, args),
        Command::Consume(args) => (Workload::Consume, args),
        Command::E2e(args) => (Workload::E2e, args),
        Command::Groups(args) => (Workload::Groups, args),
        Command::NullServer { listen } => return null_server::serve(listen).await,
        Command::Disk {
            bytes,
            dir,
            duration_s,
            rate,
        } => {
            let disk = disk::measure(
                &dir,
                bytes as u64,
                std::time::Duration::from_secs_f64(duration_s),
                rate,
            )?;
            println!("{}", serde_json::to_string(&disk)?);
            return Ok(());
        }
        Command::TcpBound {
            producers,
            bytes,
            dir,
            duration_s,
            warmup_s,
        } => {
            let shape = tcp_bound::Shape {
                producers,
                request_bytes: bytes,
                warmup: std::time::Duration::from_secs_f64(warmup_s),
                duration: std::time::Duration::from_secs_f64(duration_s),
            };
            let bound = tcp_bound::measure(&dir, shape).await?;
            println!("{}", serde_json::to_string(&bound)?);
            return Ok(());
        }
        Command::Compare { a, b } => {
            report::compare(&Report::read(&a)?, &Report::read(&b)?);
            return Ok(());
        }
        Command::Plot { results, out } => return plot::draw(&Report::read(&results)?, &out),
    };
    let report = run::run(workload, args.clone()).await?;
    if let Some(path) = &args.output {
        report.write(path)?;
    }
    if let Some(dir) = &args.plot_dir {
        plot::draw(&report, dir)?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        report.print();
    }
    if !report.passed() {
        eprintln!(
            "strata-loadtest: VERIFICATION FAILED: the server lost, duplicated, reordered or changed acknowledged records"
        );
        std::process::exit(VERIFICATION_FAILED);
    }
    Ok(())
}
