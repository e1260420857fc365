//! Push notifications (A2A 1.0 §4.3, 0.3 `tasks/pushNotificationConfig/*`):
//! the webhook configs of each task, the SSRF guard on their URLs, and the
//! delivery of each saved state to them — with the config's credentials, a
//! 10 s timeout and retries with backoff, in the background, never holding
//! up the task. Hosts only send the requests ([`super::ServerHost::send`]).

use super::ip::parse_ip;
use super::rpc::RpcError;
use super::{push_not_supported, A2aServer, Fulfiller, ServerHost, TaskStore};
use crate::model::task::{Shape, Task};
use crate::wire::http::HttpRequest;
use crate::wire::json::{object, quoted, with};
use hashbrown::HashMap;
use serde_json::Value;

/// How long one delivery attempt may take.
pub const DELIVERY_TIMEOUT_MS: u64 = 10_000;
/// The pauses before the retries of a failed delivery (then it is dropped).
pub const RETRY_BACKOFF_MS: [u64; 3] = [500, 2_000, 8_000];
/// The most configs one task may have.
pub const MAX_CONFIGS_PER_TASK: usize = 10;

/// One webhook of one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushConfig {
    pub id: String,
    pub task_id: String,
    pub url: String,
    /// Sent back as `X-A2A-Notification-Token`, so the receiver can check it.
    pub token: Option<String>,
    /// `Authorization: <scheme> <credentials>`.
    pub scheme: Option<String>,
    pub credentials: Option<String>,
    /// The dialect it was set in: 1.0 receivers get `{"task": …}`, 0.3 ones the bare task.
    pub shape: Shape,
}

impl PushConfig {
    /// Reads a config in either shape: 1.0 `{url, id?, token?,
    /// authentication: {scheme, credentials}}`, 0.3 the same with
    /// `authentication: {schemes: [..], credentials}`.
    pub fn from_value(v: &Value, task_id: &str, shape: Shape) -> Result<PushConfig, RpcError> {
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let url = text(v, "url").ok_or_else(|| {
            RpcError::invalid_field("pushNotificationConfig.url", "is required (a string)")
        })?;
        let auth = v.get("authentication").filter(|a| !a.is_null());
        let scheme = auth.and_then(|a| {
            text(a, "scheme").or_else(|| {
                a.get("schemes")?
                    .as_array()?
                    .first()?
                    .as_str()
                    .map(str::to_string)
            })
        });
        // An `authentication` must say its scheme (1.0 `scheme`, 0.3 `schemes`).
        if auth.is_some() && scheme.is_none() {
            let field = match shape {
                Shape::V10 => "pushNotificationConfig.authentication.scheme",
                Shape::V03 => "pushNotificationConfig.authentication.schemes",
            };
            return Err(RpcError::invalid_field(field, "is required (a string)"));
        }
        Ok(PushConfig {
            id: text(v, "id").filter(|i| !i.is_empty()).unwrap_or_default(),
            task_id: task_id.to_string(),
            url,
            token: text(v, "token").filter(|t| !t.is_empty()),
            scheme,
            credentials: auth.and_then(|a| text(a, "credentials")),
            shape,
        })
    }

    /// The config as the dialect answers it: 1.0 `TaskPushNotificationConfig`,
    /// 0.3 `{taskId, pushNotificationConfig}`.
    pub fn to_value(&self, shape: Shape) -> Value {
        let mut config = object([
            ("id", self.id.as_str().into()),
            ("url", self.url.as_str().into()),
        ]);
        if let Some(t) = &self.token {
            config = with(config, "token", t.as_str().into());
        }
        if let Some(s) = &self.scheme {
            // The credentials are the caller's secret: never echoed.
            let auth = match shape {
                Shape::V10 => object([("scheme", s.as_str().into())]),
                Shape::V03 => object([("schemes", Value::Array(vec![s.as_str().into()]))]),
            };
            config = with(config, "authentication", auth);
        }
        match shape {
            Shape::V10 => with(config, "taskId", self.task_id.as_str().into()),
            Shape::V03 => object([
                ("taskId", self.task_id.as_str().into()),
                ("pushNotificationConfig", config),
            ]),
        }
    }

