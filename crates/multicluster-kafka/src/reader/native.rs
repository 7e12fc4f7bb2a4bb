//! The few librdkafka calls the reader makes without rust-rdkafka's wrappers, behind
//! a safe type:
//!
//! - [`MessageBatch`]: `rd_kafka_consume_batch_queue`, which takes every message
//!   already fetched (up to a limit) in one call. rust-rdkafka's `BaseConsumer::poll`
//!   takes one message per call, and each call reads the clock three times, allocates
//!   an event handle and serves the queue again; per record that was about a quarter of
//!   the reader's CPU.
//! - [`set_leader_epoch`]: `rd_kafka_topic_partition_set_leader_epoch` (librdkafka
//!   2.1), the leader epoch of a position in a partition list, which rust-rdkafka's
//!   `TopicPartitionList` does not expose.
//!
//! The consumer's log lines, errors, statistics and token requests do not come
//! through the consumer queue: `ClientEvents` (in `kafka/events/`) takes them to a
//! thread of their own.

use std::ffi::{CStr, CString, c_char};

use rdkafka::TopicPartitionList;
use rdkafka::bindings as rd;

/// Sets the leader epoch of `topic`/`partition`'s position in `tpl` (the epoch of
/// the record before it, which librdkafka checks the position with when it is
/// sought: KIP-320). `false` when the list does not hold the partition.
pub(crate) fn set_leader_epoch(
    tpl: &mut TopicPartitionList,
    topic: &str,
    partition: i32,
    epoch: i32,
) -> bool {
    let Ok(topic) = CString::new(topic) else {
        return false;
    };
    // SAFETY: the list is alive and ours (`&mut`), and the name a NUL-terminated
    // string; the element found lives in the list, which nothing changes while it is
    // written.
    unsafe {
        let element = rd::rd_kafka_topic_partition_list_find(tpl.ptr(), topic.as_ptr(), partition);
        if element.is_null() {
            return false;
        }
        rd::rd_kafka_topic_partition_set_leader_epoch(element, epoch);
    }
    true
}

/// Messages taken from a queue in one call; destroyed when the batch is cleared or
/// dropped.
pub(crate) struct MessageBatch {
    messages: Vec<*mut rd::rd_kafka_message_t>,
}

// SAFETY: librdkafka messages may be read and destroyed from any thread; the batch
// owns them exclusively.
unsafe impl Send for MessageBatch {}

impl MessageBatch {
    pub fn new() -> Self {
        Self {
            messages: Vec::new(),
        }
    }

    /// Takes what `queue` has now, up to `max` messages, without waiting (replacing
    /// what the batch held). Returns how many.
    ///
    /// # Safety
    /// `queue` must be a live queue handle of a live client, and the batch must be
    /// cleared (or dropped) before that client is destroyed.
    pub unsafe fn take_from(&mut self, queue: *mut rd::rd_kafka_queue_t, max: usize) -> usize {
        self.clear();
        self.messages.reserve(max);
        // SAFETY: the caller guarantees the queue; the array has room for `max`
        // pointers, and librdkafka writes at most that many.
        let n =
            unsafe { rd::rd_kafka_consume_batch_queue(queue, 0, self.messages.as_mut_ptr(), max) };
        let n = usize::try_from(n).unwrap_or(0).min(max);
        // SAFETY: librdkafka initialised the first `n` entries.
        unsafe { self.messages.set_len(n) };
        n
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// The `i`th message.
    pub fn get(&self, i: usize) -> Message<'_> {
        // SAFETY: every pointer in the batch is a live message until `clear`, which
        // needs `&mut self`.
        Message(unsafe { &*self.messages[i] })
    }

    /// Destroys the messages.
    pub fn clear(&mut self) {
        for m in self.messages.drain(..) {
            // SAFETY: each message was handed to us once and is destroyed once.
            unsafe { rd::rd_kafka_message_destroy(m) };
        }
    }
}

impl Drop for MessageBatch {
    fn drop(&mut self) {
        self.clear();
    }
}

/// A message of a [`MessageBatch`], read through safe accessors.
#[derive(Clone, Copy)]
pub(crate) struct Message<'a>(&'a rd::rd_kafka_message_t);

