//! Liveness per worker: one session renewal keeps every attempt claimed in
//! it alive; a session that is not renewed lets them all be dispatched
//! again, and its worker is told so; reports stay fenced per attempt.
//! Sessions expire by waiting (1 s leases), as a frozen worker's would.

use std::time::Duration;

use taskstore::StoreError;
use taskstore::domain::{Claimant, Renewal, SessionRenewal, TaskStatus, WorkerSession};

use super::*;
use crate::assert_err;
use crate::common::{Backend, Stores};

fn in_session(worker: &str, session: &WorkerSession) -> Claimant {
    Claimant {
        worker: worker.to_owned(),
        session: Some(session.clone()),
    }
}

fn session(name: &str) -> WorkerSession {
    WorkerSession::parse(name).expect("session id")
}

/// Three attempts outlive their 1 s leases on one renewal per period, none
/// of them renewed on its own, and their results are stored.
pub async fn one_session_renewal_keeps_every_attempt_alive(backend: &dyn Backend) {
    let Stores {
        store,
        execution,
        dispatch,
        ..
    } = backend.stores(with_policy(short_leases())).await;
    let steady = session("steady-1");
    assert!(matches!(
        execution
            .renew_session("steady", &steady, true)
            .await
            .expect("open"),
        SessionRenewal::KeepRunning { lease_duration } if lease_duration == Duration::from_secs(1)
    ));
    let mut claims = Vec::new();
    for _ in 0..3 {
        let id = dispatched(&store, None).await;
        let claim = execution
            .claim_as(&tenant(), &id, 1, &in_session("steady", &steady))
            .await
            .expect("claim");
        assert!(claim.in_session, "bound to the live session");
        claims.push((id, claim));
    }
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(350)).await;
        assert!(matches!(
            execution
                .renew_session("steady", &steady, false)
                .await
                .expect("renew"),
            SessionRenewal::KeepRunning { .. }
        ));
        assert_eq!(
            dispatch.reap_expired_leases().await.expect("reap"),
            0,
            "attempts of a live session are left alone"
        );
    }
    for (id, claim) in &claims {
        store
            .store_result(&all(), id, result(&claim.lease_token))
            .await
            .expect("store");
        let task = store.get_task(&all(), id).await.expect("get");
        assert_eq!(task.status, TaskStatus::Completed);
    }
}

/// A frozen worker: its session expires, every attempt claimed in it is
/// dispatched again, its renewal says the session is over, and its late
/// reports are refused. Another
/// worker's session is untouched.
pub async fn an_expired_session_dispatches_its_attempts_again_and_fences_them(
    backend: &dyn Backend,
) {
    let Stores {
        store,
        execution,
        dispatch,
        ..
    } = backend.stores(with_policy(short_leases())).await;
    let (frozen, healthy) = (session("frozen-1"), session("healthy-1"));
    for (name, s) in [("frozen", &frozen), ("healthy", &healthy)] {
        execution.renew_session(name, s, true).await.expect("open");
    }
    let mut lost = Vec::new();
    for _ in 0..2 {
        let id = dispatched(&store, None).await;
        let claim = execution
            .claim_as(&tenant(), &id, 1, &in_session("frozen", &frozen))
            .await
            .expect("claim");
        lost.push((id, claim));
    }
    let kept = dispatched(&store, None).await;
    let kept_claim = execution
        .claim_as(&tenant(), &kept, 1, &in_session("healthy", &healthy))
        .await
        .expect("claim");
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        execution
            .renew_session("healthy", &healthy, false)
            .await
            .expect("renew");
    }
    assert_eq!(dispatch.reap_expired_leases().await.expect("reap"), 2);

    // (Opening a session under its old id would be harmless: its
    // attempts no longer name it. Workers open new sessions under new ids.)
    assert_eq!(
        execution
            .renew_session("frozen", &frozen, false)
            .await
            .expect("renew"),
        SessionRenewal::Over,
        "an expired session stays over"
    );
    // A claim the frozen worker makes before it hears so is not bound to
    // the session that is over: it lives by its own lease, which the
    // attempt renews, and is not reaped.
    let late = dispatched(&store, None).await;
    let late_claim = execution
        .claim_as(&tenant(), &late, 1, &in_session("frozen", &frozen))
        .await
        .expect("claim");
    assert!(!late_claim.in_session, "the session is over: not bound");
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        execution
            .renew_session("healthy", &healthy, false)
            .await
            .expect("renew");
        assert_eq!(
            execution
                .renew(&tenant(), &late, &late_claim.lease_token)
                .await
                .expect("renew the lease"),
            Renewal::KeepRunning
        );
    }
    assert_eq!(dispatch.reap_expired_leases().await.expect("reap"), 0);
    store
        .store_result(&all(), &late, result(&late_claim.lease_token))
        .await
        .expect("the late claim reports on its own lease");
    for (id, claim) in &lost {
        let task = store.get_task(&all(), id).await.expect("get");
        let message = task.status_message.unwrap_or_default();
        assert!(message.contains("dispatched again"), "{message}");
        assert!(matches!(
            execution
                .renew(&tenant(), id, &claim.lease_token)
                .await
                .expect("renew"),
            Renewal::Stop(_)
        ));
        assert_err!(
            store
                .store_result(&all(), id, result(&claim.lease_token))
                .await,
            StoreError::FailedPrecondition(_)
        );
        let again = execution
            .claim(&tenant(), id, 2, "healthy")
            .await
            .expect("claimed again");
        assert_eq!(again.attempt, 2);
        assert!(!again.in_session, "claimed without a session");
    }
    store
        .store_result(&all(), &kept, result(&kept_claim.lease_token))
        .await
        .expect("the healthy session's attempt reports");
}

/// A session never opened keeps nothing alive: renewing it is refused, and
/// an attempt claimed in it lives by its own lease only.
pub async fn an_unknown_session_keeps_nothing_alive(backend: &dyn Backend) {
    let Stores {
        store,
        execution,
        dispatch,
        ..
    } = backend.stores(with_policy(short_leases())).await;
    let ghost = session("never-opened");
    assert_eq!(
        execution
            .renew_session("ghost", &ghost, false)
            .await
            .expect("renew"),
        SessionRenewal::Over
    );
    let id = dispatched(&store, None).await;
    let claim = execution
        .claim_as(&tenant(), &id, 1, &in_session("ghost", &ghost))
        .await
        .expect("claim");
    assert!(!claim.in_session, "told to renew its own lease");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(dispatch.reap_expired_leases().await.expect("reap"), 1);
}
