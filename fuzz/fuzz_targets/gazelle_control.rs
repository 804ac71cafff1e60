//! Fuzzes a Gazelle site's control calls (`shoal_gazelle::control`): any request path must
//! give an answer or `None`, never a panic. The first byte picks an action or report the
//! site sends, with the correct password, so that most inputs reach the parameters; other
//! values take the whole path from the input. Every answer of an update is `success`, a
//! bencoded failure or `info_torrent`'s JSON; every report is JSON, a failure, or text.
#![forbid(unsafe_code)]
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use shoal_gazelle::control::{route, Action, Control, Kind, ReportQuery};
use shoal_gazelle::model::SiteData;
use shoal_gazelle::{GazelleConfig, Site};
use shoal_tracker::private::{Members, Roster};

const SITE: &str = "ssssssssssssssssssssssssssssssss";
const REPORT: &str = "rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr";

const CALLS: [&str; 22] = [
    "update?action=add_torrent&",
    "update?action=update_torrent&",
    "update?action=update_torrents&",
    "update?action=delete_torrent&",
    "update?action=add_token&",
    "update?action=remove_token&",
    "update?action=add_user&",
    "update?action=update_user&",
    "update?action=trace_user&",
    "update?action=remove_user&",
    "update?action=remove_users&",
    "update?action=change_passkey&",
    "update?action=add_whitelist&",
    "update?action=edit_whitelist&",
    "update?action=remove_whitelist&",
    "update?action=update_announce_interval&",
    "update?action=update_announce_jitter&",
    "update?action=info_torrent&",
    "report?get=stats&",
    "report?get=user&",
    "report?get=torrent&",
    "report?get=prom_stats&",
];

fn control() -> &'static Control {
    static CONTROL: OnceLock<Control> = OnceLock::new();
    CONTROL.get_or_init(|| {
        let members = Arc::new(Members::new(&Roster::default(), false));
        let site = Site::new(GazelleConfig::default(), members, SiteData::default());
        Control::new(Arc::new(site), SITE.into(), REPORT.into())
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let rest = String::from_utf8_lossy(rest);
    let path = match CALLS.get(usize::from(pick)) {
        Some(call) if call.starts_with("update") => format!("/{SITE}/{call}{rest}"),
        Some(call) => format!("/{REPORT}/{call}{rest}"),
        None => rest.to_string(),
    };
    // The parsers alone, on any query.
    let _ = Action::parse(&rest);
    let _ = ReportQuery::parse(&rest);
    let Some(reply) = control().answer(&path) else {
        assert!(route(&path).is_none());
        return;
    };
    let (_, kind, _) = route(&path).expect("answered calls are routed");
    let body = String::from_utf8_lossy(&reply.body);
    let failure = body.starts_with("d14:failure reason");
    match kind {
        Kind::Update => assert!(
            body == "success"
                || failure
                || serde_json::from_slice::<serde_json::Value>(&reply.body).is_ok(),
            "{body}"
        ),
        Kind::Report if reply.content_type == "application/json" => {
            serde_json::from_slice::<serde_json::Value>(&reply.body).expect("JSON");
        }
        Kind::Report => {}
    }
});
