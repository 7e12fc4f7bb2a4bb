use std::fmt;
use std::path::PathBuf;

/// Where in a metadata file something was found (1-based line and column).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SourceLocation {
    /// The file.
    pub path: PathBuf,
    /// 1-based line; 0 when unknown.
    pub line: u32,
    /// 1-based column; 0 when unknown.
    pub column: u32,
}

impl SourceLocation {
    /// A location in `path`.
    pub fn new(path: impl Into<PathBuf>, line: u32, column: u32) -> Self {
        Self {
            path: path.into(),
            line,
            column,
        }
    }
}

impl fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.path.display())
        } else {
            write!(f, "{}:{}:{}", self.path.display(), self.line, self.column)
        }
    }
}

fn at(loc: &Option<SourceLocation>) -> String {
    match loc {
        Some(l) => format!("{l}: "),
        None => String::new(),
    }
}

/// Everything that can go wrong while reading stream metadata.
///
/// Each variant renders as one line that names the file, line and column where they
/// exist, and never contains a secret value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MetadataError {
    /// The file could not be read.
    #[error("{}: cannot read metadata file: {message}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's message.
        message: String,
    },
    /// The file is not valid YAML or JSON, or does not have the expected shape
    /// (includes unknown fields).
    #[error("{}{message}", at(location))]
    Syntax {
        /// Where the parser stopped.
        location: Option<SourceLocation>,
        /// What it expected.
        message: String,
    },
    /// A cluster has no `bootstrap.servers`.
    #[error("{}cluster `{cluster}` has no bootstrap.servers", at(location))]
    MissingBootstrapServers {
        /// Where the cluster is defined.
        location: Option<SourceLocation>,
        /// The logical cluster id.
        cluster: String,
    },
    /// One logical cluster id is given two different bootstrap lists.
    #[error(
        "{}cluster `{cluster}` has bootstrap.servers `{}` here but `{}` at {}",
        at(location),
        second.escape_debug(),
        first.escape_debug(),
        first_location.as_ref().map(|l| l.to_string()).unwrap_or_else(|| "another definition".into())
    )]
    ConflictingBootstrapServers {
        /// Where the second definition is.
        location: Option<SourceLocation>,
        /// The logical cluster id.
        cluster: String,
        /// The first bootstrap list seen.
        first: String,
        /// Where the first definition is (boxed to keep the error small).
        first_location: Option<Box<SourceLocation>>,
        /// The conflicting bootstrap list.
        second: String,
    },
    /// A stream references a cluster that is not defined.
    #[error(
        "{}stream `{stream}` references undefined cluster `{cluster}`",
        at(location)
    )]
    UnknownCluster {
        /// Where the reference is.
        location: Option<SourceLocation>,
        /// The stream id.
        stream: String,
        /// The missing cluster id.
        cluster: String,
    },
    /// The same stream id is defined twice.
    #[error("{}stream `{stream}` is defined more than once", at(location))]
    DuplicateStream {
        /// Where the second definition is.
        location: Option<SourceLocation>,
        /// The stream id.
        stream: String,
    },
    /// Anything else that makes a definition invalid (empty topic list, bad id, …).
    #[error("{}{message}", at(location))]
    Invalid {
        /// Where the offending value is.
        location: Option<SourceLocation>,
        /// What is wrong with it.
        message: String,
    },
    /// A `${env:NAME}` or `${file:PATH}` reference could not be resolved.
    #[error("{}cannot resolve `${{{reference}}}`: {reason}", at(location))]
    UnresolvedReference {
        /// Where the reference is.
        location: Option<SourceLocation>,
        /// The reference without `${` `}`, e.g. `env:KAFKA_PASSWORD`.
        reference: String,
        /// Why (never the value).
        reason: String,
    },
    /// A cluster's client properties are refused before any connection
    /// ([`ClientProperties::check`](crate::properties::ClientProperties::check)),
    /// located at the refused property's key (or at the cluster when the refusal
    /// names none).
    #[error("{}cluster `{cluster}`: {refused}", at(location))]
    RefusedProperty {
        /// Where the refused property (or the cluster) is written.
        location: Option<SourceLocation>,
        /// The logical cluster id.
        cluster: String,
        /// The property, who refused it and why (never its value; boxed to keep the
        /// error small).
        refused: Box<crate::base::properties::RefusedProperty>,
    },
    /// A cluster's admin API failed (single-cluster service).
    #[error("cluster `{cluster}`: {message}")]
    Cluster {
        /// The logical cluster id.
        cluster: String,
        /// The client's message.
        message: String,
    },
    /// A metadata service of the program's own failed (an HTTP endpoint that does
    /// not answer, say). Implementations of
    /// [`KafkaMetadataService`](crate::metadata::KafkaMetadataService) return this for
    /// their own failures; the source reads on with the last good metadata.
    #[error("{service}: {message}")]
    Service {
        /// Which service (its name or address, never a credential).
        service: String,
        /// What failed.
        message: String,
        /// Whether asking again later may succeed.
        retriable: bool,
    },
    /// The service was closed.
    #[error("the metadata service is closed")]
    Closed,
}

impl MetadataError {
    /// Whether reading the metadata again may succeed without a change: a file that
    /// could not be read, a cluster or a service that failed for now. Not for a file
    /// whose content is invalid (it must be edited) or a closed service.
    pub fn is_retriable(&self) -> bool {
        match self {
            MetadataError::Io { .. } | MetadataError::Cluster { .. } => true,
            MetadataError::Service { retriable, .. } => *retriable,
            _ => false,
        }
    }

    /// The file location the error points at, if any.
    pub fn location(&self) -> Option<&SourceLocation> {
        match self {
            MetadataError::Syntax { location, .. }
            | MetadataError::MissingBootstrapServers { location, .. }
            | MetadataError::ConflictingBootstrapServers { location, .. }
            | MetadataError::UnknownCluster { location, .. }
            | MetadataError::DuplicateStream { location, .. }
            | MetadataError::Invalid { location, .. }
            | MetadataError::UnresolvedReference { location, .. } => location.as_ref(),
            _ => None,
        }
    }
}
