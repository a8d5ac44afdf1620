//! The dashboard's routes: each page maps to the [`Operation`] it amounts
//! to, asks the rights table through the viewer, fetches from the stores,
//! and hands the page function what it needs to draw.

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{get, post};
use chrono::Utc;

use super::params::{MAX_FORM_BYTES, TaskQuery};
use super::refused::Refused;
use super::render::{Nav, live_region};
use super::viewer::Viewer;
use super::{Board, account, actions, assets, body_gate, guard, live, pages, sign_in};
use crate::auth::oidc::CALLBACK_PATH;
use crate::domain::{MAX_SESSIONS, MAX_WAITING_QUESTIONS, Operation, TaskId};

/// The routes, grouped by what guards them: public ones (logging in, the
/// assets), pages (a [`Viewer`] extractor on each), and changing actions,
/// whose sender is identified before their form is read (`body_gate.rs`).
/// The public routes and the actions refuse cross-site requests that change
/// anything; every response carries the security headers (`guard.rs`).
pub fn router(board: Arc<Board>) -> Router {
    let base = board.settings.base_path.clone();
    let public = Router::new()
        .route("/login", get(account::login_form).post(account::log_in))
        .route("/login/oidc", get(sign_in::start))
        .route(CALLBACK_PATH, get(sign_in::callback))
        .route("/assets/{file}", get(assets::serve));
    let pages = Router::new()
        .route("/", get(overview))
        .route("/tasks", get(tasks))
        .route(
            "/tasks/cancel-matching",
            get(actions::confirm_cancel_matching),
        )
        .route("/tasks/{id}", get(task))
        .route("/questions", get(questions))
        .route("/tools", get(tools))
        .route("/tools/{name}", get(tool))
        .route("/workers", get(workers))
        .route("/sessions", get(sessions))
        .route("/system", get(system))
        .route("/events", get(live::events));
    let actions = Router::new()
        .route("/tasks/cancel", post(actions::cancel_selected))
        .route("/tasks/cancel-matching", post(actions::cancel_matching))
        .route("/tasks/{id}/cancel", post(actions::cancel_one))
        .route("/tasks/{id}/delete", post(actions::delete_one))
        .route("/tasks/{id}/answer", post(actions::answer))
        .route("/tasks/{id}/rerun", post(actions::rerun))
        .route("/tools/{name}/run", post(actions::run_tool))
        .route("/tools/{name}/lift-pause", post(actions::lift_pause))
        .route("/logout", post(account::log_out));
    // Changing requests: refused cross-site first (the outer layer), then
    // their form read only once its sender is known, within limits.
    let changing = |routes: Router<Arc<Board>>| {
        routes
            .layer(DefaultBodyLimit::max(MAX_FORM_BYTES))
            .layer(axum::middleware::from_fn_with_state(
                board.clone(),
                body_gate::read_after_identifying,
            ))
            .layer(axum::middleware::from_fn(guard::same_site_only))
    };
    let inner = changing(public)
        .merge(pages)
        .merge(changing(actions))
        .fallback(not_found)
        .layer(axum::middleware::from_fn(guard::security_headers))
        .with_state(board);
    if base.is_empty() {
        inner
    } else {
        Router::new().nest(&base, inner)
    }
}

async fn overview(State(board): State<Arc<Board>>, viewer: Viewer) -> Response {
    board
        .page(
            viewer,
            Operation::ListTasks,
            "Overview",
            Nav::Overview,
            async |viewer| {
                let overview = board.insights.overview(&viewer.tenant, Utc::now()).await?;
                let (_, workers) = board.tools(viewer).await?;
                let outbox = if viewer.sees_every_tenant() {
                    Some(board.operations.outbox_backlog().await?)
                } else {
                    None
                };
                Ok(live_region(
                    board.base(),
                    pages::overview::body(board.base(), &overview, &workers, outbox.as_ref()),
                ))
            },
        )
        .await
}

async fn tasks(
    State(board): State<Arc<Board>>,
    viewer: Viewer,
    RawQuery(raw): RawQuery,
) -> Response {
    let raw = raw.unwrap_or_default();
    board
        .page(
            viewer,
            Operation::ListTasks,
            "Tasks",
            Nav::Tasks,
            async |viewer| {
                let query = TaskQuery::parse(&raw).map_err(Refused::BadRequest)?;
                let results = board
                    .insights
                    .search_tasks(&viewer.tenant, &query.search, &query.page)
                    .await?;
                let pairs = super::params::pairs(&raw).map_err(Refused::BadRequest)?;
                let notice = super::params::value(&pairs, "notice").map(actions::notice_text);
                Ok(pages::tasks::body(
                    board.base(),
                    viewer,
                    &query,
                    &results,
                    notice.as_deref(),
                ))
            },
        )
        .await
}

