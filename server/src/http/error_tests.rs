//! One row per mapping: every variant of every error the HTTP layer converts, and the code it
//! must answer with. A variant added without a row here is still forced through the exhaustive
//! matches in `error.rs`; a row here pins the decision that match made.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use strata_openapi::ErrorCode;

use super::ApiError;
use crate::broker::error::{
    DeleteRecordsError, FetchError, GroupOpError, ListOffsetsError, LookupError, OffsetOutOfRange,
    ProduceError, TopicError,
};
use crate::broker::reader::ReaderError;
use crate::groups::coordinator::GroupError;
use crate::groups::offsets::OffsetStoreError;
use crate::io::IoError;
use crate::log::batch::BatchError;
use crate::log::producer_state::ProducerError;
use crate::log::remote::RemoteReadError;
use crate::log::segment::SegmentReadError;
use crate::log::{AppendError, OpenError, ReadError};
use crate::names::InvalidName;
use crate::producers::ProducerRegistryError;
use crate::tiering::TieringError;
use crate::topics::catalog::CatalogError;

fn io(errno: i32) -> IoError {
    IoError::new("write", "/data/x", std::io::Error::from_raw_os_error(errno))
}

fn lookup() -> LookupError {
    LookupError::TopicNotFound { topic: "t".into() }
}

fn range() -> OffsetOutOfRange {
    OffsetOutOfRange {
        requested: 9,
        earliest: 2,
        latest: 5,
    }
}

fn corrupt_segment() -> SegmentReadError {
    SegmentReadError::Corrupt {
        path: "/data/x.log".into(),
        position: 0,
        source: BatchError::BadMagic(1),
    }
}

fn store_error(not_found: bool) -> object_store::Error {
    if not_found {
        object_store::Error::NotFound {
            path: "k".into(),
            source: "gone".into(),
        }
    } else {
        object_store::Error::Generic {
            store: "s3",
            source: "connection refused".into(),
        }
    }
}

fn remote_corrupt() -> TieringError {
    TieringError::Corrupt {
        key: "k".into(),
        reason: "bad crc".into(),
    }
}

fn check(cases: Vec<(ApiError, ErrorCode)>) {
    for (index, (error, code)) in cases.into_iter().enumerate() {
        assert_eq!(error.code(), code, "row {index}: {:?}", error.body());
    }
}

#[test]
fn lookup_errors_name_what_is_missing() {
    check(vec![
        (lookup().into(), ErrorCode::TopicNotFound),
        (
            LookupError::PartitionNotFound {
                topic: "t".into(),
                partition: 3,
                count: 1,
            }
            .into(),
            ErrorCode::PartitionNotFound,
        ),
        (
            LookupError::InternalTopic { topic: "t".into() }.into(),
            ErrorCode::InternalTopic,
        ),
    ]);
}

#[test]
fn out_of_range_carries_the_valid_range() {
    let error = ApiError::from(range());
    assert_eq!(error.body().error.earliest_offset, Some(2));
    assert_eq!(error.body().error.latest_offset, Some(5));
    assert_eq!(
        error.into_response().status(),
        StatusCode::RANGE_NOT_SATISFIABLE
    );
}

#[test]
fn fetch_errors_tell_corrupt_from_unavailable() {
    check(vec![
        (
            FetchError::Lookup(lookup()).into(),
            ErrorCode::TopicNotFound,
        ),
        (FetchError::OffsetAndTimestamp.into(), ErrorCode::Invalid),
        (
            FetchError::OutOfRange(range()).into(),
            ErrorCode::OffsetOutOfRange,
        ),
        (
            FetchError::Read(ReaderError::Local(ReadError::Io(io(libc::EIO)))).into(),
            ErrorCode::StorageUnavailable,
        ),
        (
            FetchError::Read(ReaderError::Remote(RemoteReadError::Corrupt("crc".into()))).into(),
            ErrorCode::Corrupt,
        ),
        (
            FetchError::Corrupt(BatchError::BadMagic(1)).into(),
            ErrorCode::Corrupt,
        ),
    ]);
}

