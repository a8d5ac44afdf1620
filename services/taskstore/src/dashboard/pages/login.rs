//! The login form: an API key (and, for keys that reach every tenant, the
//! tenant to look at). The key is sent once; the session keeps only its id.

use maud::{Markup, html};

pub fn body(base: &str, refused: Option<&str>) -> Markup {
    html! {
        h1 { "Log in" }
        @if let Some(why) = refused { p.error role="alert" { (why) } }
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
