//! The dashboard's script and styles, embedded in the binary: nothing to
//! install, no Node at build or run time.

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

const SCRIPT: &str = include_str!("assets/dashboard.js");
const STYLES: &str = include_str!("assets/dashboard.css");

pub async fn serve(Path(file): Path<String>) -> Response {
    let (body, content_type) = match file.as_str() {
        "dashboard.js" => (SCRIPT, "text/javascript; charset=utf-8"),
        "dashboard.css" => (STYLES, "text/css; charset=utf-8"),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // Short: a new release's assets are picked up within minutes.
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    response
}