#[test]
fn list_offsets_errors_map_to_their_codes() {
    check(vec![
        (
            ListOffsetsError::Fetch(FetchError::Lookup(lookup())).into(),
            ErrorCode::TopicNotFound,
        ),
        (
            ListOffsetsError::InvalidTimestamp { timestamp: -7 }.into(),
            ErrorCode::Invalid,
        ),
        (
            ListOffsetsError::Fetch(FetchError::Corrupt(BatchError::BadMagic(1))).into(),
            ErrorCode::Corrupt,
        ),
    ]);
}

#[test]
fn produce_errors_map_to_their_codes() {
    check(vec![
        (
            ProduceError::Lookup(lookup()).into(),
            ErrorCode::TopicNotFound,
        ),
        (ProduceError::Invalid("x".into()).into(), ErrorCode::Invalid),
        (
            ProduceError::KeyRequired("x".into()).into(),
            ErrorCode::KeyRequired,
        ),
        (
            ProduceError::BadRecordBatch("x".into()).into(),
            ErrorCode::BadRecordBatch,
        ),
        (
            ProduceError::UnsupportedRecordBatch("x".into()).into(),
            ErrorCode::UnsupportedRecordBatch,
        ),
        (
            ProduceError::InvalidProducer("x".into()).into(),
            ErrorCode::InvalidProducer,
        ),
        (
            ProduceError::ProducerFenced {
                producer_id: 1,
                epoch: 0,
                current: 1,
            }
            .into(),
            ErrorCode::ProducerFenced,
        ),
        (
            ProduceError::Append(AppendError::Busy).into(),
            ErrorCode::Busy,
        ),
        (
            ProduceError::StoredRead(ReadError::Corrupt(corrupt_segment())).into(),
            ErrorCode::Corrupt,
        ),
        (
            ProduceError::Corrupt(BatchError::BadMagic(1)).into(),
            ErrorCode::Corrupt,
        ),
        (ProduceError::Internal("x").into(), ErrorCode::Internal),
    ]);
}

#[test]
fn delete_records_errors_map_to_their_codes() {
    check(vec![
        (
            DeleteRecordsError::Lookup(lookup()).into(),
            ErrorCode::TopicNotFound,
        ),
        (
            DeleteRecordsError::OutOfRange(range()).into(),
            ErrorCode::OffsetOutOfRange,
        ),
        (
            DeleteRecordsError::Remote(TieringError::Store(store_error(false))).into(),
            ErrorCode::StorageUnavailable,
        ),
        (
            DeleteRecordsError::Local(AppendError::Io(Arc::new(io(libc::ENOSPC)))).into(),
            ErrorCode::DiskFull,
        ),
        (
            DeleteRecordsError::Held {
                partition: 0,
                held_from: 3,
                id: "1".into(),
                reason: "case".into(),
            }
            .into(),
            ErrorCode::LegalHold,
        ),
    ]);
}

#[test]
fn topic_errors_map_to_their_codes() {
    check(vec![
        (
            TopicError::Lookup(lookup()).into(),
            ErrorCode::TopicNotFound,
        ),
        (
            TopicError::Catalog(CatalogError::AlreadyExists("t".into())).into(),
            ErrorCode::TopicAlreadyExists,
        ),
        (TopicError::LockWithoutWorm.into(), ErrorCode::InvalidConfig),
        (
            TopicError::Remote(remote_corrupt()).into(),
            ErrorCode::Corrupt,
        ),
    ]);
}

