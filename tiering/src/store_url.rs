//! The object-store setting as written by an operator: a folder (`/var/lib/strata/tier`,
//! `file:///var/lib/strata/tier`) or an S3 bucket with an optional key prefix
//! (`s3://bucket/some/prefix`). Parsing only: nothing here touches the disk or the network, so a
//! bad setting is reported before anything starts.
//!
//! Invariants: an S3 bucket name is a valid S3 name (3-63 of `a-z 0-9 . -`, starting and ending
//! with a letter or digit), never case-folded; the prefix is an `object_store` [`Path`] (no empty,
//! `.` or `..` segments), empty when the URL has none.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use object_store::path::Path;

/// Where tiered objects live, parsed from the object-store setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// A folder on this machine (the default: under the data directory). Relative paths are
    /// resolved against the working directory when the store is opened.
    Local {
        /// The folder; created when the store is opened.
        root: PathBuf,
    },
    /// An S3 (or S3-compatible) bucket; every key Strata writes starts with `prefix`.
    S3 {
        /// The bucket name, exactly as given.
        bucket: String,
        /// The key prefix (empty for the whole bucket).
        prefix: Path,
    },
}

/// Why an object-store setting is not usable.
#[derive(Debug, thiserror::Error)]
pub enum StoreUrlError {
    /// Nothing was given.
    #[error("the object store setting is empty")]
    Empty,
    /// A URL with a scheme other than `file` or `s3`.
    #[error(
        "unsupported scheme `{scheme}` in object store setting `{url}` \
         (use a folder path, file:///absolute/path or s3://bucket/prefix)"
    )]
    UnsupportedScheme {
        /// The setting as given.
        url: String,
        /// Its scheme.
        scheme: String,
    },
    /// A `file:` URL that does not name an absolute local path.
    #[error("invalid file URL `{url}`: expected file:///absolute/path")]
    InvalidFileUrl {
        /// The setting as given.
        url: String,
    },
    /// `s3://` without a bucket.
    #[error("missing bucket in `{url}`: expected s3://bucket/prefix")]
    MissingBucket {
        /// The setting as given.
        url: String,
    },
    /// A bucket name S3 would reject.
    #[error(
        "invalid bucket name `{bucket}` in `{url}`: S3 bucket names are 3-63 characters of \
         a-z, 0-9, '.' and '-', starting and ending with a letter or digit"
    )]
    InvalidBucket {
        /// The setting as given.
        url: String,
        /// The rejected bucket name.
        bucket: String,
    },
    /// A query string or fragment, which would otherwise be silently taken as part of a key.
    #[error("`{url}` has a query or fragment; an object store URL is s3://bucket/prefix")]
    QueryOrFragment {
        /// The setting as given.
        url: String,
    },
    /// A key prefix that is not a valid object path (e.g. `a//b` or `..`).
    #[error("invalid key prefix in `{url}`")]
    InvalidPrefix {
        /// The setting as given.
        url: String,
        /// Why `object_store` rejected the prefix.
        #[source]
        source: object_store::path::Error,
    },
}

impl FromStr for StoreUrl {
    type Err = StoreUrlError;

    fn from_str(setting: &str) -> Result<Self, Self::Err> {
        let setting = setting.trim();
        if setting.is_empty() {
            return Err(StoreUrlError::Empty);
        }
        if let Some(rest) = setting.strip_prefix("s3://") {
            return parse_s3(setting, rest);
        }
        if setting.starts_with("file:") {
            return parse_file_url(setting);
        }
        if let Some((scheme, _)) = setting.split_once("://") {
            return Err(StoreUrlError::UnsupportedScheme {
                url: setting.to_owned(),
                scheme: scheme.to_owned(),
            });
        }
        Ok(Self::Local {
            root: PathBuf::from(setting),
        })
    }
}

fn parse_s3(url: &str, rest: &str) -> Result<StoreUrl, StoreUrlError> {
    if rest.contains(['?', '#']) {
        return Err(StoreUrlError::QueryOrFragment {
            url: url.to_owned(),
        });
    }
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(StoreUrlError::MissingBucket {
            url: url.to_owned(),
        });
    }
    if !is_valid_bucket(bucket) {
        return Err(StoreUrlError::InvalidBucket {
            url: url.to_owned(),
            bucket: bucket.to_owned(),
        });
    }
    let prefix = Path::parse(prefix).map_err(|source| StoreUrlError::InvalidPrefix {
        url: url.to_owned(),
        source,
    })?;
    Ok(StoreUrl::S3 {
        bucket: bucket.to_owned(),
        prefix,
    })
}

fn parse_file_url(url: &str) -> Result<StoreUrl, StoreUrlError> {
    let invalid = || StoreUrlError::InvalidFileUrl {
        url: url.to_owned(),
    };
    let parsed = url::Url::parse(url).map_err(|_| invalid())?;
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(StoreUrlError::QueryOrFragment {
            url: url.to_owned(),
        });
    }
    // `to_file_path` accepts an empty host and `localhost`, and percent-decodes the path.
    let root = parsed.to_file_path().map_err(|()| invalid())?;
    Ok(StoreUrl::Local { root })
}

