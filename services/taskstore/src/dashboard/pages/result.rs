//! A task's result drawn by content type: text, images, audio, resource
//! links and embedded resources, structured content, and whether the tool
//! reported an error. Everything in it came from a tool: escaped, images and
//! audio only as `data:` URLs of their own media type, links only to http(s).

use maud::{Markup, html};
use serde_json::Value;

/// The result section's contents for a `CallToolResult` (JSON text).
pub fn call_tool_result(json: &str) -> Markup {
    let Ok(value) = serde_json::from_str::<Value>(json) else {
        return html! { pre { (json) } };
    };
    let is_error = value.get("isError").and_then(Value::as_bool) == Some(true);
    let content = value.get("content").and_then(Value::as_array);
    html! {
        @if is_error {
            p.error role="note" { span aria-hidden="true" { "✗ " } "The tool reported an error (isError)." }
        }
        @if let Some(content) = content {
            @for item in content { (content_item(item)) }
        }
        @if let Some(structured) = value.get("structuredContent") {
            h3 { "Structured content" }
            pre.json { (pretty(structured)) }
        }
        details {
            summary { "The whole result (JSON)" }
            pre.json { (pretty(&value)) }
        }
    }
}

fn content_item(item: &Value) -> Markup {
    let text = |name: &str| item.get(name).and_then(Value::as_str).unwrap_or("");
    match text("type") {
        "text" => html! { pre.text { (text("text")) } },
        "image" => media(item, "image/", |src, mime| {
            html! { img src=(src) alt={ "An image the tool returned (" (mime) ")" }; }
        }),
        "audio" => media(item, "audio/", |src, mime| {
            html! { audio controls src=(src) aria-label={ "Audio the tool returned (" (mime) ")" } {} }
        }),
        "resource_link" => {
            let uri = text("uri");
            let name = text("name");
            let label = if name.trim().is_empty() { uri } else { name };
            html! {
                p.resource {
                    "Resource link: "
                    @if uri.starts_with("https://") || uri.starts_with("http://") {
                        a href=(uri) rel="noreferrer noopener" { (label) }
                    } @else {
                        code { (uri) }
                    }
                    @if !text("mimeType").is_empty() { " (" (text("mimeType")) ")" }
                }
            }
        }
        "resource" => {
            let resource = item.get("resource").unwrap_or(&Value::Null);
            let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("");
            html! {
                div.resource {
                    p { "Embedded resource " code { (uri) } }
                    @if let Some(body) = resource.get("text").and_then(Value::as_str) {
                        pre.text { (body) }
                    } @else if let Some(blob) = resource.get("blob").and_then(Value::as_str) {
                        p { (blob.len() * 3 / 4) " bytes of binary data" }
                    }
                }
            }
        }
        other => html! {
            div.unknown {
                p { "Content of type " code { (other) } }
                pre.json { (pretty(item)) }
            }
        },
    }
}

/// An image or audio item as a `data:` URL, if its media type is of the
/// kind and its data is base64.
fn media(item: &Value, kind: &str, draw: impl Fn(&str, &str) -> Markup) -> Markup {
    let mime = item.get("mimeType").and_then(Value::as_str).unwrap_or("");
    let data = item.get("data").and_then(Value::as_str).unwrap_or("");
    let mime_ok = mime.starts_with(kind)
        && mime.len() < 100
        && mime
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'+' | b'-' | b'.'));
    let data_ok = !data.is_empty()
        && data
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
    if mime_ok && data_ok {
        draw(&format!("data:{mime};base64,{data}"), mime)
    } else {
        html! { p { "A " (kind.trim_end_matches('/')) " the dashboard cannot show (" (mime) ")." } }
    }
}

/// JSON, indented.
pub fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_drawn_by_type_and_escaped() {
        let drawn = call_tool_result(
            r#"{"isError":true,"content":[{"type":"text","text":"<script>x</script>"},
                {"type":"image","mimeType":"image/png","data":"iVBORw0KGgo="},
                {"type":"image","mimeType":"text/html","data":"PHNjcmlwdD4="},
                {"type":"resource_link","uri":"javascript:alert(1)","name":"x"}],
                "structuredContent":{"a":1}}"#,
        )
        .into_string();
        assert!(drawn.contains("isError"));
        assert!(drawn.contains("&lt;script&gt;"));
        assert!(!drawn.contains("<script>"));
        assert!(drawn.contains("data:image/png;base64,iVBORw0KGgo="));
        assert!(!drawn.contains("data:text/html"));
        assert!(!drawn.contains("href=\"javascript:"));
        assert!(drawn.contains("Structured content"));
    }
}
