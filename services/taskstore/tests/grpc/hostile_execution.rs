//! Hostile input on the execution API (claim, renew, release, ask,
//! heartbeat): refused with a clear status, and nothing changed.

use taskstore::grpc::{InputLimits, pb};
use tonic::Code;

use crate::{dispatch_request, server};

#[tokio::test]
async fn the_execution_api_refuses_hostile_input_and_changes_nothing() {
    let (mut store, channel, _) = server(InputLimits::default()).await;
    let id = store
        .create_task(dispatch_request())
        .await
        .expect("create")
        .into_inner()
        .task_id;
    let mut client = pb::task_execution_client::TaskExecutionClient::new(channel);

    let claim = |task_id: &str, worker_id: &str, tenant_id: &str| pb::ClaimTaskRequest {
        task_id: task_id.into(),
        generation: 1,
        worker_id: worker_id.into(),
        tenant_id: tenant_id.into(),
        ..Default::default()
    };
    let long_worker = "w".repeat(300);
    for (request, what) in [
        (claim("", "w", ""), "empty task id"),
        (claim("a b", "w", ""), "bad task id"),
        (claim(&id, "", ""), "empty worker id"),
        (claim(&id, &long_worker, ""), "huge worker id"),
        (claim(&id, "w\n", ""), "control characters"),
        (claim(&id, "w", "bad tenant"), "bad tenant"),
    ] {
        let status = client.claim_task(request).await.expect_err(what);
        assert_eq!(status.code(), Code::InvalidArgument, "{what}: {status:?}");
    }
    let status = client
        .claim_task(pb::ClaimTaskRequest {
            generation: u64::MAX,
            ..claim(&id, "w", "")
        })
        .await
        .expect_err("generation out of range");
    assert_eq!(status.code(), Code::InvalidArgument);
    for (session_id, what) in [("a b", "bad session"), (&*"s".repeat(65), "huge session")] {
        let status = client
            .claim_task(pb::ClaimTaskRequest {
                session_id: session_id.into(),
                ..claim(&id, "w", "")
            })
            .await
            .expect_err(what);
        assert_eq!(status.code(), Code::InvalidArgument, "{what}: {status:?}");
    }
    let session = |session_id: &str, worker_id: &str| pb::RenewSessionRequest {
        session_id: session_id.into(),
        worker_id: worker_id.into(),
        open: true,
    };
    for (request, what) in [
        (session("", "w"), "empty session"),
        (session("a\nb", "w"), "control characters in the session"),
        (session(&"s".repeat(65), "w"), "huge session"),
        (session("s-1", ""), "empty worker id"),
        (session("s-1", &long_worker), "huge worker id"),
    ] {
        let status = client.renew_session(request).await.expect_err(what);
        assert_eq!(status.code(), Code::InvalidArgument, "{what}: {status:?}");
    }

    let renew = pb::RenewLeaseRequest {
        task_id: id.to_string(),
        lease_token: String::new(),
        tenant_id: String::new(),
    };
    assert_eq!(
        client
            .renew_lease(renew)
            .await
            .expect_err("empty token")
            .code(),
        Code::InvalidArgument
    );
    for reason in [0, 99, -7] {
        let release = pb::ReleaseTaskRequest {
            back_off_until: None,
            task_id: id.to_string(),
            lease_token: "token".into(),
            reason,
            message: String::new(),
            tenant_id: String::new(),
        };
        assert_eq!(
            client
                .release_task(release)
                .await
                .expect_err("bad reason")
                .code(),
            Code::InvalidArgument
        );
    }
    // A back-off needs its time, within a day.
    let far = std::time::SystemTime::now() + std::time::Duration::from_secs(25 * 3600);
    for until in [
        None,
        Some(prost_types::Timestamp::from(far)),
        Some(prost_types::Timestamp {
            seconds: i64::MAX,
            nanos: 0,
        }),
    ] {
        let release = pb::ReleaseTaskRequest {
            back_off_until: until,
            task_id: id.to_string(),
            lease_token: "token".into(),
            reason: pb::ReleaseReason::BackOff.into(),
            message: String::new(),
            tenant_id: String::new(),
        };
        let refused = client
            .release_task(release)
            .await
            .expect_err("bad back-off");
        assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
        assert!(
            refused.message().starts_with("back_off_until"),
            "{refused:?}"
        );
    }
    let forged = pb::ReleaseTaskRequest {
        back_off_until: None,
        task_id: id.to_string(),
        lease_token: "forged".into(),
        reason: pb::ReleaseReason::Shutdown.into(),
        message: String::new(),
        tenant_id: String::new(),
    };
    assert_eq!(
        client
            .release_task(forged)
            .await
            .expect_err("not the lease")
            .code(),
        Code::FailedPrecondition
    );

    // Nothing above changed the task: the real claim still works.
    let granted = client
        .claim_task(claim(&id, "w", ""))
        .await
        .expect("claim")
        .into_inner();
    assert_eq!(granted.attempt, 1);
    assert_eq!(granted.tool, "echo");
}
