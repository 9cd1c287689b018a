//! [`FaultyObjectStore`]: an `ObjectStore` decorator that injects the failures a real object store
//! produces, for tests and fault drills of everything above the store (uploader, manifest, cold
//! reads). Controlled at run time through its [`Faults`] handle:
//! - errors on the next N calls of chosen operations ([`Faults::fail_next`]);
//! - added latency per operation ([`Faults::set_latency`]);
//! - "the put landed but the answer was a timeout" ([`Faults::land_then_time_out_next_puts`]):
//!   the write reaches the inner store, then the caller gets an error, the ambiguous case an
//!   uploader must resolve by reading back;
//! - "down" ([`Faults::set_down`]): every call fails until switched back.
//!
//! Injected errors carry an [`InjectedFault`] source, so [`is_injected`] tells them from real
//! ones. Latency sleeps on tokio's timer, so tests with paused time don't wait for real.
//! Compiled only for tests and the `test-util` feature.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream};
use futures::{FutureExt, StreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
    UploadPart,
};

/// The kinds of store call a fault can target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// `put_opts`.
    Put,
    /// `put_multipart_opts` and the upload's `put_part`, `complete` and `abort`.
    PutMultipart,
    /// `get_opts` (get, ranged get, head) and `get_ranges`.
    Get,
    /// `list`, `list_with_offset`, `list_with_delimiter`.
    List,
    /// Each location of `delete_stream` (so each `delete`).
    Delete,
    /// `copy_opts`.
    Copy,
    /// `rename_opts`.
    Rename,
}

impl Operation {
    /// Every operation, for faults that hit whatever comes next.
    pub const ALL: [Self; 7] = [
        Self::Put,
        Self::PutMultipart,
        Self::Get,
        Self::List,
        Self::Delete,
        Self::Copy,
        Self::Rename,
    ];
}

/// What an injected error looks like to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// A 5xx / connection failure: `object_store::Error::Generic`.
    Unavailable,
    /// A request timeout: `object_store::Error::Generic`.
    TimedOut,
    /// A 403: `object_store::Error::PermissionDenied`.
    PermissionDenied,
}

/// The source of every injected error.
#[derive(Debug, Clone, thiserror::Error)]
#[error("injected fault: {kind:?} on {operation:?}{landed}", landed = if *.landed { " (the write landed)" } else { "" })]
pub struct InjectedFault {
    /// The faulted call.
    pub operation: Operation,
    /// What the error imitates.
    pub kind: FaultKind,
    /// Whether the write reached the inner store before the error.
    pub landed: bool,
}

/// Whether `error` was injected by a [`FaultyObjectStore`] (rather than coming from the store).
pub fn is_injected(error: &object_store::Error) -> bool {
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if cause.is::<InjectedFault>() {
            return true;
        }
        source = cause.source();
    }
    false
}

fn injected_error(fault: InjectedFault, location: &Path) -> object_store::Error {
    match fault.kind {
        FaultKind::PermissionDenied => object_store::Error::PermissionDenied {
            path: location.to_string(),
            source: Box::new(fault),
        },
        FaultKind::Unavailable | FaultKind::TimedOut => object_store::Error::Generic {
            store: "FaultyObjectStore",
            source: Box::new(fault),
        },
    }
}

#[derive(Debug)]
struct Rule {
    operations: Vec<Operation>,
    remaining: usize,
    kind: FaultKind,
}

#[derive(Debug, Default)]
struct State {
    rules: Vec<Rule>,
    latency: HashMap<Operation, Duration>,
    down: bool,
    land_then_time_out: usize,
    /// `(key fragment, count)`: puts whose key contains the fragment.
    land_then_time_out_matching: Vec<(String, usize)>,
    calls: HashMap<Operation, u64>,
    injected: u64,
}

/// What to do with one call.
enum Decision {
    Proceed,
    Fail(InjectedFault),
    LandThenFail(InjectedFault),
}

/// The control handle of a [`FaultyObjectStore`]; clones control the same store.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    state: Arc<Mutex<State>>,
}