    /// The config as a store keeps it: the 1.0 shape with its credentials,
    /// and the dialect it was set in (read back by [`PushConfig::from_stored`]).
    pub fn to_stored(&self) -> Value {
        let dialect = if self.shape == Shape::V03 {
            "0.3"
        } else {
            "1.0"
        };
        let mut v = object([
            ("id", self.id.as_str().into()),
            ("url", self.url.as_str().into()),
            ("dialect", dialect.into()),
        ]);
        if let Some(t) = &self.token {
            v = with(v, "token", t.as_str().into());
        }
        if self.scheme.is_some() || self.credentials.is_some() {
            let text = |o: &Option<String>| o.as_deref().map_or(Value::Null, Value::from);
            let auth = object([
                ("scheme", text(&self.scheme)),
                ("credentials", text(&self.credentials)),
            ]);
            v = with(v, "authentication", auth);
        }
        v
    }

    /// A config a store kept ([`PushConfig::to_stored`]); `None` when it is
    /// not one (a damaged or foreign record is skipped, never a panic).
    pub fn from_stored(v: &Value, task_id: &str) -> Option<PushConfig> {
        let shape = match v.get("dialect").and_then(Value::as_str) {
            Some("0.3") => Shape::V03,
            _ => Shape::V10,
        };
        PushConfig::from_value(v, task_id, shape)
            .ok()
            .filter(|c| !c.id.is_empty())
    }

    /// The POST of `task` to this webhook.
    pub fn request(&self, task: &Task) -> HttpRequest {
        // Straight to JSON text, as a store's save is: no `Value` (whose
        // serializer would compile every task shape a second time).
        let trace = task.trace.as_ref();
        let task = serde_json::to_vec(&task.shaped(self.shape, None)).unwrap_or_default();
        let body = match self.shape {
            Shape::V10 => [&b"{\"task\":"[..], &task, b"}"].concat(),
            Shape::V03 => task,
        };
        let mut req = HttpRequest::post_json(&self.url, body);
        if let Some(scheme) = &self.scheme {
            let credentials = self.credentials.as_deref().unwrap_or_default();
            req = req.with_header("Authorization", format!("{scheme} {credentials}"));
        }
        if let Some(token) = &self.token {
            req = req.with_header("X-A2A-Notification-Token", token);
        }
        // The delivery is the task's work: a child of the task's span.
        if let Some(trace) = trace {
            trace.put_on(&mut req.headers);
        }
        req
    }
}

/// Refuses webhook URLs that point inside the agent's network (SSRF):
/// loopback, private, link-local and cloud-metadata addresses, and the
/// names `localhost` and `metadata.google.internal`, unless `allow_private`.
/// A name that resolves to such an address is the host's to refuse.
pub fn check_webhook_url(url: &str, allow_private: bool) -> Result<(), String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| format!("webhook {} is not an http(s) URL", quoted(url)))?;
    // A URL parser (fetch's) drops tabs and line breaks and ends the host at
    // a backslash: refuse them, so the host read here is the one reached.
    if rest.bytes().any(|b| b <= b' ' || b == b'\\' || b == 0x7f) {
        return Err(format!(
            "webhook {} has spaces, control characters or a backslash",
            quoted(url)
        ));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit('@').next().unwrap_or_default();
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.split(':').next().unwrap_or_default(),
    };
    if host.is_empty() {
        return Err(format!("webhook {} has no host", quoted(url)));
    }
    if allow_private {
        return Ok(());
    }
    let host = host.to_ascii_lowercase();
    let internal = match parse_ip(&host) {
        Some(ip) => is_internal(ip),
        None => {
            // Anything else must be a plain DNS name: a URL parser would read
            // percent-escapes, other scripts' digits (IDNA) or a numeric last
            // label (`127.1`, `0x7f000001`, `127.0.0.1.`) as an address.
            let name = host.strip_suffix('.').unwrap_or(&host);
            let plain = name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
            if !plain || ends_in_a_number(name) {
                return Err(format!(
                    "webhook {} names its host in a form a URL parser may read as another \
                     address: use a DNS name (punycode for other scripts) or a dotted address",
                    quoted(url)
                ));
            }
            name == "localhost"
                || name.ends_with(".localhost")
                || name == "metadata.google.internal"
                || name == "metadata"
        }
    };
    if internal {
        return Err(format!(
            "webhook {} points at a loopback, private, link-local or metadata address; \
             the agent's operator must allow private webhooks",
            quoted(url)
        ));
    }
    Ok(())
}

/// Whether a URL parser reads `name` as an IPv4 address (WHATWG URL, "ends in
/// a number"): its last label is decimal digits or `0x` and hex digits.
fn ends_in_a_number(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or_default();
    let hex = last.strip_prefix("0x");
    !last.is_empty()
        && (last.bytes().all(|b| b.is_ascii_digit())
            || hex.is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit())))
}

