//! What a cluster's group coordinator says of a consumer group: the protocol its
//! members use (Kafka's consumer group protocol of KIP-848, or the classic one), its
//! state and its number of members. rust-rdkafka has no binding for librdkafka's
//! `DescribeConsumerGroups`, so this calls it directly.

use std::ffi::{CStr, CString, c_char};
use std::time::Duration;

use rdkafka::bindings as rd;

/// The group protocol a group's members use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupProtocol {
    /// Kafka's consumer group protocol (KIP-848, `group.protocol=consumer`).
    Consumer,
    /// The classic protocol (join, sync and heartbeat requests).
    Classic,
    /// Not known: the group does not exist (yet, or any more: state `Dead`), or the
    /// brokers did not say.
    Unknown,
}

impl GroupProtocol {
    /// `consumer`, `classic` or `unknown`.
    pub fn name(self) -> &'static str {
        match self {
            GroupProtocol::Consumer => "consumer",
            GroupProtocol::Classic => "classic",
            GroupProtocol::Unknown => "unknown",
        }
    }
}

/// How a consumer group stands on one cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupReport {
    /// The protocol its members use.
    pub protocol: GroupProtocol,
    /// The coordinator's word for its state: `Stable`, `Empty`, `Dead` (no such
    /// group), `PreparingRebalance`, …
    pub state: String,
    /// Its members now.
    pub members: usize,
}

/// Asks the group's coordinator through the client `rk`, within `timeout`.
///
/// # Safety
///
/// `rk` must be a live librdkafka client handle for the whole call.
pub(crate) unsafe fn describe_group(
    rk: *mut rd::rd_kafka_t,
    group: &str,
    timeout: Duration,
) -> Result<GroupReport, String> {
    let group = CString::new(group).map_err(|_| "a group id with a NUL byte".to_string())?;
    let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: every handle made here is destroyed here; `rk` outlives the call (the
    // caller's promise); the answer's pointers are read before its event is destroyed.
    unsafe {
        let queue = rd::rd_kafka_queue_new(rk);
        let options = rd::rd_kafka_AdminOptions_new(
            rk,
            rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS,
        );
        let mut errstr = [0 as c_char; 256];
        rd::rd_kafka_AdminOptions_set_request_timeout(
            options,
            timeout_ms,
            errstr.as_mut_ptr(),
            errstr.len(),
        );
        let mut groups = [group.as_ptr()];
        rd::rd_kafka_DescribeConsumerGroups(rk, groups.as_mut_ptr(), 1, options, queue);
        let event = rd::rd_kafka_queue_poll(queue, timeout_ms.saturating_add(1000));
        rd::rd_kafka_AdminOptions_destroy(options);
        rd::rd_kafka_queue_destroy(queue);
        if event.is_null() {
            return Err(format!("no answer within {timeout:?}"));
        }
        let answer = read_answer(event);
        rd::rd_kafka_event_destroy(event);
        answer
    }
}

/// Reads the description out of a `DescribeConsumerGroups` result event.
unsafe fn read_answer(event: *mut rd::rd_kafka_event_t) -> Result<GroupReport, String> {
    let text = |p: *const c_char| {
        if p.is_null() {
            String::new()
        } else {
            // SAFETY: librdkafka's strings are NUL-terminated and live with the event.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    // SAFETY: `event` is a live event of this request (the caller's).
    unsafe {
        if rd::rd_kafka_event_error(event) != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            return Err(text(rd::rd_kafka_event_error_string(event)));
        }
        let result = rd::rd_kafka_event_DescribeConsumerGroups_result(event);
        if result.is_null() {
            return Err("an answer of another kind".to_string());
        }
        let mut n = 0usize;
        let descriptions = rd::rd_kafka_DescribeConsumerGroups_result_groups(result, &mut n);
        if n == 0 || descriptions.is_null() {
            return Err("an empty answer".to_string());
        }
        let d = *descriptions;
        let error = rd::rd_kafka_ConsumerGroupDescription_error(d);
        if !error.is_null() {
            return Err(text(rd::rd_kafka_error_string(error)));
        }
        use rd::rd_kafka_consumer_group_state_t as S;
        use rd::rd_kafka_consumer_group_type_t as T;
        let state = rd::rd_kafka_ConsumerGroupDescription_state(d);
        // A group that does not exist is `Dead`; brokers answering with the classic
        // API call it classic all the same.
        let protocol = match rd::rd_kafka_ConsumerGroupDescription_type(d) {
            _ if state == S::RD_KAFKA_CONSUMER_GROUP_STATE_DEAD => GroupProtocol::Unknown,
            T::RD_KAFKA_CONSUMER_GROUP_TYPE_CONSUMER => GroupProtocol::Consumer,
            T::RD_KAFKA_CONSUMER_GROUP_TYPE_CLASSIC => GroupProtocol::Classic,
            _ => GroupProtocol::Unknown,
        };
        Ok(GroupReport {
            protocol,
            state: text(rd::rd_kafka_consumer_group_state_name(state)),
            members: rd::rd_kafka_ConsumerGroupDescription_member_count(d),
        })
    }
}