#[test]
fn group_operation_errors_map_to_their_codes() {
    check(vec![
        (
            GroupOpError::Lookup(lookup()).into(),
            ErrorCode::TopicNotFound,
        ),
        (
            GroupOpError::InvalidGroupId(InvalidName {
                kind: "group id",
                name: "a b".into(),
                reason: "bad",
            })
            .into(),
            ErrorCode::Invalid,
        ),
        (GroupOpError::Invalid("x".into()).into(), ErrorCode::Invalid),
        (
            GroupOpError::GroupNotFound { group: "g".into() }.into(),
            ErrorCode::GroupNotFound,
        ),
        (
            GroupOpError::LiveMembers {
                group: "g".into(),
                hint: "",
            }
            .into(),
            ErrorCode::Conflict,
        ),
        (
            GroupOpError::Membership(GroupError::Invalid("x".into())).into(),
            ErrorCode::Invalid,
        ),
        (
            GroupOpError::Offsets(OffsetStoreError::Corrupt {
                offset: 0,
                reason: "x".into(),
            })
            .into(),
            ErrorCode::Corrupt,
        ),
        (
            GroupOpError::NoValidOffset("x".into()).into(),
            ErrorCode::NoValidOffset,
        ),
        (
            GroupOpError::OutOfRange(range()).into(),
            ErrorCode::OffsetOutOfRange,
        ),
        (
            GroupOpError::Fetch(FetchError::OffsetAndTimestamp).into(),
            ErrorCode::Invalid,
        ),
        (
            GroupOpError::Read(ReadError::Io(io(libc::EMFILE))).into(),
            ErrorCode::TooManyOpenFiles,
        ),
    ]);
}

#[test]
fn membership_errors_map_to_their_codes() {
    let group = || "g".to_string();
    check(vec![
        (
            GroupError::UnknownMember {
                group: group(),
                member_id: "m".into(),
            }
            .into(),
            ErrorCode::UnknownMember,
        ),
        (
            GroupError::StaleGeneration {
                group: group(),
                got: 1,
                current: 2,
            }
            .into(),
            ErrorCode::StaleGeneration,
        ),
        (
            GroupError::NotAssigned {
                member_id: "m".into(),
                topic: "t".into(),
                partition: 0,
            }
            .into(),
            ErrorCode::PartitionNotAssigned,
        ),
        (
            GroupError::GroupHasMembers(group()).into(),
            ErrorCode::Conflict,
        ),
        (
            GroupError::InconsistentStrategy {
                group: group(),
                current: crate::groups::assignment::AssignmentStrategy::Range,
                requested: crate::groups::assignment::AssignmentStrategy::Sticky,
            }
            .into(),
            ErrorCode::Conflict,
        ),
        (GroupError::Invalid("x".into()).into(), ErrorCode::Invalid),
    ]);
}

#[test]
fn offset_store_and_producer_registry_errors_map_to_their_codes() {
    check(vec![
        (
            OffsetStoreError::Append(AppendError::Closed).into(),
            ErrorCode::Unavailable,
        ),
        (
            OffsetStoreError::Read(ReadError::Corrupt(corrupt_segment())).into(),
            ErrorCode::Corrupt,
        ),
        (
            OffsetStoreError::Corrupt {
                offset: 1,
                reason: "x".into(),
            }
            .into(),
            ErrorCode::Corrupt,
        ),
        (
            ProducerRegistryError::Unknown(7).into(),
            ErrorCode::ProducerNotFound,
        ),
        (
            ProducerRegistryError::EpochExhausted(7).into(),
            ErrorCode::InvalidProducer,
        ),
        (
            ProducerRegistryError::Io(io(libc::EIO)).into(),
            ErrorCode::StorageUnavailable,
        ),
        (
            ProducerRegistryError::Corrupt {
                path: "/p".into(),
                reason: "x".into(),
            }
            .into(),
            ErrorCode::Corrupt,
        ),
    ]);
}