/// `host:port` of a webhook URL, for a host to resolve (the port is the
/// scheme's when none is written); `None` when it is not http(s).
pub fn webhook_address(url: &str) -> Option<String> {
    let (rest, port) = match url.strip_prefix("https://") {
        Some(rest) => (rest, 443),
        None => (url.strip_prefix("http://")?, 80),
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit('@').next()?;
    let has_port = match host_port.rfind(']') {
        Some(end) => host_port
            .get(end..)
            .is_some_and(|r| r.as_bytes().contains(&b':')),
        None => host_port.as_bytes().contains(&b':'),
    };
    Some(if has_port {
        host_port.to_string()
    } else {
        format!("{host_port}:{port}")
    })
}

/// Whether an address is loopback, private, link-local, carrier-grade NAT
/// or unspecified: where a webhook must not point unless allowed. Hosts
/// check the addresses a webhook's name resolves to with it.
pub fn is_internal(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                // 100.64.0.0/10 (carrier-grade NAT), 0.0.0.0/8
                || (o[0] == 100 && (o[1] & 0xc0) == 64)
                || o[0] == 0
        }
        std::net::IpAddr::V6(v6) => {
            let s = v6.segments();
            v6.is_loopback()
                || v6.is_unspecified()
                || (s[0] & 0xfe00) == 0xfc00 // unique local
                || (s[0] & 0xffc0) == 0xfe80 // link-local
                || v6.to_ipv4_mapped().is_some_and(|v4| is_internal(v4.into()))
        }
    }
}

/// The notifications waiting to be delivered, in order, per task. The
/// configs themselves live in the store only ([`TaskStore::put_push_config`]),
/// read each time they are used: a webhook set or deleted through another
/// replica counts here at the next delivery.
#[derive(Debug, Default)]
pub(crate) struct PushConfigs {
    /// Per task: the saved states not yet delivered, with when they were
    /// saved (Unix ms); present while a delivery job runs.
    queues: HashMap<String, std::collections::VecDeque<(Task, Option<u64>)>>,
}

impl PushConfigs {
    /// Queues `task`'s state, saved at `saved_ms`; true when no delivery
    /// job runs for the task yet (the caller must start one:
    /// [`PushConfigs::next`]).
    pub(crate) fn enqueue(&mut self, task: &Task, saved_ms: Option<u64>) -> bool {
        let start = !self.queues.contains_key(&task.id);
        self.queues
            .entry(task.id.clone())
            .or_default()
            .push_back((task.clone(), saved_ms));
        start
    }

    /// The task's next state to deliver; `None` ends its delivery job.
    pub(crate) fn next(&mut self, task_id: &str) -> Option<(Task, Option<u64>)> {
        let queue = self.queues.get_mut(task_id)?;
        let next = queue.pop_front();
        if next.is_none() {
            self.queues.remove(task_id);
        }
        next
    }
}