impl Faults {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock (a failed assertion elsewhere) leaves a usable state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next `count` calls of any of `operations` fail with `kind`. Rules queue up: a call is
    /// charged to the oldest rule that matches it.
    pub fn fail_next(&self, operations: &[Operation], count: usize, kind: FaultKind) {
        self.state().rules.push(Rule {
            operations: operations.to_vec(),
            remaining: count,
            kind,
        });
    }

    /// Every call of `operations` first waits `latency` (zero removes it).
    pub fn set_latency(&self, operations: &[Operation], latency: Duration) {
        let mut state = self.state();
        for operation in operations {
            state.latency.insert(*operation, latency);
        }
    }

    /// The next `count` puts (`put_opts` or a multipart `complete`) reach the inner store and
    /// then report a timeout.
    pub fn land_then_time_out_next_puts(&self, count: usize) {
        self.state().land_then_time_out += count;
    }

    /// Like [`Self::land_then_time_out_next_puts`], but only for puts whose key contains
    /// `key_fragment` (say, only manifests).
    pub fn land_then_time_out_next_puts_to(&self, key_fragment: &str, count: usize) {
        self.state()
            .land_then_time_out_matching
            .push((key_fragment.to_string(), count));
    }

    /// While down, every call fails with [`FaultKind::Unavailable`].
    pub fn set_down(&self, down: bool) {
        self.state().down = down;
    }

    /// Removes every pending fault and latency, and brings the store back up.
    pub fn clear(&self) {
        let mut state = self.state();
        state.rules.clear();
        state.latency.clear();
        state.down = false;
        state.land_then_time_out = 0;
        state.land_then_time_out_matching.clear();
    }

    /// How many calls of `operation` the store received (faulted or not).
    pub fn calls(&self, operation: Operation) -> u64 {
        self.state().calls.get(&operation).copied().unwrap_or(0)
    }

    /// How many errors were injected so far.
    pub fn injected(&self) -> u64 {
        self.state().injected
    }

    /// Charges one call of `operation` to the faults. Only a call that completes an object
    /// (`can_land`) can be told to land and then fail.
    fn decide(
        &self,
        operation: Operation,
        location: &Path,
        can_land: bool,
    ) -> (Decision, Duration) {
        let mut state = self.state();
        *state.calls.entry(operation).or_default() += 1;
        let latency = state.latency.get(&operation).copied().unwrap_or_default();
        let fault = |kind, landed| InjectedFault {
            operation,
            kind,
            landed,
        };
        let decision = if state.down {
            Decision::Fail(fault(FaultKind::Unavailable, false))
        } else if let Some(rule) = state
            .rules
            .iter_mut()
            .find(|rule| rule.remaining > 0 && rule.operations.contains(&operation))
        {
            rule.remaining -= 1;
            Decision::Fail(fault(rule.kind, false))
        } else if let Some(matching) =
            state
                .land_then_time_out_matching
                .iter_mut()
                .find(|(fragment, remaining)| {
                    can_land && *remaining > 0 && location.as_ref().contains(fragment.as_str())
                })
        {
            matching.1 -= 1;
            Decision::LandThenFail(fault(FaultKind::TimedOut, true))
        } else if can_land && state.land_then_time_out > 0 {
            state.land_then_time_out -= 1;
            Decision::LandThenFail(fault(FaultKind::TimedOut, true))
        } else {
            Decision::Proceed
        };
        state.rules.retain(|rule| rule.remaining > 0);
        state
            .land_then_time_out_matching
            .retain(|(_, remaining)| *remaining > 0);
        if !matches!(decision, Decision::Proceed) {
            state.injected += 1;
        }
        (decision, latency)
    }

    /// Waits the latency, then fails the call or lets it through.
    async fn before(&self, operation: Operation, location: &Path) -> object_store::Result<()> {
        self.before_write(operation, location, false)
            .await
            .map(drop)
    }