#[test]
fn engine_append_and_read_errors_map_to_their_codes() {
    check(vec![
        (AppendError::Busy.into(), ErrorCode::Busy),
        (AppendError::Closed.into(), ErrorCode::Unavailable),
        (
            AppendError::BatchTooLarge { size: 2, limit: 1 }.into(),
            ErrorCode::RecordTooLarge,
        ),
        (
            AppendError::Io(Arc::new(io(libc::ENOSPC))).into(),
            ErrorCode::DiskFull,
        ),
        (
            AppendError::Io(Arc::new(io(libc::ENFILE))).into(),
            ErrorCode::TooManyOpenFiles,
        ),
        (
            AppendError::Io(Arc::new(io(libc::EIO))).into(),
            ErrorCode::StorageUnavailable,
        ),
        (
            AppendError::Poisoned { reason: "x".into() }.into(),
            ErrorCode::StorageUnavailable,
        ),
        (
            AppendError::OffsetMismatch {
                expected: 1,
                actual: 2,
            }
            .into(),
            ErrorCode::OffsetMismatch,
        ),
        (
            AppendError::OffsetOutOfRange(OffsetOutOfRange {
                requested: 9,
                earliest: 0,
                latest: 3,
            })
            .into(),
            ErrorCode::OffsetOutOfRange,
        ),
        (
            AppendError::Producer(ProducerError::Fenced {
                producer_id: 1,
                epoch: 0,
                current_epoch: 1,
            })
            .into(),
            ErrorCode::ProducerFenced,
        ),
        (
            AppendError::Producer(ProducerError::SequenceGap {
                producer_id: 1,
                sequence: 3,
                expected: 1,
            })
            .into(),
            ErrorCode::SequenceGap,
        ),
        (
            ReadError::OffsetOutOfRange(OffsetOutOfRange {
                requested: 9,
                earliest: 0,
                latest: 3,
            })
            .into(),
            ErrorCode::OffsetOutOfRange,
        ),
        (
            ReadError::Corrupt(corrupt_segment()).into(),
            ErrorCode::Corrupt,
        ),
        (
            ReadError::Io(io(libc::EIO)).into(),
            ErrorCode::StorageUnavailable,
        ),
    ]);
}

#[test]
fn catalog_errors_map_to_their_codes() {
    check(vec![
        (
            CatalogError::NotFound("t".into()).into(),
            ErrorCode::TopicNotFound,
        ),
        (
            CatalogError::AlreadyExists("t".into()).into(),
            ErrorCode::TopicAlreadyExists,
        ),
        (
            CatalogError::InvalidName(InvalidName {
                kind: "topic name",
                name: "..".into(),
                reason: "r",
            })
            .into(),
            ErrorCode::InvalidTopicName,
        ),
        (
            CatalogError::InvalidPartitions {
                requested: 0,
                reason: "r".into(),
            }
            .into(),
            ErrorCode::Invalid,
        ),
        (
            CatalogError::Internal("t".into()).into(),
            ErrorCode::InternalTopic,
        ),
        (
            CatalogError::Io(io(libc::ENOSPC)).into(),
            ErrorCode::DiskFull,
        ),
        (
            CatalogError::Partition(OpenError::Io(io(libc::EMFILE))).into(),
            ErrorCode::TooManyOpenFiles,
        ),
        (
            CatalogError::Partition(OpenError::Dir {
                path: "/d".into(),
                source: std::io::Error::from_raw_os_error(libc::EACCES),
            })
            .into(),
            ErrorCode::StorageUnavailable,
        ),
        (
            CatalogError::Partition(OpenError::Dir {
                path: "/d".into(),
                source: std::io::Error::from_raw_os_error(libc::ENOSPC),
            })
            .into(),
            ErrorCode::DiskFull,
        ),
        (
            CatalogError::Dir {
                path: "/d".into(),
                source: std::io::Error::from_raw_os_error(libc::EDQUOT),
            }
            .into(),
            ErrorCode::DiskFull,
        ),
        (
            CatalogError::Corrupt {
                path: "/d".into(),
                reason: "x".into(),
            }
            .into(),
            ErrorCode::Corrupt,
        ),
        (
            CatalogError::Held {
                topic: "t".into(),
                id: "1".into(),
                reason: "case".into(),
            }
            .into(),
            ErrorCode::LegalHold,
        ),
        (
            CatalogError::InvalidHold(crate::topics::holds::InvalidHold::Backwards).into(),
            ErrorCode::Invalid,
        ),
        (
            CatalogError::HoldNotFound {
                topic: "t".into(),
                id: "9".into(),
            }
            .into(),
            ErrorCode::HoldNotFound,
        ),
    ]);
}

