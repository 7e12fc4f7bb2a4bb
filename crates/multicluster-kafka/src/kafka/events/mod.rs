//! Serving each client's events: its log lines, errors, statistics and OAUTHBEARER
//! token requests, by the process's event thread ([`hub`]) or by a thread of the
//! client's own, and the one way clients of the source are made ([`Served`]).

pub(crate) mod context;
mod hub;

pub(crate) use context::{ClientRole, SourceContext};

use std::error::Error;
use std::ffi::{CStr, CString, c_char, c_int};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use rdkafka::ClientConfig;
use rdkafka::bindings as rd;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use crate::kafka::config::init_tls;

/// Routes a client's OAUTHBEARER token requests (its SASL queue, which [`prepare`]
/// turned on): to `queue` when a hook provides the tokens, else to librdkafka's
/// background thread, which serves OIDC and unsecured JWTs itself.
///
/// # Safety
/// `client` and `queue` are live.
pub(crate) unsafe fn route_token_requests(
    client: *mut rd::rd_kafka_t,
    queue: *mut rd::rd_kafka_queue_t,
    provider: bool,
    cluster: &str,
) {
    // SAFETY: live handles (the caller's guarantee); the SASL queue handle is
    // released once; the error is read before it is destroyed.
    unsafe {
        let sasl = rd::rd_kafka_queue_get_sasl(client);
        if sasl.is_null() {
            return;
        }
        if provider {
            rd::rd_kafka_queue_forward(sasl, queue);
        } else {
            let err = rd::rd_kafka_sasl_background_callbacks_enable(client);
            if !err.is_null() {
                let text = CStr::from_ptr(rd::rd_kafka_error_string(err))
                    .to_string_lossy()
                    .into_owned();
                tracing::warn!(cluster = %cluster, error = %text, "cannot serve OAUTHBEARER token refreshes in the background");
                rd::rd_kafka_error_destroy(err);
            }
        }
        rd::rd_kafka_queue_destroy(sasl);
    }
}

/// A librdkafka client with the [`ClientEvents`] that serve it: the one way clients of
/// ours are made. The events stop before the client is destroyed.
pub(crate) struct Served<C> {
    /// Declared first: dropped (and so stopped) before `client`.
    _events: ClientEvents,
    client: C,
}

/// The kinds of client [`Served`] makes.
pub(crate) trait ServedClient:
    rdkafka::config::FromClientConfigAndContext<SourceContext>
{
    /// A consumer with a group id, whose main queue rdkafka forwards to its consumer
    /// queue (see [`ClientEvents::start`]).
    const CONSUMER: bool;
    fn native(&self) -> &rdkafka::client::Client<SourceContext>;
}

impl ServedClient for rdkafka::consumer::BaseConsumer<SourceContext> {
    const CONSUMER: bool = true;
    fn native(&self) -> &rdkafka::client::Client<SourceContext> {
        rdkafka::consumer::Consumer::client(self)
    }
}

impl ServedClient for rdkafka::admin::AdminClient<SourceContext> {
    const CONSUMER: bool = false;
    fn native(&self) -> &rdkafka::client::Client<SourceContext> {
        self.inner()
    }
}

impl<C: ServedClient> Served<C> {
    /// Makes a client from `config` with `context`, and starts serving its events
    /// (on `dispatch`'s subscriber, else the current one).
    pub(crate) fn create(
        config: &ClientConfig,
        context: SourceContext,
        dispatch: Option<tracing::Dispatch>,
    ) -> rdkafka::error::KafkaResult<Self> {
        init_tls();
        let client: C = config.create_with_context(context)?;
        let native = client.native();
        // SAFETY: the client is live and its opaque is this context; `_events` is
        // dropped before `client` (field order).
        let events = unsafe {
            ClientEvents::start(
                native.native_ptr(),
                native.context().clone(),
                C::CONSUMER,
                dispatch,
            )
        };
        Ok(Self {
            _events: events,
            client,
        })
    }
}

impl<C> std::ops::Deref for Served<C> {
    type Target = C;
    fn deref(&self) -> &C {
        &self.client
    }
}

/// A raw librdkafka handle moved into the event thread.
struct Raw<T>(*mut T);
// SAFETY: librdkafka handles are thread safe; the owner keeps them alive (see
// `ClientEvents::start`).
unsafe impl<T> Send for Raw<T> {}

/// The thread that serves one client's events: its log lines, errors, statistics and
/// (when a hook provides them) OAUTHBEARER token requests. Stopped and joined on drop,
/// which must happen before the client is destroyed.
pub(crate) struct ClientEvents {
    client: *mut rd::rd_kafka_t,
    queue: *mut rd::rd_kafka_queue_t,
    consumer: bool,
    /// Served by the process's event thread ([`hub`]) …
    registration: Option<hub::Registration>,
    /// … or by a thread of its own.
    stop: Arc<AtomicBool>,
    join: Option<JoinHandle<()>>,
}

// SAFETY: the handles are thread safe; they are only released in `Drop`.
unsafe impl Send for ClientEvents {}
unsafe impl Sync for ClientEvents {}

