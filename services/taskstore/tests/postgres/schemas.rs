//! Deployments sharing one database under different schemas (migration
//! 0026): NOTIFY reaches the whole database, so each change names its
//! schema, and a deployment's followers are shown only its own tasks,
//! even where another deployment has a tenant of the same name.

use std::time::Duration;

use taskstore::domain::{Scope, StatusUpdate, TaskStatus};
use taskstore::store::postgres::{self, PgTaskStore};
use taskstore::store::{Followed, StoreConfig, TaskStore};
use tokio_stream::StreamExt;

use super::cancelled::plain_task;
use super::common;

fn working(message: &str) -> StatusUpdate {
    StatusUpdate {
        status: TaskStatus::Working,
        message: Some(message.to_owned()),
        lease: None,
    }
}

/// A deployment on a schema of its own: `replicas` stores on it.
async fn deployment(replicas: usize) -> Vec<PgTaskStore> {
    let (options, _schema) = common::fresh_schema().await;
    let mut stores = Vec::new();
    for _ in 0..replicas {
        let pool = postgres::lazy_pool(options.clone(), common::test_pool_settings());
        postgres::migrate(&pool).await.expect("migrations apply");
        stores.push(
            PgTaskStore::open(pool, StoreConfig::default())
                .await
                .expect("store opens"),
        );
    }
    stores
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_is_shown_only_its_own_schemas_changes() {
    let all = Scope::tenant_wide();
    let ours = deployment(1).await.remove(0);
    let theirs = deployment(2).await;
    // Their second replica follows the (same-named) tenant, so their
    // changes are notified, and reach every listener of the database.
    let _their_follow = theirs[1].follow_tasks(&all).await.expect("follow");
    let mut follow = ours.follow_tasks(&all).await.expect("follow");

    let their_task = theirs[0]
        .create_task(&all, plain_task())
        .await
        .expect("create");
    theirs[0]
        .update_status(&all, &their_task.task_id, working("their secret"))
        .await
        .expect("update");
    // Ours changes after theirs: once the follow shows it, theirs had
    // every chance to arrive first.
    let our_task = ours.create_task(&all, plain_task()).await.expect("create");
    ours.update_status(&all, &our_task.task_id, working("ours"))
        .await
        .expect("update");
    loop {
        let item = tokio::time::timeout(Duration::from_secs(10), follow.next())
            .await
            .expect("our change within 10 s")
            .expect("the follow goes on");
        let Followed::Changed(changed) = item else {
            continue;
        };
        assert_eq!(
            changed.task.task_id, our_task.task_id,
            "another deployment's task was shown: {:?}",
            changed.task.status_message
        );
        if changed.task.status_message.as_deref() == Some("ours") {
            break;
        }
    }
}
