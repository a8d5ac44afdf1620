//! The page frame every page is drawn in, and the small pieces pages share
//! (a status as icon and text, times, the failure pages). HTML is written
//! with maud, which escapes every value it interpolates.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, html};

use super::viewer::Viewer;
use crate::domain::TaskStatus;

/// The pages of the main navigation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    Overview,
    Tasks,
    Questions,
    Tools,
    Workers,
    Sessions,
    /// Every tenant together: only for credentials that reach them all.
    System,
    None,
}

const NAV: [(Nav, &str, &str); 6] = [
    (Nav::Overview, "", "Overview"),
    (Nav::Tasks, "/tasks", "Tasks"),
    (Nav::Questions, "/questions", "Needs input"),
    (Nav::Tools, "/tools", "Tools"),
    (Nav::Workers, "/workers", "Workers"),
    (Nav::Sessions, "/sessions", "Sessions"),
];

/// What frames a page: where the dashboard is mounted, who looks, which
/// page it is.
pub struct Frame<'a> {
    pub base: &'a str,
    pub viewer: Option<&'a Viewer>,
    pub title: &'a str,
    pub current: Nav,
}

/// A page's content that the script reads again when the tenant's tasks
/// change (and every few seconds), for pages without rows of their own to
/// update: the overview, needs input, tools, workers, sessions, system.
pub fn live_region(base: &str, body: Markup) -> Markup {
    html! {
        div #live-region data-events={ (base) "/events" } { (body) }
    }
}

/// A whole page around `body`.
pub fn page(frame: &Frame<'_>, body: Markup) -> Markup {
    let base = frame.base;
    let home = if base.is_empty() { "/" } else { base };
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                // No icon to fetch: an empty one, so browsers do not ask
                // for /favicon.ico (a 404 on every page).
                link rel="icon" href="data:,";
                title { (frame.title) " · taskstore" }
                link rel="stylesheet" href={ (base) "/assets/dashboard.css" };
                script src={ (base) "/assets/dashboard.js" } defer {}
            }
            body data-base=(base) {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    a.brand href=(home) { "taskstore" }
                    @if let Some(viewer) = frame.viewer {
                        nav aria-label="Main" {
                            ul {
                                @for (nav, path, label) in NAV {
                                    li {
                                        a href={ (base) (path) (if path.is_empty() && base.is_empty() { "/" } else { "" }) }
                                            aria-current=[(nav == frame.current).then_some("page")] { (label) }
                                    }
                                }
                                @if viewer.sees_every_tenant() {
                                    li {
                                        a href={ (base) "/system" }
                                            aria-current=[(frame.current == Nav::System).then_some("page")] { "System" }
                                    }
                                }
                            }
                        }
                        div.who {
                            span { "tenant " span #tenant { (viewer.tenant.as_str()) } }
                            span.subject { (viewer.caller.subject) " · " (viewer.caller.role) }
                            @if viewer.read_only { span.badge { "read-only" } }
                            span #live-state role="status" data-state="off" { "not live" }
                            button #live-toggle type="button" hidden { "Pause live updates" }
                            @if !viewer.caller.is_unauthenticated() {
                                form method="post" action={ (base) "/logout" } {
                                    button type="submit" { "Log out" }
                                }
                            }
                        }
                    }
                }
                main #main tabindex="-1" { (body) }
            }
        }
    }
}

/// A status as an icon and its name (never colour alone).
pub fn status(status: TaskStatus) -> Markup {
    let icon = match status {
        TaskStatus::Working => "◐",
        TaskStatus::InputRequired => "?",
        TaskStatus::Completed => "✓",
        TaskStatus::Failed => "✗",
        TaskStatus::Cancelled => "⊘",
    };
    html! {
        span class={ "status status-" (status.as_str()) } {
            span.icon aria-hidden="true" { (icon) } " " (status.as_str())
        }
    }
}

/// A moment, readable and machine-readable.
pub fn time(at: DateTime<Utc>) -> Markup {
    html! {
        time datetime=(at.to_rfc3339()) { (at.format("%Y-%m-%d %H:%M:%S UTC")) }
    }
}

/// An HTML response that no cache keeps (pages show one tenant's data).
pub fn html_response(status: StatusCode, markup: Markup) -> Response {
    let mut response = (status, markup.into_string()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}

/// A page that says something went wrong, with the status it goes with.
pub fn failure_page(
    base: &str,
    viewer: Option<&Viewer>,
    status: StatusCode,
    title: &str,
    detail: &str,
) -> Response {
    let frame = Frame {
        base,
        viewer,
        title,
        current: Nav::None,
    };
    let body = html! {
        h1 { (title) }
        p role="alert" { (detail) }
        p { a href={ (base) "/tasks" } { "Back to the tasks" } }
    };
    html_response(status, page(&frame, body))
}

/// `value` as one URL path segment: every byte but the unreserved ones
/// (`A-Z a-z 0-9 - . _ ~`) percent-encoded, so that an id holding `/`, `?`,
/// `#` or `%` stays one segment of the route it names (task ids are any
/// printable ASCII, and a client chooses them).
pub fn segment(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `value` as a query string value.
pub fn query_value(value: &str) -> String {
    serde_urlencoded::to_string([("", value)])
        .map(|pair| pair.trim_start_matches('=').to_owned())
        .unwrap_or_default()
}

/// A 303 to `location` (after a form was handled, or to the login).
pub fn see_other(location: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_stay_one_segment_and_one_value() {
        assert_eq!(segment("abc-1.2_~"), "abc-1.2_~");
        assert_eq!(
            segment("x/../../tasks/cancel-matching?"),
            "x%2F..%2F..%2Ftasks%2Fcancel-matching%3F"
        );
        assert_eq!(segment("a%2Fb#c"), "a%252Fb%23c");
        assert_eq!(query_value("w 1&x=2#"), "w+1%26x%3D2%23");
    }
}