impl ClientEvents {
    /// Sends the client's log lines, its main queue (errors, statistics) and, when
    /// `context`'s hooks provide tokens, its token requests to a queue of ours, and
    /// starts the thread serving it. Without a token provider, token requests are
    /// served by librdkafka itself on its background thread (OIDC and unsecured JWT).
    /// `consumer` says the client is a consumer with a group id, whose main queue
    /// rdkafka forwarded to the consumer queue (restored on drop).
    ///
    /// # Safety
    /// `client` must be a live client whose opaque is `context`, and stay alive until
    /// the returned value is dropped.
    pub unsafe fn start(
        client: *mut rd::rd_kafka_t,
        context: Arc<SourceContext>,
        consumer: bool,
        dispatch: Option<tracing::Dispatch>,
    ) -> Self {
        // SAFETY (whole block): `client` is live by the caller's guarantee; every
        // queue handle we get is released once, here or in Drop.
        let queue = unsafe { rd::rd_kafka_queue_new(client) };
        unsafe {
            rd::rd_kafka_set_log_queue(client, queue);
            let main = rd::rd_kafka_queue_get_main(client);
            if !main.is_null() {
                rd::rd_kafka_queue_forward(main, queue);
                rd::rd_kafka_queue_destroy(main);
            }
            route_token_requests(client, queue, context.wants_tokens(), &context.cluster);
        }
        let dispatch = dispatch.unwrap_or_else(|| tracing::dispatcher::get_default(|d| d.clone()));
        if consumer {
            crate::base::dispatch::within(&dispatch, || {
                // SAFETY: a live client; its consumer queue handle is released once.
                unsafe {
                    let early = rd::rd_kafka_queue_get_consumer(client);
                    if !early.is_null() {
                        drain(client, early, &context);
                        rd::rd_kafka_queue_destroy(early);
                    }
                }
            });
        }
        let stop = Arc::new(AtomicBool::new(false));
        // A client with hooks runs the program's code on this thread: one of its own.
        let context = if context.hooks.is_none() {
            // SAFETY: `client` and `queue` live until Drop, which unregisters first.
            match unsafe { hub::register(client, queue, context, dispatch.clone()) } {
                Ok(registration) => {
                    return Self {
                        client,
                        queue,
                        consumer,
                        registration: Some(registration),
                        stop,
                        join: None,
                    };
                }
                Err(context) => context,
            }
        } else {
            context
        };
        let name = format!("mck-events-{}", context.cluster).replace('\0', "?");
        let (raw_client, raw_queue) = (Raw(client), Raw(queue));
        let join = std::thread::Builder::new()
            .name(name)
            .spawn({
                let stop = stop.clone();
                move || {
                    let _guard = crate::base::dispatch::enter(&dispatch);
                    let (client, queue) = (raw_client, raw_queue);
                    serve(client.0, queue.0, &context, &stop);
                }
            })
            .map_err(|e| tracing::warn!(error = %e, "cannot start a client event thread"))
            .ok();
        Self {
            client,
            queue,
            consumer,
            registration: None,
            stop,
            join,
        }
    }
}

impl Drop for ClientEvents {
    fn drop(&mut self) {
        self.registration = None;
        self.stop.store(true, Ordering::SeqCst);
        // SAFETY: our queue handle is live until destroyed below.
        unsafe { rd::rd_kafka_queue_yield(self.queue) };
        if let Some(join) = self.join.take() {
            let _ = join.join();
        }
        // SAFETY: the client is alive (the guarantee of `start`); routing goes back
        // to what rdkafka set up, then our handle is released once.
        unsafe {
            rd::rd_kafka_set_log_queue(self.client, std::ptr::null_mut());
            if self.consumer {
                rd::rd_kafka_poll_set_consumer(self.client);
            } else {
                let main = rd::rd_kafka_queue_get_main(self.client);
                if !main.is_null() {
                    rd::rd_kafka_queue_forward(main, std::ptr::null_mut());
                    rd::rd_kafka_queue_destroy(main);
                }
            }
            rd::rd_kafka_queue_destroy(self.queue);
        }
    }
}

fn log_level(level: c_int) -> RDKafkaLogLevel {
    match level {
        0 => RDKafkaLogLevel::Emerg,
        1 => RDKafkaLogLevel::Alert,
        2 => RDKafkaLogLevel::Critical,
        3 => RDKafkaLogLevel::Error,
        4 => RDKafkaLogLevel::Warning,
        5 => RDKafkaLogLevel::Notice,
        6 => RDKafkaLogLevel::Info,
        _ => RDKafkaLogLevel::Debug,
    }
}

/// # Safety of the raw calls
/// `client` and `queue` stay alive until `stop` is set and this returns (Drop of
/// [`ClientEvents`] joins the thread before releasing them).
fn serve(
    client: *mut rd::rd_kafka_t,
    queue: *mut rd::rd_kafka_queue_t,
    context: &SourceContext,
    stop: &AtomicBool,
) {
    while !stop.load(Ordering::SeqCst) {
        // SAFETY: a live queue; null means nothing came (or a yield).
        let event = unsafe { rd::rd_kafka_queue_poll(queue, 1000) };
        if !event.is_null() {
            // SAFETY: a live event of this live client.
            unsafe { handle(client, event, context) };
        }
    }
}