    /// Like [`Self::before`]; for a call that completes an object (`can_land`), `Some(fault)`
    /// means "do the write, then return this error".
    // Injected latency is a real delay by design.
    #[allow(clippy::disallowed_methods)]
    async fn before_write(
        &self,
        operation: Operation,
        location: &Path,
        can_land: bool,
    ) -> object_store::Result<Option<InjectedFault>> {
        let (decision, latency) = self.decide(operation, location, can_land);
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        match decision {
            Decision::Proceed => Ok(None),
            Decision::Fail(fault) => Err(injected_error(fault, location)),
            Decision::LandThenFail(fault) => Ok(Some(fault)),
        }
    }
}

/// An `ObjectStore` that forwards to `inner` except where its [`Faults`] say otherwise.
#[derive(Debug, Clone)]
pub struct FaultyObjectStore {
    inner: Arc<dyn ObjectStore>,
    faults: Faults,
}

impl FaultyObjectStore {
    /// Wraps `inner` with no faults; returns the store and its control handle.
    pub fn new(inner: Arc<dyn ObjectStore>) -> (Self, Faults) {
        let faults = Faults::default();
        (
            Self {
                inner,
                faults: faults.clone(),
            },
            faults,
        )
    }
}

impl fmt::Display for FaultyObjectStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultyObjectStore({})", self.inner)
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl ObjectStore for FaultyObjectStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let landing = self
            .faults
            .before_write(Operation::Put, location, true)
            .await?;
        let result = self.inner.put_opts(location, payload, opts).await?;
        match landing {
            Some(fault) => Err(injected_error(fault, location)),
            None => Ok(result),
        }
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.faults
            .before(Operation::PutMultipart, location)
            .await?;
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(FaultyUpload {
            inner,
            faults: self.faults.clone(),
            location: location.clone(),
        }))
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.faults.before(Operation::Get, location).await?;
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.faults.before(Operation::Get, location).await?;
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let faults = self.faults.clone();
        let inner = Arc::clone(&self.inner);
        // One inner delete per location, so a fault hits exactly the location it was charged to.
        locations
            .then(move |location| {
                let faults = faults.clone();
                let inner = Arc::clone(&inner);
                async move {
                    let location = location?;
                    faults.before(Operation::Delete, &location).await?;
                    inner.delete(&location).await?;
                    Ok(location)
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let listing = self.inner.list(prefix);
        self.faulted_list(prefix, listing)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let listing = self.inner.list_with_offset(prefix, offset);
        self.faulted_list(prefix, listing)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.faults
            .before(Operation::List, &prefix.cloned().unwrap_or_default())
            .await?;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.faults.before(Operation::Copy, to).await?;
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        self.faults.before(Operation::Rename, to).await?;
        self.inner.rename_opts(from, to, options).await
    }
}

impl FaultyObjectStore {
    /// `list` is not async: the fault is decided at the call, the latency and error happen when
    /// the stream is first polled.
    fn faulted_list(
        &self,
        prefix: Option<&Path>,
        listing: BoxStream<'static, object_store::Result<ObjectMeta>>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let faults = self.faults.clone();
        let location = prefix.cloned().unwrap_or_default();
        stream::once(async move {
            match faults.before(Operation::List, &location).await {
                Ok(()) => listing,
                Err(error) => stream::once(async move { Err(error) }).boxed(),
            }
        })
        .flatten()
        .boxed()
    }
}

/// A multipart upload whose parts, completion and abort go through the same faults.
#[derive(Debug)]
struct FaultyUpload {
    inner: Box<dyn MultipartUpload>,
    faults: Faults,
    location: Path,
}

#[async_trait]
impl MultipartUpload for FaultyUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        let faults = self.faults.clone();
        let location = self.location.clone();
        let part = self.inner.put_part(data);
        async move {
            faults.before(Operation::PutMultipart, &location).await?;
            part.await
        }
        .boxed()
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        let landing = self
            .faults
            .before_write(Operation::PutMultipart, &self.location, true)
            .await?;
        let result = self.inner.complete().await?;
        match landing {
            Some(fault) => Err(injected_error(fault, &self.location)),
            None => Ok(result),
        }
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        self.faults
            .before(Operation::PutMultipart, &self.location)
            .await?;
        self.inner.abort().await
    }
}
