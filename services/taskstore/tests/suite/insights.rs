//! The dashboard's searches ([`TaskInsights::search_tasks`]) on every
//! backend: newest first in keyset pages without gaps or repeats, every
//! filter alone and combined, ids and messages matched literally, and the
//! scan limit that ends a page early and continues on the next. The other
//! reads are in `insights_glance`.

use std::collections::HashSet;
use std::sync::Arc;

use taskstore::domain::{
    DispatchRequest, IdPrefix, JsonObject, MessageText, ResultStatus, SEARCH_SCAN_LIMIT,
    SearchPage, SearchPosition, SearchResults, TaskSearch, TaskStatus, ToolName, WorkerId,
};
use taskstore::store::{StoreConfig, TaskInsights};

use super::*;
use crate::common::{Backend, Stores};

pub type Insights = Arc<dyn TaskInsights>;

/// A tenant of its own, beside the default one.
pub fn other_tenant() -> Scope {
    Scope {
        tenant: TenantId::parse("other-tenant").expect("tenant"),
        session: None,
    }
}

pub fn tool(name: &str) -> ToolName {
    ToolName::parse(name).expect("tool")
}

/// A task that calls `name` (not dispatched): its tool is `name`.
pub fn calling(name: &str) -> NewTask {
    NewTask {
        request: JsonObject::parse(format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{name}"}}}}"#
        ))
        .expect("request"),
        ..new_task()
    }
}

/// A task dispatched to `name`.
pub fn dispatched_to(name: &str, max_attempts: Option<u32>) -> NewTask {
    NewTask {
        dispatch: Some(DispatchRequest {
            fairness: None,
            rate: None,
            concurrency: None,
            priority: Default::default(),
            retry: Default::default(),
            start: None,
            tool: tool(name),
            max_attempts,
        }),
        ..calling(name)
    }
}

/// `task` with the id `id`.
pub fn named(id: &str, task: NewTask) -> NewTask {
    NewTask {
        task_id: Some(TaskId::parse(id).expect("id")),
        ..task
    }
}

/// One page.
pub async fn search(
    insights: &Insights,
    search: &TaskSearch,
    size: u32,
    after: Option<SearchPosition>,
) -> SearchResults {
    insights
        .search_tasks(&tenant(), search, &SearchPage::new(Some(size), after))
        .await
        .expect("search")
}

/// Every match, following `next`, `size` at a time; no page is truncated.
pub async fn search_all(insights: &Insights, filter: &TaskSearch, size: u32) -> Vec<String> {
    let mut found = Vec::new();
    let mut after = None;
    loop {
        let page = search(insights, filter, size, after).await;
        assert!(
            page.tasks.len() <= size as usize,
            "a page holds at most its size"
        );
        assert!(!page.truncated, "nothing here reaches the scan limit");
        found.extend(ids(&page.tasks));
        match page.next {
            Some(next) => after = Some(next),
            None => return found,
        }
    }
}

/// `tasks` newest first (creation time, then id, both descending).
pub fn newest_first(tasks: &[Task]) -> Vec<String> {
    let mut tasks = tasks.to_vec();
    tasks.sort_by(|a, b| (b.created_at, &b.task_id).cmp(&(a.created_at, &a.task_id)));
    ids(&tasks)
}

async fn create_concurrently(store: &Store, count: usize, scope: &Scope) -> Vec<Task> {
    let mut creates = tokio::task::JoinSet::new();
    for _ in 0..count {
        let (store, scope) = (store.clone(), scope.clone());
        creates.spawn(async move { store.create_task(&scope, new_task()).await });
    }
    creates
        .join_all()
        .await
        .into_iter()
        .map(|created| created.expect("create"))
        .collect()
}

pub async fn search_pages_newest_first_without_gaps_or_repeats(backend: &dyn Backend) {
    let Stores {
        store, insights, ..
    } = backend.stores(StoreConfig::default()).await;
    // Concurrent creates: PostgreSQL commits them in groups, many sharing
    // one timestamp, which the id then orders.
    let mut tasks = create_concurrently(&store, 17, &all()).await;
    for _ in 0..6 {
        tasks.push(create(&store, &session("s1")).await);
    }
    let expected = newest_first(&tasks);
    let everything = TaskSearch::default();

    let first = search(&insights, &everything, 5, None).await;
    assert_eq!(ids(&first.tasks), expected[..5]);
    assert_eq!(first.next, first.tasks.last().map(SearchPosition::of));
    assert!(!first.truncated);
    // A task created after the first page is newer than every page to come.
    let newcomer = create(&store, &all()).await;
    let mut seen = ids(&first.tasks);
    let mut after = first.next;
    while let Some(position) = after {
        let page = search(&insights, &everything, 5, Some(position)).await;
        assert!(!page.tasks.is_empty(), "a next position leads to tasks");
        seen.extend(ids(&page.tasks));
        after = page.next;
    }
    assert_eq!(seen, expected, "every task once, newest first");
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), tasks.len());

    // From the start again: the newcomer first, the rest as before.
    let again = search_all(&insights, &everything, 4).await;
    assert_eq!(again[0], newcomer.task_id.to_string());
    assert_eq!(again[1..], expected);
    // One page for everything: no next.
    let whole = search(&insights, &everything, 100, None).await;
    assert_eq!(whole.tasks.len(), tasks.len() + 1);
    assert_eq!(whole.next, None);
    assert_eq!(SearchPage::new(None, None).limit(), 50);
}

