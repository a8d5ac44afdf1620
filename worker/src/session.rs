//! The worker's session (TaskExecution.RenewSession): one renewal every
//! lease / 3 keeps every attempt claimed in it alive, however many run, in
//! place of a RenewLease per attempt. When the service says the session is
//! over (this process was frozen or cut off past its lease), or no renewal
//! succeeded for a whole lease period, every attempt claimed in it stops
//! and stores nothing, and a new session opens under a new id.
//!
//! The worker opens its first session before it takes jobs (waiting at
//! most [`FIRST_OPEN_WAIT`]), so that its first claims are in it too: an
//! attempt claimed without one renews its own lease for as long as it
//! runs, hours for a long task. Until a session is open (and against a
//! service without sessions) claims carry none, and their attempts renew
//! their own leases as before.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use taskstore_proto::credentials::BearerToken;
use taskstore_proto::v1 as pb;
use tokio_util::sync::CancellationToken;
use tonic::Code;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use pb::task_execution_client::TaskExecutionClient;

/// Untraced, like the heartbeat: housekeeping, not part of any job.
type Client = TaskExecutionClient<InterceptedService<Channel, BearerToken>>;

const FIRST_RETRY: Duration = Duration::from_millis(200);
/// Half the heartbeat's (`heartbeat.rs`) on purpose: a session not renewed
/// within the lease (15 s by default) ends, and its attempts with it, so a
/// renewal retries at least twice within one; a late heartbeat costs only
/// the listing's freshness.
const MAX_RETRY: Duration = Duration::from_secs(5);
/// Until the service names the lease duration.
const DEFAULT_LEASE: Duration = Duration::from_secs(15);
/// The longest the worker waits for its first session before it takes
/// jobs anyway (the service is slow, or refuses it for now).
pub(crate) const FIRST_OPEN_WAIT: Duration = Duration::from_secs(5);

/// An open session, as a claim and its attempt need it.
#[derive(Debug, Clone)]
pub(crate) struct OpenSession {
    /// A secret like a lease token: never logged.
    pub id: String,
    /// Fires when the session is over: its attempts must stop.
    pub over: CancellationToken,
}

/// The worker's current session, if one is open.
#[derive(Debug, Clone, Default)]
pub(crate) struct Session {
    current: Arc<Mutex<Option<OpenSession>>>,
    /// Fires once the first session opened, or it is known none will.
    first_settled: CancellationToken,
}

impl Session {
    /// The session to claim in now; `None`: claim without one.
    pub(crate) fn current(&self) -> Option<OpenSession> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Returns once the first session is open, or none will be (no session
    /// id, a service without sessions, `keep` stopped).
    pub(crate) async fn first_settled(&self) {
        self.first_settled.cancelled().await;
    }

    fn set(&self, open: Option<OpenSession>) {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = open;
    }

    /// Opens sessions and renews them until `stop` fires (after the last
    /// attempt ended: a stopping worker's attempts stay alive meanwhile).
    pub(crate) async fn keep(self, client: Client, worker_id: String, stop: CancellationToken) {
        self.keep_opening(client, worker_id, stop).await;
        self.first_settled.cancel();
    }

    async fn keep_opening(&self, mut client: Client, worker_id: String, stop: CancellationToken) {
        while !stop.is_cancelled() {
            let id = match new_session_id() {
                Ok(id) => id,
                Err(err) => {
                    tracing::warn!(error = %err, "cannot make a session id; attempts renew their own leases");
                    return;
                }
            };
            let Some(lease) = self.open(&mut client, &worker_id, &id, &stop).await else {
                return;
            };
            let over = CancellationToken::new();
            self.set(Some(OpenSession {
                id: id.clone(),
                over: over.clone(),
            }));
            self.first_settled.cancel();
            tracing::debug!("worker session open");
            let ended = renew_until_over(&mut client, &worker_id, &id, lease, &stop).await;
            self.set(None);
            if ended {
                tracing::warn!(
                    "worker session over; stopping its attempts (they run again elsewhere)"
                );
                over.cancel();
            }
        }
    }

    /// Opens session `id`, retrying until it opens; its lease duration, or
    /// `None` when the service has no sessions or `stop` fired.
    async fn open(
        &self,
        client: &mut Client,
        worker_id: &str,
        id: &str,
        stop: &CancellationToken,
    ) -> Option<Duration> {
        let mut delay = FIRST_RETRY;
        loop {
            match renew(client, worker_id, id, true).await {
                Ok(Some(lease)) => return Some(lease),
                Ok(None) => tracing::warn!("new worker session refused; retrying"),
                Err(status) if status.code() == Code::Unimplemented => {
                    tracing::info!(
                        "the service keeps no worker sessions; attempts renew their own leases"
                    );
                    return None;
                }
                Err(status) => {
                    tracing::debug!(error = %status.message(), "cannot open a worker session yet; retrying");
                }
            }
            tokio::select! {
                () = stop.cancelled() => return None,
                () = tokio::time::sleep(delay) => {}
            }
            delay = (delay * 2).min(MAX_RETRY);
        }
    }
}

/// Renews every lease / 3. True when the session is over (refused, or not
/// renewed for a whole lease period); false when `stop` fired.
async fn renew_until_over(
    client: &mut Client,
    worker_id: &str,
    id: &str,
    mut lease: Duration,
    stop: &CancellationToken,
) -> bool {
    let mut last_renewed = tokio::time::Instant::now();
    loop {
        let every = (lease / 3).max(Duration::from_millis(100));
        tokio::select! {
            () = stop.cancelled() => return false,
            () = tokio::time::sleep(every) => {}
        }
        match renew(client, worker_id, id, false).await {
            Ok(Some(renewed)) => {
                lease = renewed;
                last_renewed = tokio::time::Instant::now();
            }
            Ok(None) => return true,
            Err(status) => {
                tracing::warn!(error = %status.message(), "worker session renewal failed");
                if last_renewed.elapsed() >= lease {
                    return true;
                }
            }
        }
    }
}

/// One RenewSession call: the lease duration, or `None` when the session
/// is over.
async fn renew(
    client: &mut Client,
    worker_id: &str,
    id: &str,
    open: bool,
) -> Result<Option<Duration>, tonic::Status> {
    let response = client
        .renew_session(pb::RenewSessionRequest {
            session_id: id.to_owned(),
            worker_id: worker_id.to_owned(),
            open,
        })
        .await?
        .into_inner();
    Ok(response.keep_running.then(|| {
        response
            .lease_duration
            .and_then(|d| Duration::try_from(d).ok())
            .unwrap_or(DEFAULT_LEASE)
    }))
}

/// 128 random bits, as hex.
fn new_session_id() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::getrandom(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
