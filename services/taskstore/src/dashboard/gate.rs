//! The one rule every page and action follows: the viewer identified (the
//! [`Viewer`] extractor, `identify.rs`), ask the rights table for the
//! operation the route amounts to, then draw the page or do the action; any
//! refusal, before or during, becomes its page.

use axum::http::StatusCode;
use axum::response::Response;

use super::Board;
use super::refused::Refused;
use super::render::{Frame, Nav, html_response, page};
use super::viewer::Viewer;
use crate::domain::{Operation, ServedTool, WorkerInfo, served_tools_of, workers_of};

impl Board {
    pub fn base(&self) -> &str {
        &self.settings.base_path
    }

    /// Why `viewer` may not do `operation`, if it may not.
    fn forbidden(viewer: &Viewer, operation: Operation) -> Option<Refused> {
        (!viewer.may(operation)).then_some(Refused::Forbidden(
            if viewer.read_only && operation.changes_anything() {
                "this dashboard is read-only"
            } else {
                "your credentials do not allow this"
            },
        ))
    }

    /// A page that `operation` allows: `draw` fetches and draws it for the
    /// viewer; a refusal (before or while drawing) becomes its own page.
    pub async fn page(
        &self,
        viewer: Viewer,
        operation: Operation,
        title: &str,
        current: Nav,
        draw: impl AsyncFnOnce(&Viewer) -> Result<maud::Markup, Refused>,
    ) -> Response {
        if let Some(refused) = Self::forbidden(&viewer, operation) {
            return refused.respond(self.base(), Some(&viewer));
        }
        let body = draw(&viewer).await;
        self.show(&viewer, title, current, body)
    }

    /// An action that `operation` allows: `act` does it for the viewer and
    /// answers (a redirect); a refusal becomes a page.
    pub async fn act(
        &self,
        viewer: Viewer,
        operation: Operation,
        act: impl AsyncFnOnce(&Viewer) -> Result<Response, Refused>,
    ) -> Response {
        if let Some(refused) = Self::forbidden(&viewer, operation) {
            return refused.respond(self.base(), Some(&viewer));
        }
        act(&viewer)
            .await
            .unwrap_or_else(|refused| refused.respond(self.base(), Some(&viewer)))
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

    /// The tools served to `viewer`'s tenant, by name, and the workers it
    /// sees: the fleet's and its tenant's own (an operator of every tenant
    /// sees every worker).
    pub async fn tools(
        &self,
        viewer: &Viewer,
    ) -> Result<(Vec<ServedTool>, Vec<WorkerInfo>), Refused> {
        let workers = self
            .operations
            .workers(crate::domain::FleetPolicy::default().seen_within)
            .await?;
        let tools = served_tools_of(&viewer.tenant, &workers);
        let workers = if viewer.sees_every_tenant() {
            workers
        } else {
            workers_of(&viewer.tenant, &workers)
        };
        Ok((tools, workers))
    }
}