pub async fn search_filters_alone_and_combined(backend: &dyn Backend) {
    let Stores {
        store,
        execution,
        insights,
        ..
    } = backend.stores(StoreConfig::default()).await;
    // Oldest first: a (s1, echo, a message), b (s2, resize, completed),
    // c (dispatched to echo, running on w-1), d (dispatched to resize, failed
    // on w-2), e (no tool: a plain request, cancelled).
    let a = store
        .create_task(&session("s1"), named("a", calling("echo")))
        .await
        .expect("a");
    store
        .update_status(
            &all(),
            &a.task_id,
            status(TaskStatus::Working, Some("Disk FULL on node 7")),
        )
        .await
        .expect("a's message");
    let b = store
        .create_task(&session("s2"), named("b", calling("resize")))
        .await
        .expect("b");
    store
        .store_result(&all(), &b.task_id, completed(r#"{"content":[]}"#))
        .await
        .expect("b completes");
    let c = store
        .create_task(&all(), named("c", dispatched_to("echo", None)))
        .await
        .expect("c");
    execution
        .claim(&tenant(), &c.task_id, 1, "w-1")
        .await
        .expect("w-1 claims c");
    let d = store
        .create_task(&all(), named("d", dispatched_to("resize", None)))
        .await
        .expect("d");
    let lease = execution
        .claim(&tenant(), &d.task_id, 1, "w-2")
        .await
        .expect("w-2 claims d")
        .lease_token;
    store
        .store_result(
            &all(),
            &d.task_id,
            NewResult {
                status: ResultStatus::Failed,
                lease: Some(lease),
                message: Some("disk full: giving up".to_owned()),
                ..completed(r#"{"isError":true,"content":[]}"#)
            },
        )
        .await
        .expect("d fails");
    let e = store
        .create_task(
            &all(),
            NewTask {
                request: JsonObject::parse(r#"{"method":"ping"}"#).expect("json"),
                ..named("e", new_task())
            },
        )
        .await
        .expect("e");
    store.cancel_task(&all(), &e.task_id).await.expect("cancel");
    assert_eq!(
        ids(&[a, b.clone(), c, d.clone(), e]),
        ["a", "b", "c", "d", "e"]
    );

    let find = |filter: TaskSearch| {
        let insights = insights.clone();
        async move { search_all(&insights, &filter, 2).await }
    };
    let none = TaskSearch::default();
    assert_eq!(find(none.clone()).await, ["e", "d", "c", "b", "a"]);
    let statuses = |s: &[TaskStatus]| TaskSearch {
        statuses: s.to_vec(),
        ..TaskSearch::default()
    };
    assert_eq!(
        find(statuses(&[TaskStatus::Completed, TaskStatus::Failed])).await,
        ["d", "b"]
    );
    assert_eq!(find(statuses(&[TaskStatus::Working])).await, ["c", "a"]);
    assert!(
        find(statuses(&[TaskStatus::InputRequired]))
            .await
            .is_empty()
    );
    let by_tool = TaskSearch {
        tool: Some(tool("resize")),
        ..TaskSearch::default()
    };
    assert_eq!(find(by_tool.clone()).await, ["d", "b"]);
    let by_session = |s: &str| TaskSearch {
        session: Some(SessionId::parse(s, 256).expect("session")),
        ..TaskSearch::default()
    };
    assert_eq!(find(by_session("s1")).await, ["a"]);
    assert_eq!(find(by_session("s2")).await, ["b"]);
    let by_worker = |w: &str| TaskSearch {
        worker: Some(WorkerId::parse(w).expect("worker")),
        ..TaskSearch::default()
    };
    assert_eq!(find(by_worker("w-1")).await, ["c"]);
    assert_eq!(
        find(by_worker("w-2")).await,
        ["d"],
        "its last attempt's worker"
    );
    assert!(find(by_worker("w-3")).await.is_empty());
    let window = TaskSearch {
        created_from: Some(b.created_at),
        created_until: Some(d.created_at),
        ..TaskSearch::default()
    };
    assert_eq!(
        find(window.clone()).await,
        ["c", "b"],
        "from inclusive, until not"
    );
    let by_message = |text: &str| TaskSearch {
        message: Some(MessageText::parse(text).expect("text")),
        ..TaskSearch::default()
    };
    assert_eq!(find(by_message("disk full")).await, ["d", "a"], "any case");
    assert_eq!(find(by_message("NODE 7")).await, ["a"]);
    assert!(find(by_message("disk  full")).await.is_empty());

    // Combined: every part must match.
    let failed_resize = TaskSearch {
        statuses: vec![TaskStatus::Failed],
        ..by_tool.clone()
    };
    assert_eq!(find(failed_resize).await, ["d"]);
    let echo_on_w1 = TaskSearch {
        tool: Some(tool("echo")),
        ..by_worker("w-1")
    };
    assert_eq!(find(echo_on_w1).await, ["c"]);
    let resize_in_window = TaskSearch {
        tool: Some(tool("resize")),
        ..window
    };
    assert_eq!(find(resize_in_window).await, ["b"]);
    let full_disk_in_s1 = TaskSearch {
        message: Some(MessageText::parse("DISK").expect("text")),
        ..by_session("s1")
    };
    assert_eq!(find(full_disk_in_s1).await, ["a"]);
    let nothing = TaskSearch {
        statuses: vec![TaskStatus::Working],
        ..by_session("s2")
    };
    assert!(find(nothing).await.is_empty());
}

pub async fn ids_and_messages_are_matched_literally(backend: &dyn Backend) {
    let Stores {
        store, insights, ..
    } = backend.stores(StoreConfig::default()).await;
    let named = [
        "job%1", "jobx1", "job_2", "jobA2", "job", "jo", "other", "ab~", "ab~~", "ab}",
    ];
    for id in named {
        store
            .create_task(&all(), task_with_id(id))
            .await
            .expect("create");
    }
    let messages = [
        ("m1", "100% done"),
        ("m2", "1000 done"),
        ("m3", "a_b"),
        ("m4", "axb"),
        ("m5", r"back\slash"),
    ];
    for (id, message) in messages {
        store
            .create_task(&all(), task_with_id(id))
            .await
            .expect("create");
        store
            .update_status(
                &all(),
                &TaskId::parse(id).expect("id"),
                status(TaskStatus::Working, Some(message)),
            )
            .await
            .expect("message");
    }
    let prefixed = |prefix: &str| {
        let filter = TaskSearch {
            id_prefix: Some(IdPrefix::parse(prefix).expect("prefix")),
            ..TaskSearch::default()
        };
        let insights = insights.clone();
        async move {
            let mut found = search_all(&insights, &filter, 3).await;
            found.sort();
            found
        }
    };
    assert_eq!(prefixed("job%").await, ["job%1"], "% is literal");
    assert_eq!(prefixed("job_").await, ["job_2"], "_ is literal");
    assert_eq!(
        prefixed("job").await,
        ["job", "job%1", "jobA2", "job_2", "jobx1"]
    );
    assert_eq!(
        prefixed("ab~").await,
        ["ab~", "ab~~"],
        "up to the last ASCII"
    );
    assert!(prefixed("jobs").await.is_empty());
    let containing = |text: &str| {
        let filter = TaskSearch {
            message: Some(MessageText::parse(text).expect("text")),
            ..TaskSearch::default()
        };
        let insights = insights.clone();
        async move { search_all(&insights, &filter, 3).await }
    };
    assert_eq!(containing("0% D").await, ["m1"], "% is literal");
    assert_eq!(containing("A_B").await, ["m3"], "_ is literal");
    assert_eq!(containing(r"k\s").await, ["m5"], "so is a backslash");
    assert_eq!(containing("done").await, ["m2", "m1"]);
}

pub async fn the_scan_limit_ends_a_page_early_and_the_next_continues(backend: &dyn Backend) {
    let Stores {
        store, insights, ..
    } = backend.stores(StoreConfig::default()).await;
    let needle = store
        .create_task(&all(), task_with_id("needle"))
        .await
        .expect("needle");
    // As many tasks as one page may examine, all newer than the needle:
    // the needle is the first past the limit.
    let haystack = SEARCH_SCAN_LIMIT as usize;
    let mut created = 0;
    while created < haystack {
        let batch = 64.min(haystack - created);
        create_concurrently(&store, batch, &all()).await;
        created += batch;
    }
    let only_the_needle = TaskSearch {
        id_prefix: Some(IdPrefix::parse("needle").expect("prefix")),
        ..TaskSearch::default()
    };
    let first = search(&insights, &only_the_needle, 10, None).await;
    assert!(first.tasks.is_empty(), "the needle is past the scan limit");
    assert!(first.truncated, "the page says it stopped early");
    let position = first.next.expect("where the scan stopped");
    let second = search(&insights, &only_the_needle, 10, Some(position)).await;
    assert_eq!(ids(&second.tasks), [needle.task_id.to_string()]);
    assert!(!second.truncated);
    assert_eq!(second.next, None);

    // A filter that matches enough fills its page before the limit.
    let page = search(&insights, &TaskSearch::default(), 100, None).await;
    assert_eq!(page.tasks.len(), 100);
    assert!(!page.truncated);
    // Whatever the filter, pages that stop early, followed, find every
    // match once: here every working task but the needle.
    let working = TaskSearch {
        statuses: vec![TaskStatus::Working],
        ..TaskSearch::default()
    };
    let mut after = None;
    let (mut found, mut truncated_pages) = (0, 0);
    loop {
        let page = search(&insights, &working, 100, after).await;
        found += page.tasks.len();
        truncated_pages += usize::from(page.truncated);
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(found, haystack + 1);
    assert_eq!(truncated_pages, 0, "every page filled before the limit");
}
