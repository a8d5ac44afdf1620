//! The login page: single sign-on with the configured identity provider,
//! and an API key form (for keys that reach every tenant, with the tenant
//! to look at). A key is sent once; the session keeps only its id.

use maud::{Markup, html};

/// The ways to log in this service offers.
#[derive(Debug, Clone, Copy)]
pub struct Methods {
    pub api_keys: bool,
    pub single_sign_on: bool,
}

pub fn body(base: &str, methods: Methods, refused: Option<&str>) -> Markup {
    html! {
        h1 { "Log in" }
        @if let Some(why) = refused { p.error role="alert" { (why) } }
        @if methods.single_sign_on {
            // A GET form: the tenant field travels in the URL, and the
            // page it opens sends the browser on to the identity provider.
            form #sso method="get" action={ (base) "/login/oidc" } {
                button type="submit" { "Single sign-on" }
                label.field {
                    span { "Tenant (only for identities that reach every tenant)" }
                    input type="text" name="tenant" autocomplete="off";
                }
            }
        }
        @if methods.api_keys {
            form #login method="post" action={ (base) "/login" } {
                label.field {
                    span { "API key" }
                    input #api-key type="password" name="api_key" autocomplete="off" required autofocus;
                }
                label.field {
                    span { "Tenant (only for keys that reach every tenant)" }
                    input type="text" name="tenant" autocomplete="off";
                }
                button type="submit" { "Log in" }
            }
            p { "Make a key with " code { "taskstore keys create" } "; worker keys cannot log in." }
        }
    }
}
