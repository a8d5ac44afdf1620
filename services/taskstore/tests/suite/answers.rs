//! Answers are checked against what was asked (issue 38): an elicitation's
//! accepted content matches its requested schema, a decline carries
//! nothing, on every backend, directly and through gRPC. A refused answer
//! stores nothing and leaves the question open.

use taskstore::StoreError;
use taskstore::domain::{InputRequest, JsonObject, TaskStatus};
use taskstore::store::StoreConfig;

use super::*;
use crate::common::Backend;

fn answer(json: &str) -> JsonObject {
    JsonObject::parse(json).expect("answer")
}

pub async fn an_answer_that_does_not_match_the_requested_schema_is_refused(backend: &dyn Backend) {
    let stores = backend.stores(StoreConfig::default()).await;
    let (store, execution) = (&stores.store, &stores.execution);
    let id = dispatched(store, None).await;
    let lease = execution
        .claim(&tenant(), &id, 1, "w1")
        .await
        .expect("claim")
        .lease_token;
    let sure = InputRequest::parse(
        r#"{"method":"elicitation/create","params":{"message":"Format disk?","requestedSchema":{"type":"object","properties":{"sure":{"type":"boolean"}},"required":["sure"]}}}"#,
    )
    .expect("request");
    execution
        .ask(&tenant(), &id, &lease, &input_key("confirm"), &sure)
        .await
        .expect("ask");

    for (bad, field) in [
        (
            r#"{"action":"accept","content":{"sure":"yes, and also this is not a boolean","extra":[1,2,3]}}"#,
            "content.",
        ),
        (r#"{"action":"accept"}"#, "content"),
        (r#"{"action":"decline","content":{"sure":true}}"#, "decline"),
        (r#"{"action":"sure"}"#, "action"),
    ] {
        let refused = store
            .answer_questions(&all(), &id, vec![(input_key("confirm"), answer(bad))])
            .await
            .expect_err(bad);
        match refused {
            StoreError::InvalidArgument(why) => {
                assert!(
                    why.contains("answer to confirm") && why.contains(field),
                    "{bad}: {why}"
                )
            }
            other => panic!("{bad}: {other:?}"),
        }
    }
    let open = store.questions(&all(), &id).await.expect("list");
    assert!(open[0].answer.is_none(), "the question stays open");
    let task = store.get_task(&all(), &id).await.expect("get");
    assert_eq!(task.status, TaskStatus::InputRequired);

    let answered = store
        .answer_questions(
            &all(),
            &id,
            vec![(
                input_key("confirm"),
                answer(r#"{"action":"accept","content":{"sure":true}}"#),
            )],
        )
        .await
        .expect("a matching answer");
    assert_eq!(answered.taken, vec![input_key("confirm")]);
    // An answer to no open question is ignored, never checked.
    let ignored = store
        .answer_questions(
            &all(),
            &id,
            vec![(input_key("nope"), answer(r#"{"action":"whatever"}"#))],
        )
        .await
        .expect("ignored");
    assert_eq!(ignored.ignored, vec![input_key("nope")]);
}