/// A task's configs as its store keeps them ([`PushConfig::to_stored`]),
/// with when each was set (Unix ms, `"createdMs"`, when known).
pub(super) fn configs_of(stored: Option<Value>, task_id: &str) -> Vec<(PushConfig, Option<u64>)> {
    let mut list = Vec::new();
    // A plain loop, not an iterator chain (see ARCHITECTURE.md).
    for c in super::store::push_records(stored).iter() {
        if list.len() == MAX_CONFIGS_PER_TASK {
            break;
        }
        let created = c.get("createdMs").and_then(Value::as_u64);
        if let Some(config) = PushConfig::from_stored(c, task_id) {
            list.push((config, created));
        }
    }
    list
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> A2aServer<S, H, F> {
    /// A SendMessage's `configuration.taskPushNotificationConfig` (0.3:
    /// `pushNotificationConfig`) for task `task`, checked. A continued
    /// task's is stored at once; a new one's after the task's first save
    /// ([`Self::store_new_push`]), so a send refused before it leaves
    /// nothing behind.
    pub(super) fn push_on_send(
        &self,
        params: &Value,
        task: &str,
        shape: Shape,
    ) -> Result<super::PendingPush, RpcError> {
        let Some(config) = super::send::sent_webhook(params) else {
            return Ok(None);
        };
        let Some((options, _)) = &self.push else {
            return Err(push_not_supported());
        };
        let config = PushConfig::from_value(config, task, shape)?;
        check_webhook_url(&config.url, options.allow_private_webhooks)
            .map_err(|e| RpcError::invalid_field("configuration.pushNotificationConfig.url", &e))?;
        Ok(Some(config))
    }

    /// Stores the webhook a new task was sent with, if any, once the task is.
    pub(super) async fn store_new_push(
        &self,
        io: &super::Io<H>,
        pending: super::PendingPush,
        owner: Option<&str>,
    ) -> Result<(), RpcError> {
        match pending {
            Some(config) => self.put_push(io, config, owner).await,
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn parse_ip_is_std_parse() {
        let mut cases: Vec<String> = [
            "127.0.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "256.1.1.1",
            "01.2.3.4",
            "1.2.3",
            "1.2.3.4.5",
            "1.2.3.4:80",
            "1..2.3",
            "1.2.3.0004",
            "1.2.3.000",
            "",
            ".",
            ":",
            "::",
            ":::",
            "::1",
            "1::",
            "1:2:3:4:5:6:7:8",
            "1:2:3:4:5:6:7:8:9",
            "1:2:3:4:5:6:7::",
            "::1:2:3:4:5:6:7",
            "::1:2:3:4:5:6:7:8",
            "1:2:3:4:5:6:7::8",
            "::ffff:127.0.0.1",
            "::127.0.0.1",
            "1:2:3:4:5:6:1.2.3.4",
            "1:2:3:4:5:6:7:1.2.3.4",
            "1.2.3.4::",
            "::1.2.3.4:5",
            "fe80::1",
            "FD00::",
            "12345::",
            "1:2::3::4",
            "::ffff:1.2.3",
            "0:0:0:0:0:0:0:0",
            "00000::",
            "g::",
            "1:2:3:4:5:6::1.2.3.4",
            "::0.0.0.0",
        ]
        .map(String::from)
        .to_vec();
        // A seeded generator over the characters an address is made of.
        let alphabet = b"0123456789afAF:.:.::1g ";
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..40_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 24) as usize;
            let text: String = (0..len)
                .map(|i| {
                    char::from(alphabet[((seed >> (i * 2 % 60)) as usize + i * 7) % alphabet.len()])
                })
                .collect();
            cases.push(text);
        }
        // And texts made of the pieces of addresses.
        let pieces = [
            "0", "1", "00", "7f", "ff", "FFFF", "fffff", "255", "256", "01", "1.2.3.4", ":", "::",
            ".", ":", ".",
        ];
        for _ in 0..40_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = 1 + (seed % 16) as usize;
            let text: String = (0..len)
                .map(|i| pieces[((seed >> (i * 4 % 60)) as usize + i) % pieces.len()])
                .collect();
            cases.push(text);
        }
        for text in &cases {
            assert_eq!(
                parse_ip(text),
                text.parse::<std::net::IpAddr>().ok(),
                "{text:?}"
            );
        }
        let parsed = cases.iter().filter(|t| parse_ip(t).is_some()).count();
        assert!(
            parsed > 1_000,
            "the generators should make addresses too ({parsed})"
        );
    }

    #[test]
    fn internal_webhooks_are_refused_unless_allowed() {
        for url in [
            "http://127.0.0.1:9/hook",
            "http://localhost/hook",
            "http://api.localhost/x",
            "http://10.1.2.3/",
            "http://172.16.0.1/",
            "http://192.168.1.1:8080/",
            "http://169.254.169.254/latest/meta-data",
            "http://metadata.google.internal/computeMetadata",
            "http://[::1]:8080/",
            "http://[fe80::1]/",
            "http://[fd00::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://0.0.0.0/",
            "http://100.64.0.1/",
            "http://user@127.0.0.1/",
        ] {
            assert!(check_webhook_url(url, false).is_err(), "{url}");
            assert!(check_webhook_url(url, true).is_ok(), "{url}");
        }
        for url in [
            "https://hooks.example.com/a2a",
            "http://8.8.8.8/x",
            "https://[2001:db8::1]/",
        ] {
            assert!(check_webhook_url(url, false).is_ok(), "{url}");
        }
        for url in ["ftp://example.com/", "http:///x", "hooks.example.com"] {
            assert!(check_webhook_url(url, true).is_err(), "{url}");
        }
    }

    #[test]
    fn hosts_a_url_parser_reads_as_internal_addresses_are_refused() {
        // fetch (the npm and worker hosts) parses the URL the WHATWG way, so
        // each of these reaches loopback or a private address there, while
        // the text is not an address std or a plain name check recognises.
        for url in [
            "http://0x7f000001/hook",
            "http://2130706433/hook",
            "http://127.1/hook",
            "http://0177.0.0.1/hook",
            "http://0x7f.0.0.1/hook",
            "http://10.0.1/hook",
            "http://127.0.0.1./hook",
            "http://localhost./hook",
            "http://%31%32%37.0.0.1/hook",
            "http://\u{ff11}\u{ff12}\u{ff17}.0.0.1/hook",
            "http://8.8.8.8./hook",
        ] {
            assert!(check_webhook_url(url, false).is_err(), "{url}");
            assert!(check_webhook_url(url, true).is_ok(), "{url}");
        }
        // Characters a URL parser drops or reads as the end of the host.
        for url in [
            "http://127.0.0.1\\@hooks.example.com/",
            "http://127.0.0.1\t@hooks.example.com/",
            "http://hooks.example.com\n/",
            "http://hooks .example.com/",
        ] {
            assert!(check_webhook_url(url, false).is_err(), "{url:?}");
            assert!(check_webhook_url(url, true).is_err(), "{url:?}");
        }
        for url in [
            "https://xn--bcher-kva.example/a2a",
            "https://hooks-1.example.com:8443/p?q=1#f",
            "https://user:pw@hooks.example.com/",
            "https://2001.example/",
        ] {
            assert!(check_webhook_url(url, false).is_ok(), "{url}");
        }
    }

    #[test]
    fn the_address_to_resolve_has_the_schemes_port() {
        assert_eq!(
            webhook_address("https://h.example/x").as_deref(),
            Some("h.example:443")
        );
        assert_eq!(
            webhook_address("http://u@h:8080/x").as_deref(),
            Some("h:8080")
        );
        assert_eq!(
            webhook_address("http://[::1]/x").as_deref(),
            Some("[::1]:80")
        );
        assert_eq!(webhook_address("ftp://h/"), None);
    }

    #[test]
    fn the_notification_body_is_the_task_value_as_text() {
        let task = Task::from_value(&json!({
            "id": "t1", "contextId": "c1", "kind": "task",
            "status": {"state": "input-required", "timestamp": "2026-01-02T03:04:05.678Z",
                "message": {"role": "agent", "messageId": "m2", "parts": [{"kind": "text", "text": "which?"}]}},
            "history": [{"role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": "q \"1\""},
                {"kind": "data", "data": {"n": 1.5, "k": [null, true]}}]}],
            "artifacts": [{"artifactId": "a1", "parts": [{"kind": "text", "text": "é"}]}],
            "metadata": {"z": 1, "a": {"b": 2}}
        }))
        .expect("task");
        for shape in [Shape::V10, Shape::V03] {
            let config = PushConfig {
                id: "p".into(),
                task_id: "t1".into(),
                url: "https://h/x".into(),
                token: None,
                scheme: None,
                credentials: None,
                shape,
            };
            let expected = match shape {
                Shape::V10 => json!({"task": task.to_value(Shape::V10)}),
                Shape::V03 => task.to_value(Shape::V03),
            };
            let body = String::from_utf8(config.request(&task).body).expect("utf-8");
            assert_eq!(body, crate::wire::json::text(&expected));
        }
    }

    #[test]
    fn configs_read_in_both_shapes_and_never_echo_credentials() {
        let v10 = json!({"url": "https://h/x", "token": "tk",
            "authentication": {"scheme": "Bearer", "credentials": "s3cret"}});
        let v03 = json!({"url": "https://h/x", "token": "tk",
            "authentication": {"schemes": ["Bearer"], "credentials": "s3cret"}});
        let a = PushConfig::from_value(&v10, "t1", Shape::V10).expect("1.0");
        let b = PushConfig::from_value(&v03, "t1", Shape::V10).expect("0.3");
        assert_eq!(a, b);
        let req = a.request(
            &Task::from_value(&json!({"id": "t1", "status": {"state": "completed"}}))
                .expect("task"),
        );
        assert_eq!(req.header("Authorization"), Some("Bearer s3cret"));
        assert_eq!(req.header("X-A2A-Notification-Token"), Some("tk"));
        let body: Value = serde_json::from_slice(&req.body).expect("json");
        assert_eq!(body["task"]["status"]["state"], "TASK_STATE_COMPLETED");
        assert!(!a.to_value(Shape::V10).to_string().contains("s3cret"));
        assert!(!a.to_value(Shape::V03).to_string().contains("s3cret"));
        assert_eq!(
            a.to_value(Shape::V03)["pushNotificationConfig"]["url"],
            "https://h/x"
        );
        assert!(PushConfig::from_value(&json!({}), "t1", Shape::V10).is_err());
    }
}
