//! The one rule every page and action follows: identify the viewer, ask
//! the rights table for the operation the route amounts to, then draw the
//! page or do the action; any refusal, before or during, becomes its page.

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::Board;
use super::refused::Refused;
use super::render::{Frame, Nav, html_response, page};
use super::viewer::Viewer;
use crate::domain::{Operation, ServedTool, served_tools};

impl Board {
    pub fn base(&self) -> &str {
        &self.settings.base_path
    }

    /// The viewer of a request, if it may do `operation`; else the page
    /// that says why (the login, or 403).
    pub async fn allow(
        &self,
        headers: &HeaderMap,
        operation: Operation,
    ) -> Result<Viewer, Response> {
        let viewer = self
            .viewer(headers)
            .await
            .map_err(|refused| refused.respond(self.base(), None))?;
        if viewer.may(operation) {
            Ok(viewer)
        } else {
            Err(
                Refused::Forbidden(if viewer.read_only && operation.changes_anything() {
                    "this dashboard is read-only"
                } else {
                    "your credentials do not allow this"
                })
                .respond(self.base(), Some(&viewer)),
            )
        }
    }

    /// A page that `operation` allows: `draw` fetches and draws it for the
    /// viewer; a refusal (before or while drawing) becomes its own page.
    pub async fn page(
        &self,
        headers: &HeaderMap,
        operation: Operation,
        title: &str,
        current: Nav,
        draw: impl AsyncFnOnce(&Viewer) -> Result<maud::Markup, Refused>,
    ) -> Response {
        match self.allow(headers, operation).await {
            Ok(viewer) => {
                let body = draw(&viewer).await;
                self.show(&viewer, title, current, body)
            }
            Err(page) => page,
        }
    }

    /// An action that `operation` allows: `act` does it for the viewer and
    /// answers (a redirect); a refusal becomes a page.
    pub async fn act(
        &self,
        headers: &HeaderMap,
        operation: Operation,
        act: impl AsyncFnOnce(&Viewer) -> Result<Response, Refused>,
    ) -> Response {
        match self.allow(headers, operation).await {
            Ok(viewer) => act(&viewer)
                .await
                .unwrap_or_else(|refused| refused.respond(self.base(), Some(&viewer))),
            Err(page) => page,
        }
    }

    /// A page, framed, or the page of its refusal.
    pub fn show(
        &self,
        viewer: &Viewer,
        title: &str,
        current: Nav,
        body: Result<maud::Markup, Refused>,
    ) -> Response {
        match body {
            Ok(body) => {
                let frame = Frame {
                    base: self.base(),
                    viewer: Some(viewer),
                    title,
                    current,
                };
                html_response(StatusCode::OK, page(&frame, body))
            }
            Err(refused) => refused.respond(self.base(), Some(viewer)),
        }
    }

    /// The tools served now, by name.
    pub async fn tools(
        &self,
    ) -> Result<(Vec<ServedTool>, Vec<crate::domain::WorkerInfo>), Refused> {
        let workers = self
            .operations
            .workers(crate::domain::FleetPolicy::default().seen_within)
            .await?;
        Ok((served_tools(&workers), workers))
    }
}
