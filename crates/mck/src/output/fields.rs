//! The parts of a record a layout shows, as the JSON writer and the layouts read them.

use std::sync::Arc;

/// The parts of a record a layout can show.
pub struct Fields<'a> {
    pub(super) cluster: &'a Arc<str>,
    pub(super) topic: &'a Arc<str>,
    pub(super) partition: i64,
    pub(super) offset: i64,
    pub(super) timestamp: Option<i64>,
    pub(super) key: Option<&'a [u8]>,
    pub(super) value: Option<&'a [u8]>,
    pub(super) headers: &'a [(String, Option<Vec<u8>>)],
    /// The subscribed streams the record belongs to (in JSON only).
    pub(super) streams: &'a Arc<[Arc<str>]>,
}
