//! The proxy's request parser and the allow-list: no panic; an accepted plain-HTTP request is
//! forwarded with the URI's host as `Host`, without `Proxy-*` headers, and with one
//! `Connection: close`; whatever the allow-list admits by IP is an IP literal it lists.
#![no_main]
use cordon::net::policy::{AllowList, Target, parse_allow_list, parse_target};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // First line: an allow-list; the rest: a request head.
    let (list, head) = text.split_once('\n').unwrap_or((text, ""));
    let policy = AllowList {
        entries: parse_allow_list(list).unwrap_or_default(),
        ..AllowList::default()
    };
    let Ok(req) = cordon::net::proxy::parse_request(head) else {
        return;
    };
    if !req.connect {
        let h = req.upstream_head.to_ascii_lowercase();
        assert!(h.ends_with("connection: close\r\n\r\n"));
        assert!(!h.contains("\r\nproxy-"));
        assert_eq!(h.matches("\r\nhost:").count(), 1);
    }
    if let Ok(target) = parse_target(&req.host.to_ascii_lowercase()) {
        if let (Target::Ip(ip), Ok(_)) = (&target, policy.admit(&target, req.port)) {
            assert!(policy.ip_listed(*ip, req.port));
        }
    }
});