impl<'a> Message<'a> {
    /// The error this message carries instead of a record, if any.
    pub fn error(&self) -> Option<rd::rd_kafka_resp_err_t> {
        (self.0.err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR).then_some(self.0.err)
    }

    /// A description of the error (librdkafka's error name and details).
    pub fn error_text(&self) -> String {
        // SAFETY: both calls return NUL-terminated strings that live at least as long
        // as the message (static for the error name).
        let (name, detail) = unsafe {
            (
                CStr::from_ptr(rd::rd_kafka_err2str(self.0.err)),
                CStr::from_ptr(rd::rd_kafka_message_errstr(self.0)),
            )
        };
        let (name, detail) = (name.to_string_lossy(), detail.to_string_lossy());
        if name == detail {
            name.into_owned()
        } else {
            format!("{name}: {detail}")
        }
    }

    /// The topic handle: the same pointer for every message of a topic.
    pub fn topic_handle(&self) -> *mut rd::rd_kafka_topic_t {
        self.0.rkt
    }

    /// The topic name.
    pub fn topic(&self) -> String {
        if self.0.rkt.is_null() {
            return String::new();
        }
        // SAFETY: the topic handle lives as long as the message; its name is a
        // NUL-terminated string owned by it.
        unsafe { CStr::from_ptr(rd::rd_kafka_topic_name(self.0.rkt)) }
            .to_string_lossy()
            .into_owned()
    }

    pub fn partition(&self) -> i32 {
        self.0.partition
    }

    pub fn offset(&self) -> i64 {
        self.0.offset
    }

    /// The leader epoch of the record batch it came in, −1 when not known.
    pub fn leader_epoch(&self) -> i32 {
        // SAFETY: the message lives as long as `self`; librdkafka only reads it.
        unsafe { rd::rd_kafka_message_leader_epoch(self.0) }
    }

    /// The key, `None` when the record has none.
    pub fn key(&self) -> Option<&'a [u8]> {
        // SAFETY: librdkafka keeps `key_len` bytes at `key` while the message lives.
        (!self.0.key.is_null())
            .then(|| unsafe { std::slice::from_raw_parts(self.0.key as *const u8, self.0.key_len) })
    }

    /// The value, `None` for a tombstone.
    pub fn payload(&self) -> Option<&'a [u8]> {
        // SAFETY: librdkafka keeps `len` bytes at `payload` while the message lives.
        (!self.0.payload.is_null())
            .then(|| unsafe { std::slice::from_raw_parts(self.0.payload as *const u8, self.0.len) })
    }

    /// Create or log-append time in ms, if the record has one.
    pub fn timestamp(&self) -> Option<i64> {
        let mut kind = rd::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
        // SAFETY: a live message and a valid out-pointer.
        let ts = unsafe { rd::rd_kafka_message_timestamp(self.0, &mut kind) };
        (kind != rd::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE && ts != -1)
            .then_some(ts)
    }

    /// The headers in order (parsing them costs librdkafka an allocation).
    pub fn headers(&self) -> Vec<(String, Option<Vec<u8>>)> {
        let mut hdrs: *mut rd::rd_kafka_headers_t = std::ptr::null_mut();
        // SAFETY: a live message and a valid out-pointer; the headers belong to the
        // message.
        let err = unsafe { rd::rd_kafka_message_headers(self.0, &mut hdrs) };
        if err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || hdrs.is_null() {
            return Vec::new();
        }
        // SAFETY: `hdrs` is valid while the message lives.
        let count = unsafe { rd::rd_kafka_header_cnt(hdrs) };
        let mut out = Vec::with_capacity(count);
        for i in 0..count {
            let mut name: *const c_char = std::ptr::null();
            let mut value: *const std::ffi::c_void = std::ptr::null();
            let mut size = 0usize;
            // SAFETY: index in range, valid out-pointers; the name is NUL-terminated
            // and the value has `size` bytes, both owned by the headers.
            let err =
                unsafe { rd::rd_kafka_header_get_all(hdrs, i, &mut name, &mut value, &mut size) };
            if err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || name.is_null() {
                break;
            }
            let name = unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned();
            let value = (!value.is_null())
                .then(|| unsafe { std::slice::from_raw_parts(value as *const u8, size) }.to_vec());
            out.push((name, value));
        }
        out
    }
}
