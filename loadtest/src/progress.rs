//! A live line on the terminal: records produced and consumed so far, with their rates.
//! Hidden when stderr is not a terminal, with `--quiet` and with `--json`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::LoadArgs;
use crate::run::Progress;

pub struct Bar {
    bar: ProgressBar,
    ticker: tokio::task::JoinHandle<()>,
}

pub fn start(args: &LoadArgs, progress: Arc<Progress>) -> Option<Bar> {
    if args.quiet || args.json {
        return None;
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    if bar.is_hidden() {
        return None;
    }
    bar.set_style(
        ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    let shown = bar.clone();
    let ticker = tokio::spawn(async move {
        let mut last = (0u64, 0u64);
        let mut every = tokio::time::interval(Duration::from_millis(500));
        loop {
            every.tick().await;
            let produced = progress.produced.load(Ordering::Relaxed);
            let consumed = progress.consumed.load(Ordering::Relaxed);
            let errors = progress.errors.load(Ordering::Relaxed);
            shown.set_message(format!(
                "produced {produced} ({}/s)  consumed {consumed} ({}/s)  errors {errors}",
                (produced - last.0) * 2,
                (consumed - last.1) * 2
            ));
            shown.tick();
            last = (produced, consumed);
        }
    });
    Some(Bar { bar, ticker })
}

pub fn finish(bar: Option<Bar>) {
    if let Some(bar) = bar {
        bar.ticker.abort();
        bar.bar.finish_and_clear();
    }
}