/// S3's naming rules for new buckets, the subset that matters for a URL: length, characters, and
/// letters or digits at both ends. (Names that look like IP addresses are left to S3 to refuse.)
fn is_valid_bucket(bucket: &str) -> bool {
    let bytes = bucket.as_bytes();
    let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    (3..=63).contains(&bytes.len())
        && bytes.iter().all(|b| edge(b) || *b == b'.' || *b == b'-')
        && bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Local { root } => write!(f, "{}", root.display()),
            Self::S3 { bucket, prefix } if prefix.as_ref().is_empty() => write!(f, "s3://{bucket}"),
            Self::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s3(bucket: &str, prefix: &str) -> StoreUrl {
        StoreUrl::S3 {
            bucket: bucket.to_owned(),
            prefix: Path::from(prefix),
        }
    }

    #[test]
    fn s3_url_with_prefix_parses_bucket_and_prefix() {
        assert_eq!(
            "s3://my-bucket/a/b".parse::<StoreUrl>().unwrap(),
            s3("my-bucket", "a/b")
        );
        assert_eq!(
            "s3://my-bucket/a/b/".parse::<StoreUrl>().unwrap(),
            s3("my-bucket", "a/b")
        );
    }

    #[test]
    fn s3_url_without_prefix_has_empty_prefix() {
        assert_eq!(
            "s3://bucket.example".parse::<StoreUrl>().unwrap(),
            s3("bucket.example", "")
        );
        assert_eq!(
            "s3://bucket.example/".parse::<StoreUrl>().unwrap(),
            s3("bucket.example", "")
        );
    }

    #[test]
    fn s3_url_display_round_trips() {
        for url in ["s3://bucket/a/b", "s3://bucket"] {
            assert_eq!(url.parse::<StoreUrl>().unwrap().to_string(), url);
        }
    }

    #[test]
    fn s3_url_without_bucket_is_rejected() {
        for url in ["s3://", "s3:///prefix"] {
            let err = url.parse::<StoreUrl>().unwrap_err();
            assert!(
                matches!(err, StoreUrlError::MissingBucket { .. }),
                "{url}: {err:?}"
            );
        }
    }

    #[test]
    fn s3_url_with_invalid_bucket_name_is_rejected_not_case_folded() {
        for url in [
            "s3://MyBucket/x",
            "s3://ab",
            "s3://-bucket",
            "s3://bucket-",
            "s3://a_b/x",
        ] {
            let err = url.parse::<StoreUrl>().unwrap_err();
            assert!(
                matches!(err, StoreUrlError::InvalidBucket { .. }),
                "{url}: {err:?}"
            );
        }
        let long = format!("s3://{}", "a".repeat(64));
        assert!(matches!(
            long.parse::<StoreUrl>(),
            Err(StoreUrlError::InvalidBucket { .. })
        ));
    }

    #[test]
    fn s3_url_with_bad_prefix_is_rejected() {
        for url in ["s3://bucket/a//b", "s3://bucket/a/../b", "s3://bucket/./a"] {
            let err = url.parse::<StoreUrl>().unwrap_err();
            assert!(
                matches!(err, StoreUrlError::InvalidPrefix { .. }),
                "{url}: {err:?}"
            );
        }
    }

    #[test]
    fn s3_url_with_query_or_fragment_is_rejected() {
        for url in ["s3://bucket/a?versionId=1", "s3://bucket/a#b"] {
            let err = url.parse::<StoreUrl>().unwrap_err();
            assert!(
                matches!(err, StoreUrlError::QueryOrFragment { .. }),
                "{url}: {err:?}"
            );
        }
    }

    #[test]
    fn plain_paths_are_local_folders() {
        assert_eq!(
            "/var/lib/strata/tier".parse::<StoreUrl>().unwrap(),
            StoreUrl::Local {
                root: PathBuf::from("/var/lib/strata/tier")
            }
        );
        assert_eq!(
            "data/tier".parse::<StoreUrl>().unwrap(),
            StoreUrl::Local {
                root: PathBuf::from("data/tier")
            }
        );
    }

    #[test]
    fn file_urls_are_local_folders_percent_decoded() {
        assert_eq!(
            "file:///var/lib/strata%20tier".parse::<StoreUrl>().unwrap(),
            StoreUrl::Local {
                root: PathBuf::from("/var/lib/strata tier")
            }
        );
        assert_eq!(
            "file://localhost/srv/tier".parse::<StoreUrl>().unwrap(),
            StoreUrl::Local {
                root: PathBuf::from("/srv/tier")
            }
        );
    }

    #[test]
    fn file_url_with_remote_host_is_rejected() {
        let err = "file://fileserver/srv/tier"
            .parse::<StoreUrl>()
            .unwrap_err();
        assert!(
            matches!(err, StoreUrlError::InvalidFileUrl { .. }),
            "{err:?}"
        );
    }

    #[test]
    fn other_schemes_are_rejected() {
        for url in [
            "gs://bucket/x",
            "https://s3.amazonaws.com/bucket",
            "s3a://bucket/x",
        ] {
            let err = url.parse::<StoreUrl>().unwrap_err();
            assert!(
                matches!(err, StoreUrlError::UnsupportedScheme { .. }),
                "{url}: {err:?}"
            );
        }
    }

    #[test]
    fn empty_setting_is_rejected() {
        assert!(matches!(
            "  ".parse::<StoreUrl>(),
            Err(StoreUrlError::Empty)
        ));
    }
}