async fn task(State(board): State<Arc<Board>>, viewer: Viewer, Path(id): Path<String>) -> Response {
    board
        .page(
            viewer,
            Operation::ReadTask,
            "Task",
            Nav::Tasks,
            async |viewer| {
                // A malformed id is as absent as a missing one.
                let id = TaskId::parse(&id).map_err(|_| Refused::NotFound)?;
                let details = board.insights.task_details(&viewer.tenant, &id).await?;
                Ok(pages::task::body(board.base(), viewer, &details, |id| {
                    board.settings.trace_link(id)
                }))
            },
        )
        .await
}

async fn questions(State(board): State<Arc<Board>>, viewer: Viewer) -> Response {
    board
        .page(
            viewer,
            Operation::ReadQuestions,
            "Needs input",
            Nav::Questions,
            async |viewer| {
                let waiting = board
                    .insights
                    .waiting_questions(&viewer.tenant, MAX_WAITING_QUESTIONS)
                    .await?;
                Ok(live_region(
                    board.base(),
                    pages::questions::body(board.base(), &waiting),
                ))
            },
        )
        .await
}

async fn tools(State(board): State<Arc<Board>>, viewer: Viewer) -> Response {
    board
        .page(
            viewer,
            Operation::ReadTools,
            "Tools",
            Nav::Tools,
            async |viewer| {
                let (tools, _) = board.tools(viewer).await?;
                let activity = board
                    .insights
                    .tool_activity(&viewer.tenant, Utc::now())
                    .await?;
                // Keys carry every tenant's values: for operators of every tenant.
                let dispatch = if viewer.sees_every_tenant() {
                    Some(board.operations.dispatch_view().await?)
                } else {
                    None
                };
                Ok(live_region(
                    board.base(),
                    pages::tools::list(board.base(), &tools, &activity, dispatch.as_deref()),
                ))
            },
        )
        .await
}

async fn tool(
    State(board): State<Arc<Board>>,
    viewer: Viewer,
    Path(name): Path<String>,
) -> Response {
    board
        .page(
            viewer,
            Operation::ReadTools,
            "Tool",
            Nav::Tools,
            async |viewer| {
                let (tools, workers) = board.tools(viewer).await?;
                let tool = tools
                    .iter()
                    .find(|tool| tool.name.as_str() == name)
                    .ok_or(Refused::NotFound)?;
                let serving: Vec<_> = workers
                    .iter()
                    .filter(|worker| worker.heartbeat.tools.contains(&tool.name))
                    .collect();
                let now = Utc::now();
                let activity = board.insights.tool_activity(&viewer.tenant, now).await?;
                let page = pages::tools::one(board.base(), viewer, tool, &serving, &activity);
                // Keys carry every tenant's values: for operators of every tenant.
                if !viewer.sees_every_tenant() {
                    return Ok(page);
                }
                let view = board.operations.dispatch_view().await?;
                board.dispatch_samples.record(&view);
                let history = board.dispatch_samples.of_tool(tool.name.as_str());
                let dispatch = view.iter().find(|d| d.tool == tool.name.as_str());
                let may_lift = viewer.may(Operation::SteerDispatch);
                Ok(maud::html! {
                    (page)
                    (pages::dispatch::section(board.base(), tool.name.as_str(), dispatch, may_lift, now))
                    (pages::dispatch_chart::section(&history))
                })
            },
        )
        .await
}

async fn workers(State(board): State<Arc<Board>>, viewer: Viewer) -> Response {
    board
        .page(
            viewer,
            Operation::ReadTools,
            "Workers",
            Nav::Workers,
            async |viewer| {
                let (_, workers) = board.tools(viewer).await?;
                Ok(live_region(
                    board.base(),
                    pages::workers::body(board.base(), &workers),
                ))
            },
        )
        .await
}

async fn sessions(State(board): State<Arc<Board>>, viewer: Viewer) -> Response {
    board
        .page(
            viewer,
            Operation::ListTasks,
            "Sessions",
            Nav::Sessions,
            async |viewer| {
                let sessions = board
                    .insights
                    .sessions(&viewer.tenant, MAX_SESSIONS)
                    .await?;
                Ok(live_region(
                    board.base(),
                    pages::sessions::body(board.base(), &sessions),
                ))
            },
        )
        .await
}

async fn system(State(board): State<Arc<Board>>, viewer: Viewer) -> Response {
    board
        .page(
            viewer,
            Operation::ReadStatus,
            "System",
            Nav::System,
            async |viewer| {
                let by_status = board.operations.tasks_by_status().await?;
                let outbox = board.operations.outbox_backlog().await?;
                let (_, workers) = board.tools(viewer).await?;
                Ok(live_region(
                    board.base(),
                    pages::system::body(&by_status, &outbox, &workers),
                ))
            },
        )
        .await
}

/// Anyone's: a viewer, if identified, keeps the page's frame.
async fn not_found(State(board): State<Arc<Board>>, headers: HeaderMap) -> Response {
    let viewer = board.viewer(&headers).await.ok();
    Refused::NotFound.respond(board.base(), viewer.as_ref())
}