#[test]
fn tiering_errors_tell_lost_or_corrupt_data_from_an_unreachable_store() {
    use strata_tiering::chunk_cache::ChunkError;
    use strata_tiering::manifest::ManifestError;
    let key = || object_store::path::Path::from("k");
    check(vec![
        (remote_corrupt().into(), ErrorCode::Corrupt),
        (
            TieringError::Store(store_error(true)).into(),
            ErrorCode::Corrupt,
        ),
        (
            TieringError::Store(store_error(false)).into(),
            ErrorCode::StorageUnavailable,
        ),
        (
            TieringError::Read(ChunkError::Get {
                key: key(),
                range: 0..1,
                source: Arc::new(store_error(false)),
            })
            .into(),
            ErrorCode::StorageUnavailable,
        ),
        (
            TieringError::Read(ChunkError::GetWhole {
                key: key(),
                source: Arc::new(store_error(true)),
            })
            .into(),
            ErrorCode::Corrupt,
        ),
        (
            TieringError::Read(ChunkError::WrongLength {
                key: key(),
                chunk_index: 0,
                expected: 2,
                actual: 1,
            })
            .into(),
            ErrorCode::Corrupt,
        ),
        (
            TieringError::Read(ChunkError::OutOfRange {
                key: key(),
                range: 5..9,
                len: 4,
            })
            .into(),
            ErrorCode::Internal,
        ),
        (
            TieringError::Manifest(ManifestError::Invalid {
                key: "m".into(),
                reason: "x".into(),
            })
            .into(),
            ErrorCode::Corrupt,
        ),
        (
            TieringError::Manifest(ManifestError::Fenced {
                topic: "t".into(),
                partition: 0,
                generation: 3,
            })
            .into(),
            ErrorCode::Conflict,
        ),
        (
            TieringError::Manifest(ManifestError::Store(store_error(false))).into(),
            ErrorCode::StorageUnavailable,
        ),
        (
            TieringError::Local {
                path: "/p".into(),
                reason: "x".into(),
            }
            .into(),
            ErrorCode::StorageUnavailable,
        ),
        (
            TieringError::Lock("x".into()).into(),
            ErrorCode::StorageUnavailable,
        ),
    ]);
}

#[test]
fn a_reader_error_maps_as_its_tier_does() {
    check(vec![
        (
            ReaderError::Local(ReadError::Corrupt(corrupt_segment())).into(),
            ErrorCode::Corrupt,
        ),
        (
            ReaderError::Remote(RemoteReadError::Unavailable("down".into())).into(),
            ErrorCode::StorageUnavailable,
        ),
    ]);
}

#[test]
fn remote_read_errors_map_by_kind() {
    check(vec![
        (
            RemoteReadError::Corrupt("x".into()).into(),
            ErrorCode::Corrupt,
        ),
        (
            RemoteReadError::Unavailable("x".into()).into(),
            ErrorCode::StorageUnavailable,
        ),
        (
            RemoteReadError::Interrupted("x".into()).into(),
            ErrorCode::Unavailable,
        ),
        (
            RemoteReadError::Internal("x".into()).into(),
            ErrorCode::Internal,
        ),
    ]);
}

#[test]
fn a_failed_cold_read_keeps_the_tiering_classification() {
    use crate::tiering::remote_log::as_read_error;
    check(vec![
        (as_read_error(remote_corrupt()).into(), ErrorCode::Corrupt),
        (
            as_read_error(TieringError::Store(store_error(true))).into(),
            ErrorCode::Corrupt,
        ),
        (
            as_read_error(TieringError::Store(store_error(false))).into(),
            ErrorCode::StorageUnavailable,
        ),
        (
            as_read_error(TieringError::Fenced {
                topic: "t".into(),
                partition: 0,
                reason: "x".into(),
            })
            .into(),
            ErrorCode::StorageUnavailable,
        ),
    ]);
}
