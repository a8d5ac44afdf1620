//! Parsing what a browser sends (query strings, form bodies) into domain
//! types, once, at the dashboard's border. Anything malformed is refused
//! with a message naming the field; nothing unparsed goes further.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};

use crate::domain::{
    IdPrefix, MessageText, SearchPage, SearchPosition, SessionId, TaskId, TaskSearch, TaskStatus,
    ToolName, WorkerId,
};

/// The longest query string or form body read, in bytes.
pub const MAX_FORM_BYTES: usize = 256 * 1024;
/// The longest session id searched for: a filter, not a session being
/// made, so any configured `--max-session-id-bytes` fits.
const MAX_SESSION_FILTER_BYTES: usize = 4096;
/// The most tasks one "cancel selected" names.
pub const MAX_SELECTED: usize = 500;

/// The pairs of a query string or form body, in order.
pub fn pairs(raw: &str) -> Result<Vec<(String, String)>, String> {
    if raw.len() > MAX_FORM_BYTES {
        return Err("the request is too large".to_owned());
    }
    serde_urlencoded::from_str(raw).map_err(|_| "the request is not a valid form".to_owned())
}

/// The first non-empty value of `name`.
pub fn value<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(key, value)| key == name && !value.trim().is_empty())
        .map(|(_, value)| value.trim())
}

/// The tasks page's filters and page, from its query string; also the
/// filters written back as a query string (without the page position), for
/// links that keep them.
#[derive(Debug, Clone, Default)]
pub struct TaskQuery {
    pub search: TaskSearch,
    pub page: SearchPage,
    /// The filters as given, for the form and links.
    pub given: Vec<(String, String)>,
}

/// The filter fields, in the order the form shows them.
pub const FILTER_FIELDS: [&str; 8] = [
    "status", "tool", "session", "worker", "from", "until", "id", "message",
];

impl TaskQuery {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let pairs = pairs(raw)?;
        let mut search = TaskSearch::default();
        for (key, raw_value) in &pairs {
            let raw_value = raw_value.trim();
            if raw_value.is_empty() {
                continue;
            }
            let field = |err: &dyn std::fmt::Display| format!("{key}: {err}");
            match key.as_str() {
                "status" => {
                    let status = raw_value.parse::<TaskStatus>().map_err(|err| field(&err))?;
                    if !search.statuses.contains(&status) {
                        search.statuses.push(status);
                    }
                }
                "tool" => search.tool = Some(ToolName::parse(raw_value).map_err(|e| field(&e))?),
                "session" => {
                    search.session = Some(
                        SessionId::parse(raw_value, MAX_SESSION_FILTER_BYTES)
                            .map_err(|e| field(&e))?,
                    );
                }
                "worker" => {
                    search.worker = Some(WorkerId::parse(raw_value).map_err(|e| field(&e))?);
                }
                "from" => search.created_from = Some(instant(raw_value).map_err(|e| field(&e))?),
                "until" => search.created_until = Some(instant(raw_value).map_err(|e| field(&e))?),
                "id" => search.id_prefix = Some(IdPrefix::parse(raw_value).map_err(|e| field(&e))?),
                "message" => {
                    search.message = Some(MessageText::parse(raw_value).map_err(|e| field(&e))?);
                }
                // Paging and notices are read below or by the page.
                _ => {}
            }
        }
        let after = value(&pairs, "after")
            .map(SearchPosition::parse)
            .transpose()
            .map_err(|err| format!("after: {err}"))?;
        let size = value(&pairs, "size")
            .map(str::parse::<u32>)
            .transpose()
            .map_err(|_| "size: must be a whole number".to_owned())?;
        let given = pairs
            .into_iter()
            .filter(|(key, value)| {
                FILTER_FIELDS.contains(&key.as_str()) && !value.trim().is_empty()
            })
            .collect();
        Ok(Self {
            search,
            page: SearchPage::new(size, after),
            given,
        })
    }

    /// The filters as a query string (`a=1&b=2`), empty without any.
    pub fn filters_query(&self) -> String {
        serde_urlencoded::to_string(&self.given).unwrap_or_default()
    }

    /// The value given for a filter field, for the form.
    pub fn given(&self, name: &str) -> &str {
        value(&self.given, name).unwrap_or("")
    }

    /// Whether a status is among the filters.
    pub fn has_status(&self, status: TaskStatus) -> bool {
        self.search.statuses.contains(&status)
    }
}

/// A moment from a form: RFC 3339, or the `datetime-local` input's
/// `YYYY-MM-DDTHH:MM[:SS]` (read as UTC), or a date.
fn instant(raw: &str) -> Result<DateTime<Utc>, &'static str> {
    if let Ok(at) = DateTime::parse_from_rfc3339(raw) {
        return Ok(at.with_timezone(&Utc));
    }
    for format in ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"] {
        if let Ok(at) = NaiveDateTime::parse_from_str(raw, format) {
            return Ok(at.and_utc());
        }
    }
    NaiveDate::parse_from_str(raw, "%Y-%m-%d")
        .ok()
        .and_then(|date| date.and_hms_opt(0, 0, 0))
        .map(|at| at.and_utc())
        .ok_or("must be a date and time (2026-11-24T14:00, UTC)")
}

/// The task ids a "cancel selected" form names.
pub fn selected_tasks(pairs: &[(String, String)]) -> Result<Vec<TaskId>, String> {
    let ids: Vec<TaskId> = pairs
        .iter()
        .filter(|(key, _)| key == "task")
        .map(|(_, raw)| TaskId::parse(raw).map_err(|err| format!("task: {err}")))
        .collect::<Result<_, _>>()?;
    if ids.len() > MAX_SELECTED {
        return Err(format!("at most {MAX_SELECTED} tasks at once"));
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_are_parsed_and_written_back() {
        let query = TaskQuery::parse(
            "status=failed&status=working&tool=sleep&id=ab&message=Disk&from=2026-11-24T10:00&size=20&x=1",
        )
        .expect("valid");
        assert_eq!(query.search.statuses.len(), 2);
        assert_eq!(
            query.search.tool.as_ref().map(ToolName::as_str),
            Some("sleep")
        );
        assert_eq!(query.page.size, 20);
        assert!(query.search.created_from.is_some());
        assert_eq!(
            query.filters_query(),
            "status=failed&status=working&tool=sleep&id=ab&message=Disk&from=2026-11-24T10%3A00"
        );
    }

    #[test]
    fn malformed_filters_are_refused_naming_the_field() {
        for (raw, field) in [
            ("status=done", "status"),
            ("tool=a%20b", "tool"),
            ("from=yesterday", "from"),
            ("after=12", "after"),
            ("size=-1", "size"),
            ("id=a%20b", "id"),
        ] {
            let err = TaskQuery::parse(raw).expect_err(raw);
            assert!(err.starts_with(field), "{raw}: {err}");
        }
        assert!(pairs(&"a=b&".repeat(MAX_FORM_BYTES)).is_err());
    }

    #[test]
    fn selections_are_bounded() {
        let many: Vec<(String, String)> = (0..=MAX_SELECTED)
            .map(|i| ("task".into(), format!("t{i}")))
            .collect();
        assert!(selected_tasks(&many).is_err());
        assert_eq!(
            selected_tasks(&[("task".into(), "a".into())]).map(|ids| ids.len()),
            Ok(1)
        );
    }
}