/// Serves what reached `queue` before it was drained by the event thread: librdkafka's
/// lines of the moments between making a consumer and [`ClientEvents::start`], which
/// rdkafka routes to the consumer queue (a reader's batch call would print them on
/// stderr).
///
/// # Safety
/// `client` and `queue` are live; the queue has no messages (nothing is assigned).
unsafe fn drain(
    client: *mut rd::rd_kafka_t,
    queue: *mut rd::rd_kafka_queue_t,
    context: &SourceContext,
) {
    loop {
        // SAFETY: the caller's guarantee.
        let event = unsafe { rd::rd_kafka_queue_poll(queue, 0) };
        if event.is_null() {
            break;
        }
        // SAFETY: a live event of this live client.
        unsafe { handle(client, event, context) };
    }
}

/// Hands one event to the context, and destroys it.
///
/// # Safety
/// `event` is a live event of the live `client`; it is destroyed here.
pub(super) unsafe fn handle(
    client: *mut rd::rd_kafka_t,
    event: *mut rd::rd_kafka_event_t,
    context: &SourceContext,
) {
    // SAFETY (whole body): the strings an event returns live as long as it; the event
    // is destroyed once, at the end.
    unsafe {
        match rd::rd_kafka_event_type(event) {
            rd::RD_KAFKA_EVENT_LOG => {
                let mut fac: *const c_char = std::ptr::null();
                let mut text: *const c_char = std::ptr::null();
                let mut level: c_int = 0;
                if rd::rd_kafka_event_log(event, &mut fac, &mut text, &mut level) == 0
                    && !text.is_null()
                {
                    let fac = if fac.is_null() {
                        Default::default()
                    } else {
                        CStr::from_ptr(fac).to_string_lossy()
                    };
                    let text = CStr::from_ptr(text).to_string_lossy();
                    context.log(log_level(level), fac.trim(), text.trim());
                }
            }
            rd::RD_KAFKA_EVENT_ERROR => {
                let code = rd::rd_kafka_event_error(event);
                let reason = rd::rd_kafka_event_error_string(event);
                let reason = if reason.is_null() {
                    Default::default()
                } else {
                    CStr::from_ptr(reason).to_string_lossy()
                };
                context.error(
                    KafkaError::Global(RDKafkaErrorCode::from(code)),
                    reason.trim(),
                );
            }
            rd::RD_KAFKA_EVENT_STATS => {
                let json = rd::rd_kafka_event_stats(event);
                if !json.is_null() {
                    context.stats_raw(CStr::from_ptr(json).to_bytes());
                }
            }
            rd::RD_KAFKA_EVENT_OAUTHBEARER_TOKEN_REFRESH => {
                let config = rd::rd_kafka_event_config_string(event);
                let config = (!config.is_null())
                    .then(|| CStr::from_ptr(config).to_string_lossy().into_owned());
                refresh_token(client, context, config.as_deref());
            }
            _ => {}
        }
        rd::rd_kafka_event_destroy(event);
    }
}

/// Asks the hooks for a token and hands it (or the reason there is none) to
/// librdkafka.
fn refresh_token(client: *mut rd::rd_kafka_t, context: &SourceContext, config: Option<&str>) {
    let made: Result<(CString, CString, i64), Box<dyn Error>> =
        context.generate_oauth_token(config).and_then(|t| {
            Ok((
                CString::new(t.token)?,
                CString::new(t.principal_name)?,
                t.lifetime_ms,
            ))
        });
    let mut errstr = [0 as c_char; 512];
    let failure = match made {
        Ok((token, principal, lifetime_ms)) => {
            // SAFETY: a live client; NUL-terminated strings and a buffer of the size
            // given; no extensions.
            let code = unsafe {
                rd::rd_kafka_oauthbearer_set_token(
                    client,
                    token.as_ptr(),
                    lifetime_ms,
                    principal.as_ptr(),
                    std::ptr::null_mut(),
                    0,
                    errstr.as_mut_ptr(),
                    errstr.len(),
                )
            };
            if code == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                tracing::debug!(cluster = %context.cluster, "OAUTHBEARER token set");
                return;
            }
            // SAFETY: librdkafka wrote a NUL-terminated message into the buffer.
            unsafe { CStr::from_ptr(errstr.as_ptr()) }
                .to_string_lossy()
                .into_owned()
        }
        Err(e) => format!("the token provider failed: {e}"),
    };
    tracing::warn!(cluster = %context.cluster, error = %failure, "no OAUTHBEARER token");
    let reason = CString::new(failure.replace('\0', " ")).unwrap_or_default();
    // SAFETY: a live client and a NUL-terminated string.
    unsafe { rd::rd_kafka_oauthbearer_set_token_failure(client, reason.as_ptr()) };
}
