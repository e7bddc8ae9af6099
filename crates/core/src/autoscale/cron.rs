//! CronFederatedHPA schedules: five-field cron expressions evaluated in a time zone
//! (spec §5.3). Karmada evaluates in the controller's zone when `timeZone` is unset;
//! flotilla uses UTC then, so the result does not depend on where it runs.

use std::str::FromStr;

use croner::Cron;
use jiff::Timestamp;
use jiff::tz::TimeZone;

/// A parsed rule schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    cron: Cron,
    zone: TimeZone,
}

impl Schedule {
    /// Parses `schedule` (five fields: minute hour day-of-month month day-of-week) in
    /// `time_zone` (an IANA name; UTC when unset).
    pub fn parse(schedule: &str, time_zone: Option<&str>) -> Result<Self, String> {
        if schedule.split_whitespace().count() != 5 {
            return Err(format!("{schedule:?} is not a five-field cron expression"));
        }
        let cron = Cron::from_str(schedule).map_err(|e| format!("{schedule:?}: {e}"))?;
        let zone = match time_zone {
            None | Some("") => TimeZone::UTC,
            Some(name) => TimeZone::get(name).map_err(|_| format!("unknown time zone {name:?}"))?,
        };
        Ok(Schedule { cron, zone })
    }

    /// The first scheduled time strictly after `after` (unix seconds).
    pub fn next_after(&self, after: i64) -> Option<i64> {
        let start = Timestamp::from_second(after).ok()?.to_zoned(self.zone.clone());
        self.cron.find_next_occurrence(&start, false).ok().map(|t| t.timestamp().as_second())
    }

    /// The latest scheduled time in `(from, to]`, if any: a tick that spans several
    /// occurrences runs the rule once, for the latest, as a missed cron job would.
    pub fn due(&self, from: i64, to: i64) -> Option<i64> {
        let mut last = None;
        let mut at = from;
        while let Some(next) = self.next_after(at).filter(|n| *n <= to) {
            last = Some(next);
            at = next;
        }
        last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unix(text: &str) -> i64 {
        text.parse::<Timestamp>().unwrap().as_second()
    }

    #[test]
    fn schedules_run_in_their_time_zone() {
        let utc = Schedule::parse("30 9 * * 1-5", None).unwrap();
        // Friday 2026-11-27 09:30 UTC, then Monday.
        assert_eq!(utc.next_after(unix("2026-11-27T09:00:00Z")), Some(unix("2026-11-27T09:30:00Z")));
        assert_eq!(utc.next_after(unix("2026-11-27T09:30:00Z")), Some(unix("2026-11-30T09:30:00Z")));
        let tokyo = Schedule::parse("0 9 * * *", Some("Asia/Tokyo")).unwrap();
        assert_eq!(tokyo.next_after(unix("2026-11-30T00:00:00Z")), Some(unix("2026-12-01T00:00:00Z")));
        assert_eq!(
            tokyo.due(unix("2026-11-29T23:00:00Z"), unix("2026-12-02T00:30:00Z")),
            Some(unix("2026-12-02T00:00:00Z"))
        );
        assert_eq!(tokyo.due(unix("2026-12-01T00:00:00Z"), unix("2026-12-01T12:00:00Z")), None, "from is exclusive");
        assert!(Schedule::parse("0 9 * *", None).unwrap_err().contains("five-field"));
        assert!(Schedule::parse("61 9 * * *", None).is_err());
        assert!(Schedule::parse("0 9 * * *", Some("Mars/Olympus")).unwrap_err().contains("unknown time zone"));
    }
}
