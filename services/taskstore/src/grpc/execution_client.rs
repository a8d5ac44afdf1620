//! An [`ExecutionStore`] that talks to a remote service's `TaskExecution`
//! API: what a worker sees, as a store, so that the execution cases of the
//! conformance suite run through gRPC exactly as against a backend.

use async_trait::async_trait;
use taskstore_proto::credentials::BearerToken;
use taskstore_telemetry::grpc::ClientTracing;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use super::client::Traced;

use super::convert::{duration_from_pb, stop_reason_from_pb};
use super::pb;
use super::pb::task_execution_client::TaskExecutionClient;
use super::status::store_error_from_status;
use crate::domain::{
    Claim, Claimant, InputKey, InputRequest, JsonObject, LeaseToken, ReleaseOutcome, ReleaseReason,
    Renewal, SessionRenewal, TaskId, TenantId, ToolName, WorkerSession,
};
use crate::error::StoreError;
use crate::store::execution::ExecutionStore;

/// The execution API's gRPC client as an [`ExecutionStore`].
#[derive(Debug, Clone)]
pub struct GrpcExecutionStore {
    client: TaskExecutionClient<Traced>,
}

impl GrpcExecutionStore {
    pub fn new(channel: Channel) -> Self {
        Self::with_token(channel, BearerToken::none())
    }

    pub fn with_token(channel: Channel, token: BearerToken) -> Self {
        Self {
            client: TaskExecutionClient::new(InterceptedService::new(
                ClientTracing::new(channel),
                token.into(),
            )),
        }
    }
}

fn malformed(what: &str) -> StoreError {
    StoreError::Internal(format!("malformed response from the server: {what}"))
}

#[async_trait]
impl ExecutionStore for GrpcExecutionStore {
    async fn claim_as(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        generation: u64,
        claimant: &Claimant,
    ) -> Result<Claim, StoreError> {
        let request = pb::ClaimTaskRequest {
            task_id: task_id.to_string(),
            generation,
            worker_id: claimant.worker.clone(),
            tenant_id: tenant.as_str().to_owned(),
            session_id: claimant
                .session
                .as_ref()
                .map(|s| s.as_str().to_owned())
                .unwrap_or_default(),
        };
        let claim = self
            .client
            .clone()
            .claim_task(request)
            .await
            .map_err(store_error_from_status)?
            .into_inner();
        Ok(Claim {
            lease_token: LeaseToken::parse(&claim.lease_token)
                .map_err(|_| malformed("lease token"))?,
            lease_duration: duration_from_pb(claim.lease_duration.unwrap_or_default())?,
            attempt: claim.attempt,
            max_attempts: claim.max_attempts,
            tool: ToolName::parse(&claim.tool).map_err(|_| malformed("tool"))?,
            request: JsonObject::parse(claim.request_json).map_err(|_| malformed("request"))?,
            waited: None,
            in_session: claim.in_session,
        })
    }

    async fn renew(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: &LeaseToken,
    ) -> Result<Renewal, StoreError> {
        let request = pb::RenewLeaseRequest {
            task_id: task_id.to_string(),
            lease_token: lease.as_str().to_owned(),
            tenant_id: tenant.as_str().to_owned(),
        };
        let response = self
            .client
            .clone()
            .renew_lease(request)
            .await
            .map_err(store_error_from_status)?
            .into_inner();
        if response.keep_running {
            return Ok(Renewal::KeepRunning);
        }
        Ok(Renewal::Stop(stop_reason_from_pb(response.stop_reason)?))
    }

    async fn renew_session(
        &self,
        worker: &str,
        session: &WorkerSession,
        open: bool,
    ) -> Result<SessionRenewal, StoreError> {
        let request = pb::RenewSessionRequest {
            session_id: session.as_str().to_owned(),
            worker_id: worker.to_owned(),
            open,
        };
        let response = self
            .client
            .clone()
            .renew_session(request)
            .await
            .map_err(store_error_from_status)?
            .into_inner();
        if !response.keep_running {
            return Ok(SessionRenewal::Over);
        }
        let lease = response
            .lease_duration
            .ok_or_else(|| malformed("lease duration"))?;
        Ok(SessionRenewal::KeepRunning {
            lease_duration: duration_from_pb(lease)?,
        })
    }

    async fn release(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: &LeaseToken,
        reason: ReleaseReason,
        message: &str,
    ) -> Result<ReleaseOutcome, StoreError> {
        let back_off_until = match reason {
            ReleaseReason::BackOff { wait } => {
                let until = std::time::SystemTime::now() + wait;
                Some(prost_types::Timestamp::from(until))
            }
            _ => None,
        };
        let request = pb::ReleaseTaskRequest {
            task_id: task_id.to_string(),
            lease_token: lease.as_str().to_owned(),
            back_off_until,
            reason: match reason {
                ReleaseReason::RetryableError => pb::ReleaseReason::RetryableError,
                ReleaseReason::Shutdown => pb::ReleaseReason::Shutdown,
                ReleaseReason::Parked => pb::ReleaseReason::Parked,
                ReleaseReason::BackOff { .. } => pb::ReleaseReason::BackOff,
            }
            .into(),
            message: message.to_owned(),
            tenant_id: tenant.as_str().to_owned(),
        };
        let response = self
            .client
            .clone()
            .release_task(request)
            .await
            .map_err(store_error_from_status)?
            .into_inner();
        Ok(if response.will_retry {
            ReleaseOutcome::Retry {
                after: duration_from_pb(response.retry_in.unwrap_or_default())?,
            }
        } else if response.parked {
            ReleaseOutcome::Parked
        } else {
            ReleaseOutcome::Failed
        })
    }

    async fn ask(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: &LeaseToken,
        key: &InputKey,
        request: &InputRequest,
    ) -> Result<Option<JsonObject>, StoreError> {
        let response = self
            .client
            .clone()
            .ask_question(pb::AskQuestionRequest {
                task_id: task_id.to_string(),
                lease_token: lease.as_str().to_owned(),
                tenant_id: tenant.as_str().to_owned(),
                key: key.to_string(),
                request_json: request.as_json().as_str().to_owned(),
            })
            .await
            .map_err(store_error_from_status)?
            .into_inner();
        response
            .answer_json
            .map(|text| JsonObject::parse(text).map_err(|err| malformed(&format!("answer {err}"))))
            .transpose()
    }
}
